# Simulator, text timeline and simulated traces (label unit).
ppb_add_gtest(sim_test SOURCES sim_test.cpp LIBS ppb::sim Boost::json)
# The simulator on the generated schedules against the papers' closed forms.
ppb_add_gtest(sim_formula_test SOURCES sim_formula_test.cpp LIBS ppb::sim)
# The Zero Bubble schedules and DualPipeV against the papers' figures.
ppb_add_gtest(zero_bubble_test SOURCES zero_bubble_test.cpp LIBS ppb::sim)
