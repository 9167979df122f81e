# Result schema (pipebench.result/1): round-trip, field errors, atomic writes.
ppb_add_gtest(result_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/result_test.cpp LIBS ppb::result LABELS unit)
