// How the `nccl` transport lays the message plan's links onto NCCL
// communicators: the part of its design that needs no GPU, so it is tested
// everywhere (pipeline/tests/nccl_links_test.cpp).
//
// One communicator (and one CUDA stream on each end) per link direction.
// NCCL has no tags: the operations of a communicator match in the order they
// are issued, a posted ncclRecv (or an unmatched ncclSend) blocks its stream
// until the peer's side arrives, and a communicator must see its operations
// in the same order on both ranks. With one 2-rank communicator per direction
// the sender issues only ncclSend on it and the receiver only ncclRecv, both
// in the link order of the message plan (PlannedMessage::seq), so the k-th
// send always meets the k-th receive; a receive posted early for a late
// message blocks only its own link's stream, never the compute stream or the
// other direction. (One communicator per pair of neighbours would need the
// two ranks to interleave sends and receives identically, which the
// schedules do not promise; a single communicator for the whole pipeline
// would serialise every link behind the slowest.)
//
// Which links. Every message of every schedule goes from virtual stage v to
// v+1 or back, i.e. between stages s and (s+1) mod P: the links are the
// directed edges of the ring of stages. The transport is built once per
// sweep, before any schedule is known, so it connects all of them (P = 2:
// 0->1 and 1->0; P = 1: none).
//
// Creating them. ncclCommInitRank blocks until both members joined, so the
// communicators are created in rounds in which no rank belongs to two links;
// every rank walks the same rounds in the same order (the rounds depend only
// on P), so no rank waits in one round for a peer that waits in another.
// NCCL also connects a link lazily, on the host, at its first send and
// receive, and the first call waits there for the peer's: each link
// therefore exchanges one byte within its round, so that a step's
// receives, posted before its sends, only ever enqueue.
//
// Example (P = 4):
//   nccl_links(4) == {0->1, 1->0, 1->2, 2->1, 2->3, 3->2, 3->0, 0->3}
//   nccl_creation_rounds(nccl_links(4), 4) == {{0, 4}, {1, 5}, {2, 6}, {3, 7}}
//   (P = 3 takes six rounds of one link: any two links of a triangle share a rank)
#pragma once

#include <span>
#include <vector>

namespace ppb {

/// One link direction: `from` sends (rank 0 of its communicator), `to`
/// receives (rank 1).
struct NcclLink {
  int from = 0;
  int to = 0;
  friend bool operator==(const NcclLink&, const NcclLink&) = default;
};

/// The directed edges of the ring of `ranks` stages without repeats, in
/// the order s -> s+1, s+1 -> s for s = 0..P-1. REQUIRES: ranks >= 1.
std::vector<NcclLink> nccl_links(int ranks);

/// Rounds of communicator creation: each round lists link indices whose
/// ranks are all different; every link is in exactly one round. Greedy in
/// link order (the first round a link fits in), so it is the same on every
/// rank.
std::vector<std::vector<int>> nccl_creation_rounds(std::span<const NcclLink> links, int ranks);

/// Index of the link from -> to in `links`, or -1.
int nccl_link_index(std::span<const NcclLink> links, int from, int to);

}  // namespace ppb
