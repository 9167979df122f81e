// What a process builds once per key and keeps for its life: cuDNN's
// attention graphs, one pair per (device, shape). Building them is the
// expensive part of cuDNN (heuristics, and on recent GPUs a kernel compiled
// at run time); a run of every schedule x partition makes a backend, and
// its chunks, per combination, and the trial build that decides the
// attention before the run builds the same shape again. Each of those finds
// the graphs the first one built.
//
// A build that throws keeps nothing and its exception reaches the caller;
// the next get() of that key builds again. Builds of different keys, and
// gets, are serialised: a second thread asking for a key being built waits
// for it instead of building it twice.
//
// Example:
//   static BuiltOnce<Key, Graphs>& cache = *new BuiltOnce<Key, Graphs>;
//   std::shared_ptr<Graphs> g = cache.get(key, [&] { return build(key); });
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace ppb::cuda {

template <class Key, class Value>
class BuiltOnce {
 public:
  /// The value kept for `key`, else build()'s (a std::unique_ptr<Value>),
  /// kept from then on.
  template <class Build>
  std::shared_ptr<Value> get(const Key& key, Build&& build) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (const auto it = kept_.find(key); it != kept_.end()) return it->second;
    std::shared_ptr<Value> made = build();  // may throw: nothing kept
    ++builds_;
    kept_.emplace(key, made);
    return made;
  }

  /// How many builds succeeded (one per key kept).
  int64_t builds() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return builds_;
  }

 private:
  mutable std::mutex mutex_;
  std::map<Key, std::shared_ptr<Value>> kept_;
  int64_t builds_ = 0;
};

}  // namespace ppb::cuda
