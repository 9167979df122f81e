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

# Its tests: on the CUDA emulator (label emulated) every dtype x unit kind x
# pass runs once on a small model with its FLOPs/s and bytes/s over its
# event time (bench/tests/unit_bench_check.py, about a second); without a
# device, or with a bad --model, one line and exit 2.
if(TARGET ppb_cuda_unit_bench AND PPB_BUILD_TESTS)
  set(tests ${PROJECT_SOURCE_DIR}/bench/tests)
  add_test(NAME micro_cuda_unit_bench_without_gpu
           COMMAND ${tests}/device_expect.sh no-gpu 2 30 "^ppb_cuda_unit_bench: no usable GPU: .+" --
                   $<TARGET_FILE:ppb_cuda_unit_bench> --model gpt-tiny)
  add_test(NAME micro_cuda_unit_bench_bad_model
           COMMAND ${tests}/expect_exit.sh 2 30 "^ppb_cuda_unit_bench: --model: unknown model 'gpt-nope'" --
                   $<TARGET_FILE:ppb_cuda_unit_bench> --model gpt-nope)
  set_tests_properties(micro_cuda_unit_bench_without_gpu micro_cuda_unit_bench_bad_model
                       PROPERTIES LABELS unit TIMEOUT 60 SKIP_RETURN_CODE 77)
  if(PPB_HAVE_CUDAEMU)
    add_test(NAME emulated_cuda_unit_bench
             COMMAND python3 ${tests}/unit_bench_check.py -- $<TARGET_FILE:ppb_cuda_unit_bench>
                     --model gpt:layers=1,hidden=32,heads=2,seq=16,vocab=64,mbs=2
                     --benchmark_min_time=0 --benchmark_format=json)
    set_tests_properties(emulated_cuda_unit_bench PROPERTIES LABELS emulated TIMEOUT 60
                         ENVIRONMENT "${PPB_CUDAEMU_ENV}")
  endif()
endif()
