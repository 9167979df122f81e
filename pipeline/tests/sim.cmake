# Simulator, text timeline and simulated traces (label unit).
ppb_add_gtest(sim_test SOURCES sim_test.cpp LIBS ppb::sim Boost::json)
