# ppb_exec: the executor, the backends (cpu, timed, cuda) and the transports (mpi).
# Included from pipeline/exec/CMakeLists.txt; owned by the executor area.
add_library(ppb_exec
  src/mpi.cpp
  src/transport.cpp
  src/transport_registry.cpp
  src/nccl_links.cpp
  src/gemm_calls.cpp
  src/host_stream.cpp
  src/stream_backend.cpp
  src/backend_cpu.cpp
  src/backend_timed.cpp
  src/planted_work.cpp
  src/backend_registry.cpp
  src/executor.cpp
  src/watchdog.cpp
  src/job_watchdog.cpp
  src/host_load.cpp
  src/step_messages.cpp
  src/memory_guard.cpp
  src/collector_registry.cpp
  src/collectors/nvtx_collector.cpp
  src/collectors/cputime_collector.cpp
  src/collectors/perf_collector.cpp
  src/collectors/cupti_collector.cpp
  src/nvml.cpp
  src/cuda/graph_cache.cpp  # host-side bookkeeping: every build, so its tests run without CUDA
  src/cuda/first_fit.cpp
)
add_library(ppb::exec ALIAS ppb_exec)
target_include_directories(ppb_exec PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include
                                   PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_link_libraries(ppb_exec PUBLIC ppb::core ppb::cpu_kernels ppb::profiling MPI::MPI_CXX Threads::Threads
                               PRIVATE ppb::warnings ${CMAKE_DL_LIBS})
# CUDA (cmake/Cuda.cmake): PPB_HAVE_CUDA is 1 or 0 for every includer, so that
# headers and callers see the same build; without CUDA, src/cuda/no_cuda.cpp
# answers "built without CUDA".
target_compile_definitions(ppb_exec PUBLIC PPB_HAVE_CUDA=$<BOOL:${PPB_HAVE_CUDA}>)
if(PPB_HAVE_CUDA)
  # The cuda backend: kernels.cu is the one nvcc source (sm_80 and sm_90 by
  # default, CMAKE_CUDA_ARCHITECTURES); the rest is host C++.
  target_sources(ppb_exec PRIVATE
    src/cuda/cuda_device.cpp
    src/cuda/kernels.cu
    src/cuda/blas.cpp
    src/cuda/device_pool.cpp
    src/cuda/device_plant.cpp
    src/cuda/cuda_chunk.cpp
    src/cuda/fused_attention.cpp
    src/cuda/backend_cuda.cpp
    src/cuda/gemm_timing.cpp
    src/cuda/gpu_probe.cpp
  )
  # One CUDA runtime in the process: the shared one (CUDA::cudart), also for
  # the .cu objects (CMake would otherwise add the static runtime).
  set_target_properties(ppb_exec PROPERTIES CUDA_RUNTIME_LIBRARY Shared)
  target_link_libraries(ppb_exec PUBLIC CUDA::cudart PRIVATE CUDA::cublas CUDA::cublasLt)
else()
  target_sources(ppb_exec PRIVATE src/cuda/no_cuda.cpp)
endif()

# The fused attention (cmake/Cudnn.cmake): PPB_HAVE_CUDNN is 1 or 0 for
# fused_attention.cpp alone; the frontend loads libcudnn at run time, so
# nothing links it. A build with cuDNN also compiles the file as a build
# without it would (an object library, seconds), so that both stay compiling.
if(PPB_HAVE_CUDA)
  set_property(SOURCE src/cuda/fused_attention.cpp APPEND PROPERTY COMPILE_DEFINITIONS
               PPB_HAVE_CUDNN=$<BOOL:${PPB_HAVE_CUDNN}>)
  if(PPB_HAVE_CUDNN)
    set_property(SOURCE src/cuda/fused_attention.cpp APPEND PROPERTY COMPILE_DEFINITIONS
                 NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING)
    target_include_directories(ppb_exec SYSTEM PRIVATE ${PPB_CUDNN_FRONTEND_INCLUDE}
                                                       ${PPB_CUDNN_INCLUDE})
    add_library(ppb_exec_no_cudnn_check OBJECT src/cuda/no_cudnn_check.cpp)
    target_include_directories(ppb_exec_no_cudnn_check PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src
                                                               ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_link_libraries(ppb_exec_no_cudnn_check PRIVATE ppb::core ppb::profiling CUDA::cudart
                                                          ppb::warnings)
    target_compile_definitions(ppb_exec_no_cudnn_check PRIVATE PPB_HAVE_CUDA=1)
  endif()
endif()

# GPU checks over the ranks (CUDA builds), and the nccl transport with its
# NCCL plumbing where CMake found NCCL (cmake/Cuda.cmake); the registry lists
# nccl everywhere and says why it cannot run.
# PPB_HAVE_NCCL is 1 or 0 for every includer, like PPB_HAVE_CUDA.
if(PPB_HAVE_CUDA)
  target_sources(ppb_exec PRIVATE src/gpu_ranks.cpp)
endif()
target_compile_definitions(ppb_exec PUBLIC PPB_HAVE_NCCL=$<BOOL:${PPB_HAVE_NCCL}>)
if(PPB_HAVE_NCCL)
  target_sources(ppb_exec PRIVATE src/nccl_comm.cpp src/nccl_transport.cpp)
  target_include_directories(ppb_exec PUBLIC ${PPB_NCCL_INCLUDE})
  target_link_libraries(ppb_exec PUBLIC ${PPB_NCCL_LIBRARY})
endif()

# The cupti collector compiles to an unavailable one without CUPTI.
if(PPB_HAVE_CUPTI)
  set_property(SOURCE src/collectors/cupti_collector.cpp APPEND PROPERTY COMPILE_DEFINITIONS PPB_HAVE_CUPTI=1)
  target_link_libraries(ppb_exec PRIVATE CUDA::cupti CUDA::cudart)
endif()

# The cuda backend's GEMMs against cuBLAS alone on the same shapes (CUDA
# builds; needs a GPU): ppb_gemm_bench --model gpt-small --dtype bf16
if(PPB_HAVE_CUDA)
  add_executable(ppb_gemm_bench src/tools/gemm_bench.cpp)
  target_include_directories(ppb_gemm_bench PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_link_libraries(ppb_gemm_bench PRIVATE ppb::exec ppb::core CUDA::cublas CUDA::cublasLt
                                               ppb::warnings)
endif()

# The executor-overhead and wait-strategy measurement:
#   mpirun -np 8 --oversubscribe ppb_exec_overhead --microbatches 32
add_executable(ppb_exec_overhead src/tools/exec_overhead.cpp)
target_link_libraries(ppb_exec_overhead PRIVATE ppb::exec ppb::core ppb::warnings)

# The CUDA emulator, for running this build's cuda backend without a GPU in
# the tests (cudaemu/cudaemu.cmake). PPB_HAVE_CUDAEMU is set for the tests.
set(PPB_HAVE_CUDAEMU OFF)
if(PPB_HAVE_CUDA AND NOT PPB_WITH_CUDAEMU STREQUAL "OFF")
  find_package(Boost 1.81 CONFIG QUIET COMPONENTS context)
  if(TARGET Boost::context)
    include(${CMAKE_CURRENT_SOURCE_DIR}/cudaemu/cudaemu.cmake)
    set(PPB_HAVE_CUDAEMU ON)
  elseif(PPB_WITH_CUDAEMU STREQUAL "ON")
    message(FATAL_ERROR "PPB_WITH_CUDAEMU=ON needs Boost.Context (libboost-context1.81-dev)")
  endif()
endif()
set(PPB_HAVE_CUDAEMU ${PPB_HAVE_CUDAEMU} CACHE INTERNAL "The CUDA emulator is built")
message(STATUS "pipebench: CUDA emulator ${PPB_HAVE_CUDAEMU}")
