# cpu backend kernels: gradient checks, splitting invariance, memory
# accounting, split backward, weight stashing, the --check reference.
ppb_add_gtest(ppb_cpu_test
  SOURCES cpu_gradcheck_test.cpp cpu_model_test.cpp
  LIBS ppb::cpu_kernels ppb::model
  LABELS unit)
