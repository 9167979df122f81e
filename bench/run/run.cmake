# The run command's helpers (included from bench/command.cmake before the
# pipebench target is made): one static library, linked into pipebench and
# into the run command's tests. Paths are relative to bench/.
add_library(ppb_run STATIC
  run/run_options.cpp
  run/sweep.cpp
  run/metrics.cpp
  run/noise.cpp
  run/environment.cpp
  run/progress.cpp
  run/runner.cpp
  run/out_dir.cpp
  run/rerun.cpp
  run/check.cpp
  run/rank_record.cpp
  run/trace_output.cpp
  run/gpu_state.cpp
)
add_library(ppb::run ALIAS ppb_run)
target_include_directories(ppb_run PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(ppb_run PUBLIC ppb_cli ppb::core ppb::exec ppb::profiling MPI::MPI_CXX PRIVATE ppb::reports ppb::warnings)
list(APPEND PPB_COMMAND_LIBS ppb::run)
