# ppb::reports: result loading, the documents' claims, regression gate and the
# writers (HTML, Markdown, JUnit, CSV, Google Benchmark JSON). Reads JSON only:
# links ppb::core and Boost::json, never MPI or CUDA (STYLE.md rule 13).

# The reference file is compiled in, so `pipebench report` works from anywhere.
set(PPB_REFERENCE_JSON ${CMAKE_CURRENT_SOURCE_DIR}/reference/documents.json)
set(PPB_REFERENCE_CPP ${CMAKE_CURRENT_BINARY_DIR}/reference_data.cpp)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PPB_REFERENCE_JSON})
file(READ ${PPB_REFERENCE_JSON} PPB_REFERENCE_TEXT)
file(CONFIGURE OUTPUT ${PPB_REFERENCE_CPP} CONTENT
"// Generated from reports/reference/documents.json by reports/reports.cmake.
namespace ppb::reports {
extern const char* const kBuiltinReferenceJson;
const char* const kBuiltinReferenceJson = R\"ppbref(@PPB_REFERENCE_TEXT@)ppbref\";
}  // namespace ppb::reports
" @ONLY)

add_library(ppb_reports
  ${CMAKE_CURRENT_SOURCE_DIR}/src/load.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/format.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/fast_paths.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/reference.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/claims.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/stats.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/history.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/regression.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/health_gate.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/predict.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/plan.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/plan_cluster.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/plan_cupti.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/plan_validate.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/report_model.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/svg.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/html_writer.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/markdown_writer.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/junit_writer.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/csv_writer.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/gbench_json_writer.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/report.cpp
  ${PPB_REFERENCE_CPP})
add_library(ppb::reports ALIAS ppb_reports)
target_include_directories(ppb_reports PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
target_link_libraries(ppb_reports PUBLIC ppb::core Boost::json PRIVATE ppb::warnings)

if(PPB_BUILD_TESTS)
  include(${CMAKE_CURRENT_SOURCE_DIR}/tests/reports_tests.cmake)
endif()
