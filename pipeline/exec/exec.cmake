# ppb_exec: the executor, the backends (cpu, timed) and the transports (mpi).
# Included from pipeline/exec/CMakeLists.txt; owned by the executor area.
add_library(ppb_exec
  src/mpi.cpp
  src/transport.cpp
  src/transport_registry.cpp
  src/backend_cpu.cpp
  src/backend_timed.cpp
  src/planted_work.cpp
  src/backend_registry.cpp
  src/executor.cpp
  src/memory_guard.cpp
  src/nvtx_instrumentation.cpp
)
add_library(ppb::exec ALIAS ppb_exec)
target_include_directories(ppb_exec PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
target_link_libraries(ppb_exec PUBLIC ppb::core ppb::cpu_kernels ppb::profiling MPI::MPI_CXX Threads::Threads
                               PRIVATE ppb::warnings)

# The executor-overhead and wait-strategy measurement (issue 3, "Speed"):
#   mpirun -np 8 --oversubscribe ppb_exec_overhead --microbatches 32
add_executable(ppb_exec_overhead src/tools/exec_overhead.cpp)
target_link_libraries(ppb_exec_overhead PRIVATE ppb::exec ppb::core ppb::warnings)
