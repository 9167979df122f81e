# libFuzzer targets for every reader of user input (PPB_BUILD_FUZZERS=ON,
# clang). Each is also a ctest case, label `fuzz`: PPB_FUZZ_SECONDS of
# fuzzing from the seed corpus in bench/fuzz/corpus/<name>/, new inputs kept
# in <build>/fuzz/<name>/ so later runs start further on, crashes written to
# <build>/fuzz/artifacts/. To fuzz longer by hand:
#   build/sanitize/bench/ppb_fuzz_schedule_json -max_total_time=600 \
#       build/sanitize/fuzz/schedule_json bench/fuzz/corpus/schedule_json
function(ppb_add_fuzzer name)
  cmake_parse_arguments(ARG "" "" "LIBS" ${ARGN})
  add_executable(ppb_fuzz_${name} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/${name}_fuzz.cpp)
  target_compile_options(ppb_fuzz_${name} PRIVATE -fsanitize=fuzzer)
  target_link_options(ppb_fuzz_${name} PRIVATE -fsanitize=fuzzer)
  target_include_directories(ppb_fuzz_${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)
  target_link_libraries(ppb_fuzz_${name} PRIVATE ${ARG_LIBS} ppb::warnings)
  set(work ${CMAKE_BINARY_DIR}/fuzz/${name})
  file(MAKE_DIRECTORY ${work} ${CMAKE_BINARY_DIR}/fuzz/artifacts)
  add_test(NAME fuzz.${name}
    COMMAND ppb_fuzz_${name} -max_total_time=${PPB_FUZZ_SECONDS} -max_len=65536
            -rss_limit_mb=2048 -timeout=10 -print_final_stats=1
            -artifact_prefix=${CMAKE_BINARY_DIR}/fuzz/artifacts/${name}-
            ${work} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${name})
  math(EXPR limit "${PPB_FUZZ_SECONDS} * 3 + 30")  # start-up and the final merge
  set_tests_properties(fuzz.${name} PROPERTIES LABELS fuzz TIMEOUT ${limit})
endfunction()

ppb_add_fuzzer(schedule_json LIBS ppb::schedule)
ppb_add_fuzzer(schedule_text LIBS ppb::schedule)
ppb_add_fuzzer(schedule_csv LIBS ppb::schedule)
ppb_add_fuzzer(result LIBS ppb::result)
ppb_add_fuzzer(model_spec LIBS ppb::model)
ppb_add_fuzzer(calibration LIBS ppb::model)
ppb_add_fuzzer(cluster LIBS ppb::reports)
ppb_add_fuzzer(sizes LIBS ppb_cli)
