# The CUDA emulator (cudaemu/emu.hpp): libcudart.so.13 and libcublas.so.13
# of its own, in ${CMAKE_BINARY_DIR}/cudaemu, so that the binaries of this
# CUDA build run their cuda backend on the CPU with that folder first on
# LD_LIBRARY_PATH (the tests labelled `emulated` do). A test tool, never a
# result: the device it reports is "pipebench CUDA emulator (CPU)".
# Built where the CUDA toolkit and Boost.Context are (PPB_WITH_CUDAEMU).
set(cudaemu_dir ${CMAKE_CURRENT_LIST_DIR})
set(cudaemu_out ${CMAKE_BINARY_DIR}/cudaemu)

add_library(ppb_cudaemu_cudart SHARED
  ${cudaemu_dir}/runtime.cpp
  ${cudaemu_dir}/grid.cpp
  ${cudaemu_dir}/twins.cpp)
target_include_directories(ppb_cudaemu_cudart PRIVATE ${cudaemu_dir} ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_include_directories(ppb_cudaemu_cudart SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(ppb_cudaemu_cudart PRIVATE Boost::context Threads::Threads ppb::warnings)
# Loaded at start-up (DT_NEEDED), so its thread-locals take the fast model.
target_compile_options(ppb_cudaemu_cudart PRIVATE -ftls-model=initial-exec)
target_link_options(ppb_cudaemu_cudart PRIVATE
  -Wl,--version-script=${cudaemu_dir}/cudart.map -Wl,--no-undefined)
set_target_properties(ppb_cudaemu_cudart PROPERTIES
  OUTPUT_NAME cudart SOVERSION 13 VERSION 13.0.0
  LIBRARY_OUTPUT_DIRECTORY ${cudaemu_out}
  LINK_DEPENDS ${cudaemu_dir}/cudart.map)

add_library(ppb_cudaemu_cublas SHARED ${cudaemu_dir}/cublas.cpp)
target_include_directories(ppb_cudaemu_cublas PRIVATE ${cudaemu_dir})
target_include_directories(ppb_cudaemu_cublas SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(ppb_cudaemu_cublas PRIVATE ppb_cudaemu_cudart BLAS::BLAS ppb::warnings)
target_link_options(ppb_cudaemu_cublas PRIVATE
  -Wl,--version-script=${cudaemu_dir}/cublas.map -Wl,--no-undefined)
set_target_properties(ppb_cudaemu_cublas PROPERTIES
  OUTPUT_NAME cublas SOVERSION 13 VERSION 13.0.0
  LIBRARY_OUTPUT_DIRECTORY ${cudaemu_out}
  LINK_DEPENDS ${cudaemu_dir}/cublas.map)

add_custom_target(ppb_cudaemu ALL DEPENDS ppb_cudaemu_cudart ppb_cudaemu_cublas)
# For the tests: the environment that puts the emulator in place of the GPU.
set(PPB_CUDAEMU_ENV "LD_LIBRARY_PATH=${cudaemu_out}" CACHE INTERNAL "")
