# Google Benchmark micro-benchmarks (STYLE.md rule 10): speed goals live here,
# never as timed assertions in tests. One executable, one file per topic.
add_executable(ppb_micro_bench
  ${CMAKE_CURRENT_LIST_DIR}/schedule_sim_benchmark.cpp
  ${CMAKE_CURRENT_LIST_DIR}/partition_benchmark.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plan_benchmark.cpp
)
target_link_libraries(ppb_micro_bench PRIVATE ppb::reports ppb::sim ppb::schedule ppb::model benchmark::benchmark
                      benchmark::benchmark_main ppb::warnings)
