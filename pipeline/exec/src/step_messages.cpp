#include "step_messages.hpp"

#include <algorithm>
#include <string>

#include "ppb/profiling/check.hpp"
#include "ppb/profiling/clock.hpp"

namespace ppb {
namespace {

// The record of one planned message as this rank sees it (the peer is the
// other end); times are filled in as it is posted and completes.
CommRecord comm_record(const PlannedMessage& m, bool send, int64_t bytes) {
  CommRecord c;
  c.send = send;
  c.kind = m.kind;
  c.peer = send ? m.to_stage : m.from_stage;
  c.microbatch = m.microbatch;
  c.from_virtual = m.from_virtual;
  c.to_virtual = m.to_virtual;
  c.bytes = bytes;
  c.flow_id = m.flow_id;
  return c;
}

}  // namespace

TrackedBuffer BufferPool::take(int64_t bytes, MemorySpace space) {
  if (bytes == 0) return {};
  auto it = free_.find({space, bytes});
  if (it != free_.end() && !it->second.empty()) {
    TrackedBuffer b = std::move(it->second.back());
    it->second.pop_back();
    return b;
  }
  return backend_.allocate(bytes, space, MemCategory::kCommBuffers);
}

void BufferPool::give(TrackedBuffer&& buffer, MemorySpace space) {
  if (buffer.empty()) return;
  const int64_t bytes = buffer.size();
  free_[{space, bytes}].push_back(std::move(buffer));
}

double StepContext::now() const { return now_seconds() - origin; }

// --- receives ----------------------------------------------------------------

ReceivePoster::ReceivePoster(StepContext& ctx, int window) : ctx_(ctx) {
  const MessagePlan& plan = ctx.plan;
  for (const int32_t li : plan.links_into(ctx.stage)) {
    const PlannedLink& pl = plan.links[static_cast<size_t>(li)];
    Link link;
    link.window = std::max(pl.buffers, window);
    ctx.record.links.push_back({pl.from_stage, pl.to_stage, pl.buffers, link.window});
    for (const int32_t id : pl.messages) {
      const PlannedMessage& m = plan.messages[static_cast<size_t>(id)];
      Recv r;
      r.message = id;
      r.link = static_cast<int>(links_.size());
      // The consumer's chunk: F of to_virtual reads the activation, B/I of
      // to_virtual the gradient.
      const int chunk = m.to_chunk;
      r.bytes = m.kind == MessageKind::kActivation ? ctx.backend.input_bytes(chunk)
                                                   : ctx.backend.output_bytes(chunk);
      r.record = ctx.record.comms.size();
      ctx.record.comms.push_back(comm_record(m, /*send=*/false, r.bytes));
      of_message_[id] = recvs_.size();
      link.recvs.push_back(recvs_.size());
      recvs_.push_back(std::move(r));
    }
    links_.push_back(std::move(link));
  }
}

void ReceivePoster::post() {
  for (Link& link : links_) {
    while (link.next < link.recvs.size() && link.held < link.window) {
      Recv& r = recvs_[link.recvs[link.next++]];
      r.wire = ctx_.pool.take(r.bytes, ctx_.wire_space());
      CommRecord& c = ctx_.record.comms[r.record];
      c.start = ctx_.now();
      r.request = ctx_.transport.irecv(r.wire.data(), r.bytes, c.peer,
                                       ctx_.plan.messages[static_cast<size_t>(r.message)].seq);
      r.state = State::kPosted;
      ++link.held;
      if (ctx_.instrumentation != nullptr) ctx_.instrumentation->comm_begin(c);
    }
  }
}

bool ReceivePoster::progress() {
  post();
  bool arrived = false;
  for (Link& link : links_) {
    while (link.open < link.next && recvs_[link.recvs[link.open]].state == State::kTaken)
      ++link.open;
    // A link's messages arrive in link order (one sender, sent in order):
    // testing stops at the first that has not arrived (each MPI_Test runs
    // the MPI progress engine, which is not free on a shared machine).
    for (size_t i = link.open; i < link.next; ++i) {
      Recv& r = recvs_[link.recvs[i]];
      if (r.state != State::kPosted) continue;
      if (!test(r)) break;
      arrived = true;
    }
  }
  return arrived;
}

bool ReceivePoster::test(Recv& r) {
  if (!ctx_.transport.test(r.request)) return false;
  CommRecord& c = ctx_.record.comms[r.record];
  c.end = ctx_.now();
  r.arrived = c.end;
  if (ctx_.instrumentation != nullptr) ctx_.instrumentation->comm_end(c);
  if (!ctx_.staging) {
    r.buffer = std::move(r.wire);
    r.state = State::kReady;
    return true;
  }
  r.buffer = ctx_.pool.take(r.bytes, ctx_.backend.memory_space());
  r.copy = ctx_.backend.copy_async(r.buffer.data(), r.wire.data(), r.bytes);
  r.state = State::kCopying;
  return true;
}

double ReceivePoster::arrival(int32_t id) const {
  if (const auto h = hand_overs_.find(id); h != hand_overs_.end()) return h->second.second;
  return recvs_[of_message_.at(id)].arrived;
}

bool ReceivePoster::ready(int32_t id) {
  if (ctx_.plan.messages[static_cast<size_t>(id)].local()) return hand_overs_.count(id) != 0;
  const auto it = of_message_.find(id);
  PPB_CHECK(it != of_message_.end(), "executor: no receive for an action's input");
  Recv& r = recvs_[it->second];
  switch (r.state) {
    case State::kPlanned:
      return false;  // its link's window is full of messages for later actions
    case State::kPosted:
      if (!test(r)) return false;
      if (r.state == State::kReady) return true;
      [[fallthrough]];
    case State::kCopying:
      if (!ctx_.backend.copy_done(r.copy)) return false;
      ctx_.pool.give(std::move(r.wire), MemorySpace::kPinnedHost);
      r.state = State::kReady;
      return true;
    case State::kReady:
      return true;
    case State::kTaken:
      break;
  }
  PPB_CHECK(false, "executor: a message was consumed twice");
  return false;
}

TrackedBuffer ReceivePoster::take(int32_t id) {
  if (auto h = hand_overs_.find(id); h != hand_overs_.end()) {
    TrackedBuffer b = std::move(h->second.first);
    hand_overs_.erase(h);
    return b;
  }
  PPB_CHECK(ready(id), "executor: an action took an input that is not ready");
  Recv& r = recvs_[of_message_.at(id)];
  r.state = State::kTaken;
  --links_[static_cast<size_t>(r.link)].held;
  return std::move(r.buffer);
}

void ReceivePoster::hand_over(int32_t id, TrackedBuffer&& buffer) {
  hand_overs_[id] = {std::move(buffer), ctx_.now()};
}

int ReceivePoster::peer(int32_t id) const {
  return ctx_.plan.messages[static_cast<size_t>(id)].from_stage;
}

void ReceivePoster::check_consumed() const {
  PPB_CHECK(hand_overs_.empty(), "executor: a local hand-over was never consumed");
  for (const Recv& r : recvs_) {
    PPB_CHECK(r.state == State::kTaken, "executor: a received message was never consumed");
  }
}

// --- sends -------------------------------------------------------------------

void SendTracker::send(int32_t id, TrackedBuffer&& buffer) {
  const PlannedMessage& m = ctx_.plan.messages[static_cast<size_t>(id)];
  Pending p;
  p.message = id;
  p.record = ctx_.record.comms.size();
  CommRecord c = comm_record(m, /*send=*/true, buffer.size());
  c.start = ctx_.now();
  ctx_.record.comms.push_back(c);
  p.buffer = std::move(buffer);
  if (ctx_.staging) {
    p.wire = ctx_.pool.take(p.buffer.size(), MemorySpace::kPinnedHost);
    p.copy = ctx_.backend.copy_async(p.wire.data(), p.buffer.data(), p.buffer.size());
  }
  if (ctx_.instrumentation != nullptr)
    ctx_.instrumentation->comm_begin(ctx_.record.comms[p.record]);
  if (!ctx_.staging) start(p);
  pending_.push_back(std::move(p));
}

int SendTracker::first_pending_peer() const {
  if (pending_.empty()) return -1;
  return ctx_.plan.messages[static_cast<size_t>(pending_.front().message)].to_stage;
}

void SendTracker::start(Pending& p) {
  const PlannedMessage& m = ctx_.plan.messages[static_cast<size_t>(p.message)];
  const TrackedBuffer& wire = ctx_.staging ? p.wire : p.buffer;
  p.request = ctx_.transport.isend(wire.data(), wire.size(), m.to_stage, m.seq);
}

bool SendTracker::progress() {
  bool moved = false;
  for (size_t i = 0; i < pending_.size();) {
    Pending& p = pending_[i];
    if (p.copy != 0) {
      // Sends of one link must start in link order: a later copy waits for
      // an earlier one of any link (copies complete in order anyway).
      if (!ctx_.backend.copy_done(p.copy)) break;
      p.copy = 0;
      ctx_.pool.give(std::move(p.buffer), ctx_.backend.memory_space());
      start(p);
      moved = true;
    }
    if (!ctx_.transport.test(p.request)) {
      ++i;
      continue;
    }
    CommRecord& c = ctx_.record.comms[p.record];
    c.end = ctx_.now();
    if (ctx_.instrumentation != nullptr) ctx_.instrumentation->comm_end(c);
    ctx_.pool.give(std::move(p.buffer), ctx_.backend.memory_space());
    ctx_.pool.give(std::move(p.wire), MemorySpace::kPinnedHost);
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    moved = true;
  }
  return moved;
}

}  // namespace ppb
