# cpu backend kernels: gradient checks, splitting invariance, memory
# accounting, split backward, weight stashing, the --check reference, the
# element math the cpu and CUDA kernels share (a private header of exec/src)
# the micro-batch ledger both chunks keep their passes and versions in, and
# the data flow of each unit kind both chunks follow.
ppb_add_gtest(ppb_cpu_test
  SOURCES cpu_gradcheck_test.cpp cpu_model_test.cpp kernel_math_test.cpp
          microbatch_ledger_test.cpp unit_flow_test.cpp
  LIBS ppb::cpu_kernels ppb::model
  LABELS unit)
target_include_directories(ppb_cpu_test PRIVATE ${PROJECT_SOURCE_DIR}/pipeline/exec/src)
