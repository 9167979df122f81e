# The CUDA emulator (cudaemu/emu.hpp): libcudart.so.13, libcublas.so.13,
# libcublasLt.so.13 and libcupti.so.13 of its own, in ${CMAKE_BINARY_DIR}/cudaemu, so that the binaries of this
# CUDA build run their cuda backend on the CPU with that folder first on
# LD_LIBRARY_PATH (the tests labelled `emulated` do). A test tool, never a
# result: the device it reports is "pipebench CUDA emulator (CPU)".
# Built where the CUDA toolkit and Boost.Context are (PPB_WITH_CUDAEMU).
set(cudaemu_dir ${CMAKE_CURRENT_LIST_DIR})
set(cudaemu_out ${CMAKE_BINARY_DIR}/cudaemu)

# ppb_cudaemu_library(NAME SOURCES...): lib<NAME>.so.13 in ${cudaemu_out},
# exporting what <NAME>.map lists under NVIDIA's version node.
function(ppb_cudaemu_library name)
  add_library(ppb_cudaemu_${name} SHARED ${ARGN})
  target_include_directories(ppb_cudaemu_${name} PRIVATE ${cudaemu_dir})
  target_include_directories(ppb_cudaemu_${name} SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  target_link_options(ppb_cudaemu_${name} PRIVATE
    -Wl,--version-script=${cudaemu_dir}/${name}.map -Wl,--no-undefined)
  set_target_properties(ppb_cudaemu_${name} PROPERTIES
    OUTPUT_NAME ${name} SOVERSION 13 VERSION 13.0.0
    LIBRARY_OUTPUT_DIRECTORY ${cudaemu_out}
    LINK_DEPENDS ${cudaemu_dir}/${name}.map)
endfunction()

ppb_cudaemu_library(cudart ${cudaemu_dir}/runtime.cpp ${cudaemu_dir}/grid.cpp
                           ${cudaemu_dir}/twins.cpp)
# The kernels' sources, and the model header whose tiling constants they
# share with the cost model (header only: the emulator links no ppb library).
target_include_directories(ppb_cudaemu_cudart PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src
                                                      ${PROJECT_SOURCE_DIR}/pipeline/include)
target_link_libraries(ppb_cudaemu_cudart PRIVATE Boost::context Threads::Threads ppb::warnings)
# Loaded at start-up (DT_NEEDED), so its thread-locals take the fast model.
target_compile_options(ppb_cudaemu_cudart PRIVATE -ftls-model=initial-exec)

# cuBLAS and cuBLASLt share one GEMM core (gemm.hpp), compiled into each.
ppb_cudaemu_library(cublas ${cudaemu_dir}/cublas.cpp ${cudaemu_dir}/gemm.cpp)
target_link_libraries(ppb_cudaemu_cublas PRIVATE ppb_cudaemu_cudart BLAS::BLAS ppb::warnings)

ppb_cudaemu_library(cublasLt ${cudaemu_dir}/cublaslt.cpp ${cudaemu_dir}/gemm.cpp)
target_include_directories(ppb_cudaemu_cublasLt PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_link_libraries(ppb_cudaemu_cublasLt PRIVATE ppb_cudaemu_cudart BLAS::BLAS ppb::warnings)

ppb_cudaemu_library(cupti ${cudaemu_dir}/cupti.cpp)
target_include_directories(ppb_cudaemu_cupti PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_link_libraries(ppb_cudaemu_cupti PRIVATE ppb_cudaemu_cudart ppb::warnings)

add_custom_target(ppb_cudaemu ALL DEPENDS ppb_cudaemu_cudart ppb_cudaemu_cublas ppb_cudaemu_cublasLt
                                          ppb_cudaemu_cupti)
# For the tests: the environment that puts the emulator in place of the GPU.
set(PPB_CUDAEMU_ENV "LD_LIBRARY_PATH=${cudaemu_out}" CACHE INTERNAL "")
