// The message plan: every stage-to-stage message of one step of a schedule,
// derived once from the action lists (action.hpp's communication rule) and
// used by everything that needs messages: the executor (what to post, which
// tag, in which order), the validator (can the lists run under in-order
// matching?), the simulator (transfers on FIFO links) and the traces (flow
// ids that join a send to its receive on both ranks).
//
// Links. A link is an ordered pair of stages (from -> to), one per direction
// between two neighbours; with P == 2 the one link 0 -> 1 carries both the
// activations of v -> v+1 and the gradients of v+1 -> v. The messages of a
// link are in the order its producer's list produces them. A transport that
// matches in call order (NCCL; the `mpi-ordered` transport, one tag per
// link) delivers them in exactly that order, whatever order the consumer's
// list consumes them in: the consumer posts its receives in link order and
// holds early arrivals in buffers until their action consumes them.
//
// Buffers under in-order matching. The receive of a link's message j can be
// posted once every earlier receive of the link is posted and fewer than K
// (the receive buffers of the link) posted receives are still unconsumed.
// When the consumer's action needs message j, messages 0..j are posted:
// it holds max_seq_so_far + 1 - consumed_before buffers. The plan computes
// the maximum over the consumer's list (PlannedLink::buffers); with fewer
// buffers the consumer waits for a receive it can never post (the validator
// reports that link and the buffers it needs). Sends never block the producer.
//
// Example (P = 2, stage 1 consumes mb 1 before mb 0):
//   s0: F0 F1 B0 B1      link s0->s1 carries act mb0, act mb1 (seq 0, 1)
//   s1: F1 F0 B0 B1      F1 needs seq 1 while seq 0 is unconsumed: 2 buffers
//   MessagePlan plan = build_message_plan(schedule);
//   plan.links[plan.link_of(0, 1)].buffers == 2
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ppb/pipeline/action.hpp"

namespace ppb {

/// What a stage-to-stage message carries.
enum class MessageKind : uint8_t {
  kActivation,  ///< output of F, to the next virtual stage
  kGradient,    ///< input gradient of B/I, to the previous virtual stage
};

/// "activation" / "gradient" (for messages and traces).
const char* message_kind_name(MessageKind kind);

/// The id of a message, the same on both ranks and unique within a step
/// across all ranks: (mb * VP + from_virtual) * 2 + kind. Traces offset it
/// per step.
/// Example: message_flow_id(3, 1, MessageKind::kGradient, 4) == 27.
inline int64_t message_flow_id(int64_t microbatch, int from_virtual, MessageKind kind,
                               int virtual_stages) {
  return (microbatch * virtual_stages + from_virtual) * 2 + static_cast<int64_t>(kind);
}

/// One message of a step.
struct PlannedMessage {
  MessageKind kind = MessageKind::kActivation;
  int32_t microbatch = 0;
  int32_t from_virtual = 0;  ///< producing virtual stage
  int32_t to_virtual = 0;    ///< consuming virtual stage
  int32_t from_stage = 0;
  int32_t to_stage = 0;
  int32_t from_chunk = 0;  ///< the producing action's chunk on from_stage
  int32_t to_chunk = 0;    ///< the consuming action's chunk on to_stage
  int32_t producer = 0;    ///< index of the producing action (F, B or I) in from_stage's list
  int32_t consumer = 0;    ///< index of the consuming action (F, B or I) in to_stage's list
  int32_t link = -1;       ///< index into MessagePlan::links; -1: a same-stage hand-over
  int32_t seq = 0;         ///< position on its link (0-based, producer order); 0 when local
  int64_t bytes = -1;      ///< payload bytes; -1 when the plan was built without sizes
  int64_t flow_id = 0;     ///< message_flow_id(microbatch, from_virtual, kind, VP)

  bool local() const { return link < 0; }
};

/// One direction between two stages.
struct PlannedLink {
  int32_t from_stage = 0;
  int32_t to_stage = 0;
  /// Message ids (indices into MessagePlan::messages) in link order: the
  /// order the producer sends them and an in-order transport delivers them.
  std::vector<int32_t> messages;
  /// Receive buffers the consumer needs under in-order matching (>= 1 when
  /// the link carries messages; see the header comment).
  int32_t buffers = 0;
  /// The first consuming action (index in to_stage's list) at which the
  /// consumer holds `buffers` buffers.
  int32_t buffers_at = -1;
};

/// Every message of one step of a schedule.
struct MessagePlan {
  int stages = 1;                        ///< P
  int chunks = 1;                        ///< V
  Placement placement;                   ///< the schedule's (placement_of)
  std::vector<PlannedMessage> messages;  ///< ordered by (from_stage, producer)
  std::vector<PlannedLink> links;        ///< links that carry messages, by (from, to)
  /// sent[s][k] / received[s][k]: id of the message action k of stage s
  /// sends / consumes, or -1.
  std::vector<std::vector<int32_t>> sent;
  std::vector<std::vector<int32_t>> received;
  /// held[s][k]: receive buffers of its link stage s holds when action k
  /// consumes a message from another stage under in-order matching (the
  /// link's receives up to that message are posted, the earlier consumed
  /// ones released: max_seq_so_far + 1 - consumed_before); 0 when action k
  /// consumes nothing from a link. PlannedLink::buffers is the largest
  /// held of the link's messages.
  std::vector<std::vector<int32_t>> held;

  /// Index of the link from -> to, or -1 when it carries nothing.
  int link_of(int from_stage, int to_stage) const;
  /// Links into / out of `stage`, as indices into links.
  std::vector<int32_t> links_into(int stage) const;
  std::vector<int32_t> links_out_of(int stage) const;
  /// The largest PlannedLink::buffers (0 without links).
  int32_t max_buffers() const;
};

/// Derives the plan of `schedule`. `send_bytes` (optional: empty or one entry
/// per virtual stage) gives the bytes F of virtual stage v sends; the
/// gradient from v+1 back to v has the same size.
/// Messages follow the schedule's placement; between two virtual stages of
/// one stage a message is a local hand-over (link -1).
/// REQUIRES: the schedule is complete (validate_schedule's static checks:
/// one F and one B or I per (micro-batch, chunk)) and its placement valid;
/// else throws UsageError.
/// O(actions) time and memory.
MessagePlan build_message_plan(const Schedule& schedule, std::span<const int64_t> send_bytes = {});

/// "s2->s3".
std::string link_name(const PlannedLink& link);

}  // namespace ppb
