# `pipebench health` (bench/cmd_health.cpp): without a GPU one line and exit
# 2; on the CUDA emulator (label emulated) with two devices, every figure of
# both and the peer copies between them in health.json, and NVML's absence
# one line with the probe going on.
ppb_device_expect(health_without_gpu NEED no-gpu RANKS 1 CODE 2 SECONDS 30
  REGEX "health: no usable GPU: (no CUDA driver|no CUDA device|built without CUDA)"
  COMMAND $<TARGET_FILE:pipebench> health --out ${CMAKE_CURRENT_BINARY_DIR}/health-without-gpu)
if(PPB_HAVE_CUDAEMU)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/emulated-health)
  add_test(NAME emulated_health
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/tests/expect_exit.sh 0 120
            "gpu state: NVML not found \\(libnvidia-ml.so.1: .+\\): clocks, power, temperature and throttling not sampled"
            -- $<TARGET_FILE:pipebench> health --out ${dir} --repeats 3 --iters 1 --copy-bytes 1MiB
            --model "gpt:layers=2,hidden=32,heads=2,seq=16,vocab=64,mbs=2")
  set_tests_properties(emulated_health PROPERTIES FIXTURES_SETUP emulated_health_file)
  add_test(NAME emulated_health_file
    COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tests/health_file_check.py ${dir}/health.json 2 3)
  set_tests_properties(emulated_health_file PROPERTIES FIXTURES_REQUIRED emulated_health_file)
  set_tests_properties(emulated_health emulated_health_file PROPERTIES LABELS emulated TIMEOUT 120
                       ENVIRONMENT "${PPB_CUDAEMU_ENV};PPB_CUDAEMU_DEVICES=2")
endif()
# Where NVML is there (the tests' stand-in libnvidia-ml.so.1, fake_nvml.cpp,
# with a hardware slowdown reported): each GPU's state line names its
# clocks, power, temperature and reasons, and health.json holds them, the
# ECC errors that arrived while sampling counted.
if(PPB_HAVE_CUDAEMU)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/emulated-health-nvml)
  add_test(NAME emulated_health_with_nvml
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/tests/expect_exit.sh 0 120
            "gpu 1 state: SM clock min 1410 / median 1410 MHz, memory clock 3201 MHz, power mean 512 W of 700 W, temperature max 42 C, throttle reasons hw_slowdown, ECC errors \\+[1-9][0-9]* corrected \\+0 uncorrected \\([0-9]+ samples\\)"
            -- $<TARGET_FILE:pipebench> health --out ${dir} --repeats 2 --iters 1 --copy-bytes 1MiB
            --model "gpt:layers=2,hidden=32,heads=2,seq=16,vocab=64,mbs=2")
  set_tests_properties(emulated_health_with_nvml PROPERTIES FIXTURES_SETUP emulated_health_nvml_file)
  add_test(NAME emulated_health_with_nvml_file
    COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tests/health_file_check.py ${dir}/health.json 2 2
            --nvml hw_slowdown)
  set_tests_properties(emulated_health_with_nvml_file PROPERTIES
                       FIXTURES_REQUIRED emulated_health_nvml_file)
  set_tests_properties(emulated_health_with_nvml emulated_health_with_nvml_file PROPERTIES
    LABELS emulated TIMEOUT 120
    ENVIRONMENT "${PPB_CUDAEMU_ENV};PPB_CUDAEMU_DEVICES=2;PPB_FAKE_NVML_REASONS=0x8"
    ENVIRONMENT_MODIFICATION "LD_LIBRARY_PATH=path_list_prepend:${PPB_FAKE_NVML_DIR}")
endif()
# Where the driver does not expose some readings (the stand-in NVML answering
# NVML_ERROR_NOT_SUPPORTED for clocks, power draw and ECC, as for a virtual
# GPU): the state line says which were not read, and the probe goes on.
if(PPB_HAVE_CUDAEMU)
  add_test(NAME emulated_health_with_partial_nvml
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/tests/expect_exit.sh 0 120
            "gpu 1 state: SM clock not read, memory clock not read, power not read \\(limit 700 W\\), temperature max 42 C, throttle reasons none, ECC errors not read \\([0-9]+ samples\\)"
            -- $<TARGET_FILE:pipebench> health --out ${CMAKE_CURRENT_BINARY_DIR}/emulated-health-partial-nvml
            --repeats 2 --iters 1 --copy-bytes 1MiB
            --model "gpt:layers=2,hidden=32,heads=2,seq=16,vocab=64,mbs=2")
  set_tests_properties(emulated_health_with_partial_nvml PROPERTIES LABELS emulated TIMEOUT 120
    ENVIRONMENT "${PPB_CUDAEMU_ENV};PPB_CUDAEMU_DEVICES=2;PPB_FAKE_NVML_NOT_SUPPORTED=clock,power,ecc"
    ENVIRONMENT_MODIFICATION "LD_LIBRARY_PATH=path_list_prepend:${PPB_FAKE_NVML_DIR}")
endif()
# A cuda run where NVML is absent: one line from rank 0 names it and what is
# not sampled, and the run goes on (its results carry no gpu_state).
if(PPB_HAVE_CUDAEMU)
  add_test(NAME emulated_run_without_nvml
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/tests/expect_exit.sh 0 120
            "pipebench\\[r0\\]: gpu state: NVML not found \\(libnvidia-ml.so.1: .+\\): clocks, power, temperature and throttling not sampled"
            -- ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 --oversubscribe $<TARGET_FILE:pipebench> run
            --backend cuda --model "gpt:layers=2,hidden=32,heads=2,seq=16,vocab=64,mbs=2" -n 1 -w 0
            --schedule 1f1b --partition layer --microbatches 4
            --out ${CMAKE_CURRENT_BINARY_DIR}/emulated-run-without-nvml)
  set_tests_properties(emulated_run_without_nvml PROPERTIES LABELS emulated TIMEOUT 120
    ENVIRONMENT "${PPB_CUDAEMU_ENV};OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;OPENBLAS_NUM_THREADS=1")
endif()
# A cuda run on two emulated GPUs under the stand-in NVML: each rank samples
# its own GPU, and every result holds both GPUs' state, named by host, with
# NVML's driver version.
if(PPB_HAVE_CUDAEMU)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/emulated-run-nvml)
  add_test(NAME emulated_run_with_nvml
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 --oversubscribe $<TARGET_FILE:pipebench> run
            --backend cuda --model "gpt:layers=2,hidden=32,heads=2,seq=16,vocab=64,mbs=2" -n 2 -w 0
            --schedule 1f1b --partition layer --microbatches 4 --out ${dir})
  set_tests_properties(emulated_run_with_nvml PROPERTIES FIXTURES_SETUP emulated_run_nvml_files)
  add_test(NAME emulated_run_with_nvml_results
    COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tests/run_gpu_state_check.py ${dir} 2)
  set_tests_properties(emulated_run_with_nvml_results PROPERTIES
                       FIXTURES_REQUIRED emulated_run_nvml_files)
  set_tests_properties(emulated_run_with_nvml emulated_run_with_nvml_results PROPERTIES
    LABELS emulated TIMEOUT 120
    ENVIRONMENT "${PPB_CUDAEMU_ENV};PPB_CUDAEMU_DEVICES=2;OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;OPENBLAS_NUM_THREADS=1"
    ENVIRONMENT_MODIFICATION "LD_LIBRARY_PATH=path_list_prepend:${PPB_FAKE_NVML_DIR}")
endif()
