# NVTX ranges: compiled in when the NVTX3 headers are found (they ship with the
# CUDA toolkit and are header-only: no GPU is needed to emit or record ranges).
target_sources(ppb_profiling PRIVATE src/nvtx.cpp)
find_path(PPB_NVTX3_INCLUDE nvtx3/nvToolsExt.h
          HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
if(PPB_NVTX3_INCLUDE)
  set(PPB_HAVE_NVTX ON)
  target_include_directories(ppb_profiling SYSTEM PRIVATE ${PPB_NVTX3_INCLUDE})
  target_compile_definitions(ppb_profiling PRIVATE PPB_HAVE_NVTX=1)
  target_link_libraries(ppb_profiling PRIVATE ${CMAKE_DL_LIBS})
else()
  set(PPB_HAVE_NVTX OFF)
endif()
message(STATUS "pipebench: NVTX ${PPB_HAVE_NVTX}")
