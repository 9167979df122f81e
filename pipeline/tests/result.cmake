# Result schema (pipebench.result/1): round-trip, field errors, atomic writes.
ppb_add_gtest(result_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/result_test.cpp LIBS ppb::result LABELS unit)
# The repository, for the real result files the round-trip test reads.
target_compile_definitions(result_test PRIVATE PPB_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# The GPU state's pure parts (throttle reasons, summaries) and the health
# probe's file (pipebench.health/1).
ppb_add_gtest(gpu_state_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/gpu_state_test.cpp LIBS ppb::result LABELS unit)
