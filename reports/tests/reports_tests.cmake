# Tests of the report (label unit). Fixtures are made with the tool itself
# (schedule generator + simulator + write_result_file), see fixtures.hpp.
ppb_add_gtest(reports_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/tests/report_test.cpp ${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures.cpp
  LIBS ppb::reports
  LABELS unit)
# Result files recorded on an H200 (tests/data/h200/README.md).
target_compile_definitions(reports_test PRIVATE
  PPB_REPORTS_H200_DATA="${CMAKE_CURRENT_SOURCE_DIR}/tests/data/h200")

# The nightly gate (regression.cpp): comparisons, the gate over nights,
# confirmation by re-runs.
ppb_add_gtest(regression_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/tests/regression_test.cpp ${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures.cpp
  LIBS ppb::reports
  LABELS unit)
target_compile_definitions(regression_test PRIVATE
  PPB_REPORTS_H200_DATA="${CMAKE_CURRENT_SOURCE_DIR}/tests/data/h200")

# The gate on the GPUs' own health (health_gate.cpp) beside GPU sweeps.
ppb_add_gtest(health_gate_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/tests/health_gate_test.cpp ${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures.cpp
  LIBS ppb::reports
  LABELS unit)

# The writers: JUnit, CSV, Google Benchmark JSON, HTML, Markdown.
ppb_add_gtest(writers_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/tests/writers_test.cpp ${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures.cpp
  LIBS ppb::reports
  LABELS unit)

# The planner: cluster descriptions, ranking against the simulator and the
# memory model, pruning, advice.
ppb_add_gtest(plan_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/tests/plan_test.cpp
  LIBS ppb::reports
  LABELS unit)
target_compile_definitions(plan_test PRIVATE
  PPB_REPORTS_H200_DATA="${CMAKE_CURRENT_SOURCE_DIR}/tests/data/h200")

# The gate's statistics on synthetic samples (exact U and p-values, change points).
ppb_add_gtest(stats_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/tests/stats_test.cpp
  LIBS ppb::reports
  LABELS unit)

# Headless Chromium renders the HTML report (skips, saying why, without
# chromium). The screenshot stays in ${CMAKE_CURRENT_BINARY_DIR}/artifacts.
find_package(ZLIB)
if(ZLIB_FOUND)
  add_executable(reports_browser_test ${CMAKE_CURRENT_SOURCE_DIR}/tests/report_browser_test.cpp
                                      ${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures.cpp)
  target_link_libraries(reports_browser_test PRIVATE ppb::reports ZLIB::ZLIB GTest::gtest GTest::gtest_main ppb::warnings)
  target_compile_definitions(reports_browser_test PRIVATE
    PPB_REPORTS_ARTIFACT_DIR="${CMAKE_CURRENT_BINARY_DIR}/artifacts")
  gtest_discover_tests(reports_browser_test PROPERTIES LABELS unit TIMEOUT 240 DISCOVERY_TIMEOUT 60)
else()
  message(STATUS "reports: zlib not found (zlib1g-dev), the headless-browser test of the HTML report is not built")
endif()

# `pipebench report` through the real command (exit codes 0/1/2, files written).
add_executable(reports_fixture_gen ${CMAKE_CURRENT_SOURCE_DIR}/tests/fixture_gen.cpp
                                   ${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures.cpp)
target_link_libraries(reports_fixture_gen PRIVATE ppb::reports GTest::gtest ppb::warnings)
add_test(NAME reports_cli
         COMMAND ${CMAKE_COMMAND} -DPIPEBENCH=$<TARGET_FILE:pipebench> -DGEN=$<TARGET_FILE:reports_fixture_gen>
                 -DOUT=${CMAKE_CURRENT_BINARY_DIR}/cli_fixtures -P ${CMAKE_CURRENT_SOURCE_DIR}/tests/cli_test.cmake)
set_tests_properties(reports_cli PROPERTIES LABELS unit TIMEOUT 120)
