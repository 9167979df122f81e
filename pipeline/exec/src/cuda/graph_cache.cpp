#include "cuda/graph_cache.hpp"

#include <string>

namespace ppb::cuda {

GraphCache::GraphCache(GraphOps& ops, bool enabled) : ops_(&ops) {
  if (!enabled) disabled_ = "--cuda-graphs off";
}

GraphCache::~GraphCache() {
  for (auto& [id, entry] : graphs_) ops_->destroy(entry.graph);
}

void GraphCache::disable(const std::string& reason) {
  if (disabled_.empty()) disabled_ = reason;
}

void GraphCache::turn_off(const std::string& why) {
  disable(why);
  for (auto& [id, entry] : graphs_) ops_->destroy(entry.graph);
  graphs_.clear();
}

GraphDecision GraphCache::decide(const GraphKey& key) const {
  if (!disabled_.empty()) return GraphDecision::kEager;
  const auto it = graphs_.find(identity(key));
  if (it == graphs_.end()) return GraphDecision::kCapture;
  return it->second.key == key ? GraphDecision::kReplay : GraphDecision::kRebuild;
}

GraphDecision GraphCache::run_eager(const std::string& reason,
                                    const std::function<void()>& enqueue) {
  enqueue();
  ++counts_.eager;
  // With graphs off, that is why; else the caller's reason.
  if (eager_reason_.empty()) eager_reason_ = disabled_.empty() ? reason : disabled_;
  return GraphDecision::kEager;
}

GraphDecision GraphCache::run_sizing(const std::function<void()>& enqueue) {
  if (!disabled_.empty()) return run_eager(disabled_, enqueue);
  enqueue();
  ++counts_.eager;
  return GraphDecision::kEager;
}

GraphDecision GraphCache::prepare(const GraphKey& key, const std::function<void()>& enqueue) {
  const GraphDecision d = decide(key);
  if (d == GraphDecision::kEager || d == GraphDecision::kReplay) return d;
  // Capture or rebuild: a refused capture leaves the stream as it was, so
  // the work runs eagerly instead (run does that), and so does every later
  // action.
  if (std::string why = ops_->begin_capture(); !why.empty()) {
    turn_off(why);
    return GraphDecision::kEager;
  }
  try {
    enqueue();
  } catch (const CaptureRefused& e) {
    ops_->abort_capture();
    turn_off(e.what());
    return GraphDecision::kEager;
  } catch (...) {
    ops_->abort_capture();
    throw;
  }
  std::string why;
  GraphHandle graph = ops_->end_capture(&why);
  if (graph == nullptr) {
    // The work was recorded, not run: run enqueues it eagerly (enqueue only
    // enqueues device work, so running it again repeats nothing on the
    // host), and so does every later action.
    turn_off(why);
    return GraphDecision::kEager;
  }
  Entry& entry = graphs_[identity(key)];
  if (entry.graph != nullptr) ops_->destroy(entry.graph);
  entry = Entry{key, graph, d};
  return GraphDecision::kReplay;
}

GraphDecision GraphCache::run(const GraphKey& key, const std::function<void()>& enqueue) {
  if (prepare(key, enqueue) == GraphDecision::kEager) return run_eager(disabled_, enqueue);
  Entry& entry = graphs_.at(identity(key));
  ops_->launch(entry.graph);
  const GraphDecision did = entry.next;
  entry.next = GraphDecision::kReplay;
  ++(did == GraphDecision::kCapture   ? counts_.captured
     : did == GraphDecision::kRebuild ? counts_.rebuilt
                                      : counts_.replayed);
  return did;
}

}  // namespace ppb::cuda
