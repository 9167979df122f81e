# Model spec, unit costs, devices/roofline/calibration and partitions (ppb::model).
ppb_add_gtest(model_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/model_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/device_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/partition_test.cpp
  LIBS ppb::model
  LABELS unit)
