# ppb_add_gtest(NAME SOURCES a_test.cpp ... LIBS ppb::core ... [LABELS unit])
#   One GoogleTest executable; each TEST becomes its own ctest case with the labels.
function(ppb_add_gtest name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main ppb::warnings)
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  gtest_discover_tests(${name} PROPERTIES LABELS "${ARG_LABELS}" DISCOVERY_TIMEOUT 60)
endfunction()

# ppb_add_mpi_test(NAME RANKS n COMMAND exe args... [LABELS mpi] [TIMEOUT s])
#   Runs COMMAND under ${MPIEXEC_EXECUTABLE} with n ranks (oversubscribed, as
#   root where needed). Open MPI's root guards are set through the environment.
function(ppb_add_mpi_test name)
  cmake_parse_arguments(ARG "" "RANKS;TIMEOUT" "COMMAND;LABELS" ${ARGN})
  if(NOT ARG_LABELS)
    set(ARG_LABELS mpi)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_test(NAME ${name}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ARG_RANKS} --oversubscribe
                   ${MPIEXEC_PREFLAGS} ${ARG_COMMAND} ${MPIEXEC_POSTFLAGS})
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;OPENBLAS_NUM_THREADS=1")
endfunction()
