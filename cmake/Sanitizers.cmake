# Sanitizers and fuzzers (the `sanitize` preset turns both on).
#
#   PPB_SANITIZE="address,undefined"  every target compiled and linked with
#                                     -fsanitize=<list>; undefined behaviour
#                                     is fatal (no recovery), frames kept
#   PPB_BUILD_FUZZERS=ON              libFuzzer targets in bench/fuzz (needs
#                                     clang), each also a ctest case (label
#                                     `fuzz`) that runs for PPB_FUZZ_SECONDS
set(PPB_SANITIZE "" CACHE STRING "Sanitizers for every target, e.g. address,undefined")
option(PPB_BUILD_FUZZERS "Build the libFuzzer targets (clang)" OFF)
set(PPB_FUZZ_SECONDS 10 CACHE STRING "Seconds each fuzzer runs as a ctest case")

if(PPB_SANITIZE)
  add_compile_options(-fsanitize=${PPB_SANITIZE} -fno-omit-frame-pointer
                      -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${PPB_SANITIZE})
  message(STATUS "pipebench: sanitizers ${PPB_SANITIZE}")
endif()
if(PPB_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "PPB_BUILD_FUZZERS needs clang (libFuzzer); "
                        "configure with -DCMAKE_CXX_COMPILER=clang++ or the `sanitize` preset")
  endif()
  message(STATUS "pipebench: libFuzzer targets, ${PPB_FUZZ_SECONDS} s each under ctest")
endif()
