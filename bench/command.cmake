# The `pipebench` command: main.cpp plus one cmd_<name>.cpp per subcommand.
set(PPB_BUILD_INFO_CPP ${CMAKE_CURRENT_BINARY_DIR}/build_info.cpp)
add_custom_target(ppb_build_info
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DOUTPUT=${PPB_BUILD_INFO_CPP}
          "-DCOMPILER=${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}"
          -DBUILD_TYPE=${CMAKE_BUILD_TYPE} -DCUDA=$<IF:$<BOOL:${PPB_HAVE_CUDA}>,true,false>
          -P ${PROJECT_SOURCE_DIR}/cmake/BuildInfo.cmake
  BYPRODUCTS ${PPB_BUILD_INFO_CPP}
  COMMENT "build info")

add_library(ppb_cli STATIC cli.cpp ${PPB_BUILD_INFO_CPP})
add_dependencies(ppb_cli ppb_build_info)
target_include_directories(ppb_cli PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
# ppb::model: the vocabulary padding flag takes its default and range from model.hpp.
target_link_libraries(ppb_cli PUBLIC ppb::profiling CLI11::CLI11 PRIVATE ppb::model ppb::warnings)

set(PPB_COMMAND_SOURCES main.cpp cmd_list.cpp cmd_schedule.cpp cmd_simulate.cpp cmd_run.cpp
                        cmd_p2p.cpp cmd_report.cpp cmd_plan.cpp cmd_health.cpp)
set(PPB_COMMAND_LIBS ppb::core ppb::exec ppb::reports)
# p2p on device buffers (--memory device) where CUDA is built in.
if(PPB_HAVE_CUDA AND TARGET ppb_exec)
  list(APPEND PPB_COMMAND_SOURCES p2p_device.cpp)
  list(APPEND PPB_COMMAND_LIBS CUDA::cudart)
endif()
# The run command's helpers list themselves (sources relative to bench/).
include(${CMAKE_CURRENT_SOURCE_DIR}/run/run.cmake)

add_executable(pipebench ${PPB_COMMAND_SOURCES})
target_link_libraries(pipebench PRIVATE ppb_cli ${PPB_COMMAND_LIBS} ppb::warnings)
install(TARGETS pipebench)

if(PPB_BUILD_TESTS)
  include(${CMAKE_CURRENT_SOURCE_DIR}/tests/command.cmake)
  include(${CMAKE_CURRENT_SOURCE_DIR}/tests/run.cmake)
  include(${CMAKE_CURRENT_SOURCE_DIR}/tests/health.cmake)
endif()
