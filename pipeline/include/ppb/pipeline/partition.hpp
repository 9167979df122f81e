// Partitions: cut the model's operator units into contiguous ranges, one per
// virtual stage (P ranges, or P * V for interleaved schedules; range v goes to
// stage v % P, chunk v / P).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ppb/pipeline/costs.hpp"
#include "ppb/pipeline/device.hpp"
#include "ppb/pipeline/memory_model.hpp"
#include "ppb/pipeline/model.hpp"

namespace ppb {

/// A registered partition, for `pipebench list` and error messages.
struct PartitionInfo {
  std::string name;  ///< "layer", "operator", "balanced", "manual:<ranges>"
  std::string help;  ///< one line
};

/// Every partition, in the order `pipebench list` shows them.
const std::vector<PartitionInfo>& partition_list();

struct PartitionOptions {
  /// Link used to price the tensor a part sends and receives (`balanced`).
  LinkModel link;
  /// Per-part memory cap in bytes for `balanced`; 0 = no cap. A part fits when
  ///   parameter_state(param_bytes, memory).total() (parameters, gradients,
  ///   optimizer state: memory_model.hpp) + inflight * activation_bytes <= cap.
  int64_t memory_cap_bytes = 0;
  /// Micro-batches of activations counted against the cap (>= 1).
  int inflight = 1;
  /// The memory model's options (optimizer, element width) for the cap.
  MemoryModelOptions memory;
};

/// Cuts `units` into `parts` contiguous, non-empty ranges covering all units.
///  * "layer": cuts only between transformer layers, equal layer counts; the
///    first (layers % parts) parts get one layer more (the last part also
///    carries final_norm + head, the first the embedding).
///  * "operator": walks the units and cuts after the unit whose running cost
///    (fwd + bwd_input + bwd_weight) reaches k / parts of the total, k = 1..parts-1.
///  * "balanced": the exact minimum over all contiguous cuts of the largest
///    part cost, part cost = its compute + link.transfer_time(bytes it
///    receives) + link.transfer_time(bytes it sends); parts that break
///    memory_cap_bytes are not allowed. Among the splits with that optimal
///    bottleneck it returns the one with the smallest sum of squared part
///    costs (the other parts as even as possible; ties: the earliest cut).
///    In floating point a part [i, j) costs X[j] - Y[i], X[j] = T[j] + the
///    transfer of what unit j-1 sends (none at the end), Y[i] = T[i] - the
///    transfer of what unit i-1 sent (none at the start), T the prefix sums
///    of the unit totals. Work: the bottleneck by bisection, O(parts * units)
///    per step (about 64 steps); the tie-break by a dynamic program over the
///    cut positions that can still meet the bottleneck, each scanning the
///    starts whose part meets it (near-linear when the bottleneck is close to
///    the mean part cost; memory parts * units bytes).
///  * "manual:0-9,10-30,31-58": inclusive unit index ranges, in order,
///    contiguous, covering every unit, exactly `parts` of them.
/// REQUIRES: times.size() == units.size().
/// Throws UsageError with partition_problem's message when it has one, or
/// for no `balanced` cut fitting the memory cap (names the cap) or unit
/// times that are not finite.
std::vector<UnitRange> make_partition(std::string_view name, const std::vector<Unit>& units,
                                      const std::vector<UnitTime>& times, int parts,
                                      const PartitionOptions& options = {});

/// Why `name` cannot cut `units` into `parts`, or nullopt: an unknown name
/// (lists the names), parts < 1, parts > units ("--partition operator: 300
/// parts but the model has 59 units"), `layer` with parts > layers, a
/// manual spec with another number of ranges. A search over part counts
/// asks this first. Throws UsageError for a malformed manual spec (a bad
/// range, named, or ranges that do not cover the model): the spec is wrong
/// whatever the count.
std::optional<std::string> partition_problem(std::string_view name, const std::vector<Unit>& units,
                                             int parts);

/// The cost `balanced` minimises for one part [range.begin, range.end):
/// summed unit time plus the transfer of the received and the sent tensor.
double part_cost(const std::vector<Unit>& units, const std::vector<UnitTime>& times,
                 UnitRange range, const LinkModel& link);

/// Bytes a part holds against the cap: the memory model's parameter state
/// of its parameters + inflight * activations. With the default options
/// (SGD, fp32): 2 * params + inflight * activations.
int64_t part_memory_bytes(const std::vector<Unit>& units, UnitRange range, int inflight,
                          const MemoryModelOptions& memory = {});

/// "0-9,10-30,31-58": the ranges in manual: form (round-trips through make_partition).
std::string format_partition(const std::vector<UnitRange>& parts);

}  // namespace ppb
