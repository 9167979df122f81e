// `pipebench p2p --memory device`: every transport moving device buffers,
// each against the raw library it is built on, the way nccl-tests' sendrecv
// measures (src/common.cu, src/sendrecv.cu): rank r sends `bytes` to r+1 and
// receives as many from r-1 (mod N); per size a warm-up, then `iters`
// exchanges timed by the host clock with a device synchronisation at the
// end, the slowest rank's time; algbw = bytes / time, busbw = algbw (send /
// receive moves each byte once); after timing, one exchange of a known
// pattern checked byte by byte (#wrong, summed over ranks).
//
// Paths. A transport that can access device memory (nccl; mpi when MPI is
// CUDA-aware) moves the buffers directly; one that cannot is staged as the
// executor stages (a copy into pinned host memory on a copy stream, the
// message, a copy back), and the table says which. The raw baselines:
// MPI_Isend/MPI_Irecv on the device buffers (CUDA-aware MPI) or staged the
// same way; ncclSend/ncclRecv grouped on one stream over a communicator of
// all ranks (one rank: a send to itself, the smoke test a single GPU allows).
// Built with CUDA only.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ppb/exec/transport.hpp"

namespace ppb::cli {

struct P2pDeviceOptions {
  int64_t lo = 1;  ///< smallest message, bytes
  int64_t hi = 1;  ///< largest message, bytes (powers of two from lo)
  int iters = 20;  ///< timed exchanges per size (fewer above 64 KiB, at least 4)
  int warmup = 5;  ///< untimed exchanges per size
  WaitStrategy wait = WaitStrategy::kSleep;
  /// Registered transport names; empty = every registered one (those that
  /// cannot run here are listed as skipped, with why).
  std::vector<std::string> transports;
  std::string json;    ///< also write the figures here ("" = no)
  double timeout = 0;  ///< seconds per transport and size before the job ends (0 = none)
};

/// Runs the measurement on MPI_COMM_WORLD (any number of ranks >= 1) and
/// prints the table on rank 0. Returns the exit code: 0, or 1 when a data
/// check found a wrong byte. Throws UsageError, alike on every rank, when a
/// rank has no usable GPU, or a transport named in `transports` cannot run
/// here ("p2p --memory device: no usable GPU on rank 0: no CUDA driver ...").
int run_p2p_device(const P2pDeviceOptions& options);

/// Collective over `comm`: `--json PATH` checked where it is written, on
/// rank 0 alone (a folder writable only on rank 0's host is fine), before
/// anything is measured; when it cannot be written rank 0 throws a
/// UsageError naming --json and the others cli::ExitCode{2}. "" = no file.
void check_json_on_rank_zero(const std::string& json, int rank, MPI_Comm comm);

}  // namespace ppb::cli
