# The executor on real MPI ranks (label mpi): gradients against the
# reference, timed backend against the simulator, memory guard, transport;
# and the failure behaviour (watchdog, an exception on one rank), the p2p
# benchmark's smoke run and its rank-count error.
add_executable(exec_test exec_test.cpp)
# The timed backend's action bodies, called directly (a private header).
target_include_directories(exec_test PRIVATE ${PROJECT_SOURCE_DIR}/pipeline/exec/src)
target_link_libraries(exec_test PRIVATE ppb::exec ppb::core GTest::gtest ppb::warnings)
ppb_add_mpi_test(exec_test_2ranks RANKS 2 COMMAND $<TARGET_FILE:exec_test> TIMEOUT 120)
ppb_add_mpi_test(exec_test_4ranks RANKS 4 COMMAND $<TARGET_FILE:exec_test> TIMEOUT 120)
# 8 ranks on 2 cores: the timed backend against the simulator and the guard.
ppb_add_mpi_test(exec_test_8ranks RANKS 8
  COMMAND $<TARGET_FILE:exec_test> --gtest_filter=*TimedBubble*:*TimedMemory*:*MemoryGuardTest* TIMEOUT 120)
# The timed-vs-simulator checks (0.02 of bubble, 5% of step time) hold on a
# quiet machine; under `ctest -j` another MPI test beside them takes the cores
# their sleeps wake up on (seen: interleaved 0.022 off at 8 ranks). Alone, they
# pass with margin, so they run alone.
set_tests_properties(exec_test_4ranks exec_test_8ranks PROPERTIES RUN_SERIAL TRUE)

add_executable(exec_probe exec_probe.cpp)
target_link_libraries(exec_probe PRIVATE ppb::exec ppb::core ppb::warnings)

# ppb_exec_expect(name RANKS n CODE c SECONDS s REGEX r COMMAND exe args...):
# mpirun -np n exe args... exits with c within s seconds, output matching r
# (bench/tests/expect_exit.sh checks all three).
function(ppb_exec_expect name)
  cmake_parse_arguments(ARG "" "RANKS;CODE;SECONDS;REGEX" "COMMAND" ${ARGN})
  add_test(NAME ${name}
           COMMAND ${PROJECT_SOURCE_DIR}/bench/tests/expect_exit.sh ${ARG_CODE} ${ARG_SECONDS} "${ARG_REGEX}" --
                   ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ARG_RANKS} --oversubscribe ${ARG_COMMAND})
  set_tests_properties(${name} PROPERTIES LABELS mpi TIMEOUT 60
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;OPENBLAS_NUM_THREADS=1")
endfunction()

# Watchdog: rank 1 stalls in step 1; --timeout 1 s names it and aborts.
ppb_exec_expect(exec_watchdog RANKS 3 CODE 1 SECONDS 20
  REGEX "rank 1: step 1 stuck for [0-9.]+ s in F0 \\(computing\\); aborting"
  COMMAND $<TARGET_FILE:exec_probe> stall)
# Rank 2 of 4 stops between steps: the others wait in the barrier that
# starts step 1 (a dissemination barrier), and rank 3, whose first round
# waits on rank 2, reports first and names it; ranks waiting in a later
# round on ranks that wait themselves report later.
ppb_exec_expect(exec_watchdog_start_barrier RANKS 4 CODE 1 SECONDS 20
  REGEX "rank 3: step 1 stuck for [0-9.]+ s in the barrier that starts the step \\(waiting for rank 2\\); aborting"
  COMMAND $<TARGET_FILE:exec_probe> stop)
# An exception on one rank ends the job with a message naming the rank.
ppb_exec_expect(exec_abort_on_exception RANKS 3 CODE 1 SECONDS 20
  REGEX "error on rank 1 of 3: deliberate failure for the test"
  COMMAND $<TARGET_FILE:exec_probe> throw)
# pipebench p2p: a short run prints the table; 3 ranks is a usage error (2).
ppb_exec_expect(exec_p2p_smoke RANKS 2 CODE 0 SECONDS 60
  REGEX " 4096 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$"
  COMMAND $<TARGET_FILE:pipebench> p2p --min 1 --max 4KiB --iters 20)
ppb_exec_expect(exec_p2p_rank_count RANKS 3 CODE 2 SECONDS 20
  REGEX "p2p: needs exactly 2 ranks \\(mpirun -np 2 pipebench p2p\\), got 3"
  COMMAND $<TARGET_FILE:pipebench> p2p)
ppb_exec_expect(exec_p2p_bad_range RANKS 2 CODE 2 SECONDS 20
  REGEX "--max: must be >= --min"
  COMMAND $<TARGET_FILE:pipebench> p2p --min 1MiB --max 4KiB)

# ppb_device_expect(name NEED gpu|no-gpu RANKS n CODE c SECONDS s REGEX r [ENV e] COMMAND ...):
# ppb_exec_expect for tests that need a GPU (label gpu; skipped, saying why,
# without one) or check the behaviour without one (label mpi; skipped where
# nvidia-smi lists a GPU). bench/tests/device_expect.sh decides.
function(ppb_device_expect name)
  cmake_parse_arguments(ARG "" "NEED;RANKS;CODE;SECONDS;REGEX;ENV" "COMMAND" ${ARGN})
  add_test(NAME ${name}
           COMMAND ${PROJECT_SOURCE_DIR}/bench/tests/device_expect.sh ${ARG_NEED} ${ARG_CODE} ${ARG_SECONDS} "${ARG_REGEX}" --
                   ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ARG_RANKS} --oversubscribe ${ARG_COMMAND})
  set(labels mpi)
  if(ARG_NEED STREQUAL "gpu")
    set(labels gpu)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS ${labels} TIMEOUT 120 SKIP_RETURN_CODE 77
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;OPENBLAS_NUM_THREADS=1;${ARG_ENV}")
endfunction()

# Device buffers without a device: one line, exit 2 (CUDA build: no usable
# GPU; CPU-only build: built without CUDA); nccl says why it cannot run.
ppb_device_expect(exec_p2p_device_without_gpu NEED no-gpu RANKS 2 CODE 2 SECONDS 30
  REGEX "--memory device: (no usable GPU on rank 0: .+|this pipebench was built without CUDA)$"
  COMMAND $<TARGET_FILE:pipebench> p2p --memory device)
ppb_device_expect(exec_nccl_without_gpu NEED no-gpu RANKS 2 CODE 2 SECONDS 30
  REGEX "--transport nccl: (no usable GPU on rank 0: .+|not available in this build \\(built without NCCL)"
  COMMAND $<TARGET_FILE:pipebench> run --backend timed --transport nccl --schedule 1f1b
          --microbatches 2 --iters 1 --warmup 0 --out ${CMAKE_CURRENT_BINARY_DIR}/nccl_without_gpu)
# On a GPU: every transport device to device, data checked (1 rank: NCCL
# sends to itself; 2 ranks share the GPU); two ranks on one GPU are refused
# by nccl by name.
ppb_device_expect(gpu_p2p_device_1rank NEED gpu RANKS 1 CODE 0 SECONDS 100
  REGEX "# data check: 0 wrong byte"
  COMMAND $<TARGET_FILE:pipebench> p2p --memory device --min 4 --max 4MiB -n 10)
ppb_device_expect(gpu_p2p_device_2ranks NEED gpu RANKS 2 CODE 0 SECONDS 100
  REGEX "# data check: 0 wrong byte"
  COMMAND $<TARGET_FILE:pipebench> p2p --memory device --min 4 --max 4MiB -n 10)
ppb_device_expect(gpu_nccl_refuses_one_gpu_for_two_ranks NEED gpu RANKS 2 CODE 2 SECONDS 60
  REGEX "--transport nccl: ranks 0 and 1 share GPU .+Duplicate GPU detected" ENV "CUDA_VISIBLE_DEVICES=0"
  COMMAND $<TARGET_FILE:pipebench> p2p --memory device --transport nccl --max 4KiB)

# ppb_gemm_bench (CUDA builds): without a GPU one line and exit 2; on one,
# every GEMM of gpt-tiny timed through the backend and cublasLt, the totals.
if(TARGET ppb_gemm_bench)
  foreach(need no-gpu gpu)
    if(need STREQUAL "gpu")
      set(args 0 120 "# per micro-batch: backend [0-9.]+ TFLOP/s, cuBLAS alone [0-9.]+ TFLOP/s")
      set(name gpu_gemm_bench)
      set(label gpu)
    else()
      set(args 2 30 "^ppb_gemm_bench: no usable GPU: .+")
      set(name exec_gemm_bench_without_gpu)
      set(label unit)
    endif()
    add_test(NAME ${name}
             COMMAND ${PROJECT_SOURCE_DIR}/bench/tests/device_expect.sh ${need} ${args} --
                     $<TARGET_FILE:ppb_gemm_bench> --model gpt-tiny --iters 3 --algos 2)
    set_tests_properties(${name} PROPERTIES LABELS ${label} TIMEOUT 150 SKIP_RETURN_CODE 77)
  endforeach()
endif()

# Collectors on real ranks: registry, agreement across ranks, figures.
add_executable(collector_test collector_test.cpp)
target_link_libraries(collector_test PRIVATE ppb::exec ppb::core GTest::gtest ppb::warnings)
ppb_add_mpi_test(collector_test_2ranks RANKS 2 COMMAND $<TARGET_FILE:collector_test> TIMEOUT 60)

# Every registered schedule and backend has every trait the report and the
# planner read (unit).
ppb_add_gtest(registry_test SOURCES registry_test.cpp LIBS ppb::exec ppb::core)

# The attention choice: the --attention flag, the rule fused/naive with
# its reasons, the cuDNN probe without a GPU (unit).
ppb_add_gtest(attention_test SOURCES attention_test.cpp LIBS ppb::exec ppb::core)

# What each registered backend offers (check, probes, modelled time,
# device), through make_backend (unit; the cuda case again under the label
# emulated, cudaemu.cmake).
ppb_add_gtest(ppb_backend_test SOURCES backend_test.cpp LIBS ppb::exec ppb::core)

# The nccl transport's communicator layout, without a GPU (unit).
ppb_add_gtest(nccl_links_test SOURCES nccl_links_test.cpp LIBS ppb::exec ppb::core)

# The CUPTI collector on a GPU (label gpu): real kernels, a memset and a copy
# through the collector; skips, saying why, without a usable CUPTI.
if(PPB_HAVE_CUPTI)
  ppb_add_gtest(cupti_collector_test SOURCES cupti_collector_test.cpp cupti_test_kernels.cu
                LIBS ppb::exec CUDA::cudart LABELS gpu)
  # CMake 3.25 knows no CUDA20 flags for nvcc 13; the kernels need C++17 only.
  set_target_properties(cupti_collector_test PROPERTIES CUDA_STANDARD 17)
  # The case that launches no kernel of its own runs on the emulator too.
  if(PPB_HAVE_CUDAEMU)
    add_dependencies(cupti_collector_test ppb_cudaemu)
    gtest_discover_tests(cupti_collector_test TEST_PREFIX "emulated." TEST_FILTER "*Copies*"
      DISCOVERY_TIMEOUT 60
      PROPERTIES LABELS emulated ENVIRONMENT "${PPB_CUDAEMU_ENV}"
                 ENVIRONMENT_MODIFICATION "PPB_REQUIRE_EMULATOR=set:1")
  endif()
endif()

# NVML loaded at run time: its absence is one line and the run goes on.
ppb_add_gtest(nvml_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/nvml_test.cpp LIBS ppb::exec LABELS unit)
# Where NVML is there: the reader against a stand-in libnvidia-ml.so.1 in a
# folder of its own (fake_nvml.cpp; the tests put it on LD_LIBRARY_PATH;
# bench/tests/health.cmake runs `pipebench health` on it too).
set(PPB_FAKE_NVML_DIR ${CMAKE_BINARY_DIR}/fake-nvml CACHE INTERNAL "")
add_library(fake_nvml SHARED ${CMAKE_CURRENT_SOURCE_DIR}/fake_nvml.cpp)
set_target_properties(fake_nvml PROPERTIES OUTPUT_NAME nvidia-ml SUFFIX ".so.1"
                      LIBRARY_OUTPUT_DIRECTORY ${PPB_FAKE_NVML_DIR})
target_link_libraries(fake_nvml PRIVATE ppb::warnings)
add_executable(nvml_fake_test ${CMAKE_CURRENT_SOURCE_DIR}/nvml_fake_test.cpp)
target_link_libraries(nvml_fake_test PRIVATE ppb::exec GTest::gtest GTest::gtest_main ppb::warnings)
add_dependencies(nvml_fake_test fake_nvml)
gtest_discover_tests(nvml_fake_test DISCOVERY_TIMEOUT 60
                     PROPERTIES LABELS unit
                     ENVIRONMENT_MODIFICATION "LD_LIBRARY_PATH=path_list_prepend:${PPB_FAKE_NVML_DIR}")
# The same tests against a driver from before CUDA 12.2's NVML, whose
# clocks-event reasons have their older name only.
set(PPB_FAKE_NVML_OLD_DIR ${CMAKE_BINARY_DIR}/fake-nvml-before-12.2)
add_library(fake_nvml_before_12_2 SHARED ${CMAKE_CURRENT_SOURCE_DIR}/fake_nvml.cpp)
set_target_properties(fake_nvml_before_12_2 PROPERTIES OUTPUT_NAME nvidia-ml SUFFIX ".so.1"
                      LIBRARY_OUTPUT_DIRECTORY ${PPB_FAKE_NVML_OLD_DIR})
target_compile_definitions(fake_nvml_before_12_2 PRIVATE PPB_FAKE_NVML_BEFORE_12_2)
target_link_libraries(fake_nvml_before_12_2 PRIVATE ppb::warnings)
add_dependencies(nvml_fake_test fake_nvml_before_12_2)
gtest_discover_tests(nvml_fake_test TEST_PREFIX "driver_before_12_2." DISCOVERY_TIMEOUT 60
                     PROPERTIES LABELS unit ENVIRONMENT "PPB_FAKE_NVML_DRIVER=before-12.2"
                     ENVIRONMENT_MODIFICATION "LD_LIBRARY_PATH=path_list_prepend:${PPB_FAKE_NVML_OLD_DIR}")
