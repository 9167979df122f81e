# One INTERFACE target carries every warning flag; targets link ppb::warnings.
add_library(ppb_warnings INTERFACE)
add_library(ppb::warnings ALIAS ppb_warnings)
target_compile_options(ppb_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wold-style-cast -Wcast-align -Woverloaded-virtual
    -Werror=switch -Werror=return-type>)
if(PPB_WERROR)
  target_compile_options(ppb_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()
