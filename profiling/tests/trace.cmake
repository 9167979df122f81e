# Chrome/Perfetto trace writer (label unit).
ppb_add_gtest(profiling_trace_test SOURCES trace_test.cpp LIBS ppb::profiling Boost::json)
