# Chrome/Perfetto trace writer (ppb/profiling/trace.hpp). Boost.JSON reads
# per-rank files back when merging them.
target_sources(ppb_profiling PRIVATE src/trace.cpp)
target_link_libraries(ppb_profiling PRIVATE Boost::json)
