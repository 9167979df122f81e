# Google Benchmark micro-benchmarks (STYLE.md rule 10): speed goals live here,
# never as timed assertions in tests. One executable, one file per topic.
add_executable(ppb_micro_bench
  ${CMAKE_CURRENT_LIST_DIR}/schedule_sim_benchmark.cpp
  ${CMAKE_CURRENT_LIST_DIR}/partition_benchmark.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plan_benchmark.cpp
)
target_link_libraries(ppb_micro_bench PRIVATE ppb::reports ppb::sim ppb::schedule ppb::model benchmark::benchmark
                      benchmark::benchmark_main ppb::warnings)

# The cuda backend's units on the GPU (CUDA builds; a GPU or the CUDA
# emulator): ppb_cuda_unit_bench --model gpt-small. Its own executable: it
# needs the backend's private headers and a device, the rest does not.
if(PPB_HAVE_CUDA)
  add_executable(ppb_cuda_unit_bench ${CMAKE_CURRENT_LIST_DIR}/cuda_unit_benchmark.cpp)
  target_include_directories(ppb_cuda_unit_bench PRIVATE ${PROJECT_SOURCE_DIR}/pipeline/exec/src)
  target_link_libraries(ppb_cuda_unit_bench PRIVATE ppb::exec ppb::model benchmark::benchmark
                                                    ppb::warnings)
endif()
