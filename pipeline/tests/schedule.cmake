# Schedule generators, validator and schedule files (label unit).
ppb_add_gtest(ppb_schedule_test
  SOURCES schedule_test.cpp schedule_oracle_test.cpp schedule_io_test.cpp validator_test.cpp
          message_plan_test.cpp
  LIBS ppb::schedule
  LABELS unit)
