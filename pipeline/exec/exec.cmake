# ppb_exec: the executor, the backends (cpu, timed) and the transports (mpi).
# Included from pipeline/exec/CMakeLists.txt; owned by the executor area.
add_library(ppb_exec
  src/mpi.cpp
  src/transport.cpp
  src/transport_registry.cpp
  src/host_stream.cpp
  src/stream_backend.cpp
  src/backend_cpu.cpp
  src/backend_timed.cpp
  src/planted_work.cpp
  src/backend_registry.cpp
  src/executor.cpp
  src/watchdog.cpp
  src/step_messages.cpp
  src/memory_guard.cpp
  src/collector_registry.cpp
  src/collectors/nvtx_collector.cpp
  src/collectors/cputime_collector.cpp
  src/collectors/perf_collector.cpp
  src/collectors/cupti_collector.cpp
)
add_library(ppb::exec ALIAS ppb_exec)
target_include_directories(ppb_exec PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include
                                   PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_link_libraries(ppb_exec PUBLIC ppb::core ppb::cpu_kernels ppb::profiling MPI::MPI_CXX Threads::Threads
                               PRIVATE ppb::warnings)
# The cupti collector compiles to an unavailable one without CUPTI.
if(PPB_HAVE_CUPTI)
  set_property(SOURCE src/collectors/cupti_collector.cpp APPEND PROPERTY COMPILE_DEFINITIONS PPB_HAVE_CUPTI=1)
  target_link_libraries(ppb_exec PRIVATE CUDA::cupti CUDA::cudart)
endif()

# The executor-overhead and wait-strategy measurement:
#   mpirun -np 8 --oversubscribe ppb_exec_overhead --microbatches 32
add_executable(ppb_exec_overhead src/tools/exec_overhead.cpp)
target_link_libraries(ppb_exec_overhead PRIVATE ppb::exec ppb::core ppb::warnings)
