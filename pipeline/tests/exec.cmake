# The executor on real MPI ranks (label mpi): gradients against the
# reference, timed backend against the simulator, memory guard, transport;
# and the failure behaviour (watchdog, an exception on one rank).
add_executable(exec_test exec_test.cpp)
target_link_libraries(exec_test PRIVATE ppb::exec ppb::core GTest::gtest ppb::warnings)
ppb_add_mpi_test(exec_test_2ranks RANKS 2 COMMAND $<TARGET_FILE:exec_test> TIMEOUT 120)
ppb_add_mpi_test(exec_test_4ranks RANKS 4 COMMAND $<TARGET_FILE:exec_test> TIMEOUT 120)

add_executable(exec_probe exec_probe.cpp)
target_link_libraries(exec_probe PRIVATE ppb::exec ppb::core ppb::warnings)
ppb_add_mpi_test(exec_watchdog RANKS 3 COMMAND $<TARGET_FILE:exec_probe> stall TIMEOUT 30)
set_tests_properties(exec_watchdog PROPERTIES
  PASS_REGULAR_EXPRESSION "rank [0-9]: step 1 stuck for [0-9.]+ s (in|the)[^\n]*aborting")
ppb_add_mpi_test(exec_abort_on_exception RANKS 3 COMMAND $<TARGET_FILE:exec_probe> throw TIMEOUT 30)
set_tests_properties(exec_abort_on_exception PROPERTIES
  PASS_REGULAR_EXPRESSION "error on rank 1 of 3: deliberate failure for the test")
