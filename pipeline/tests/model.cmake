# Model spec, unit costs, devices/roofline/calibration and partitions (ppb::model).
ppb_add_gtest(model_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/model_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/device_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/partition_test.cpp
  LIBS ppb::model
  LABELS unit)

# The memory model (ppb::model) on synthetic schedules, and the simulator's
# activation peaks against it.
ppb_add_gtest(memory_model_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/memory_model_test.cpp
  LIBS ppb::sim
  LABELS unit)
