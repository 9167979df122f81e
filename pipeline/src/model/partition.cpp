#include "ppb/pipeline/partition.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

constexpr std::string_view kManualPrefix = "manual:";
constexpr double kInf = std::numeric_limits<double>::infinity();

// "13802495 bytes (13.16 MiB)": exact for tests and scripts, readable for people.
std::string bytes_text(int64_t bytes) {
  const auto b = static_cast<double>(bytes);
  char buf[48];
  if (b >= 1024.0 * 1024 * 1024) {
    std::snprintf(buf, sizeof buf, " (%.2f GiB)", b / (1024.0 * 1024 * 1024));
  } else {
    std::snprintf(buf, sizeof buf, " (%.2f MiB)", b / (1024.0 * 1024));
  }
  return std::to_string(bytes) + " bytes" + buf;
}

std::string names_list() {
  std::string out;
  for (const PartitionInfo& p : partition_list()) {
    if (!out.empty()) out += ", ";
    out += p.name;
  }
  return out;
}

// ---- layer ------------------------------------------------------------------

/// A layer starts at its LayerNorm1; cuts may only fall there.
std::vector<int> layer_starts(const std::vector<Unit>& units) {
  std::vector<int> starts;
  for (size_t i = 0; i < units.size(); ++i) {
    if (units[i].kind == UnitKind::kLayerNorm1) starts.push_back(static_cast<int>(i));
  }
  return starts;
}

std::vector<UnitRange> layer_partition(const std::vector<Unit>& units, int parts) {
  const std::vector<int> starts = layer_starts(units);
  const int layers = static_cast<int>(starts.size());
  PPB_CHECK(parts <= layers, "layer_partition: more parts than layers passed partition_problem");
  // The first (layers % parts) parts take one layer more: the last part also
  // carries the head, the model's most expensive unit.
  const int base = layers / parts;
  const int extra = layers % parts;
  std::vector<UnitRange> out;
  int layer = 0;
  int begin = 0;
  for (int k = 0; k < parts; ++k) {
    layer += base + (k < extra ? 1 : 0);
    const int end =
        k == parts - 1 ? static_cast<int>(units.size()) : starts[static_cast<size_t>(layer)];
    out.push_back({begin, end});
    begin = end;
  }
  return out;
}

// ---- operator ---------------------------------------------------------------

std::vector<UnitRange> operator_partition(const std::vector<UnitTime>& times, int parts) {
  const int n = static_cast<int>(times.size());
  double total = 0;
  for (const UnitTime& t : times) total += t.total();
  // Relative slack so that equal costs summed in floating point still cut
  // where exact arithmetic would.
  const double slack = 1e-12 * total;
  std::vector<UnitRange> out;
  double running = 0;
  int begin = 0;
  int k = 1;  // index of the next cut
  for (int i = 0; i < n && k < parts; ++i) {
    running += times[static_cast<size_t>(i)].total();
    const int units_after = n - (i + 1);
    const int parts_after = parts - k;
    const bool must = units_after == parts_after;
    const bool may = units_after >= parts_after;
    const double target = total * k / parts;
    if (must || (may && running + slack >= target)) {
      out.push_back({begin, i + 1});
      begin = i + 1;
      ++k;
    }
  }
  out.push_back({begin, n});
  PPB_CHECK(static_cast<int>(out.size()) == parts, "operator partition: wrong part count");
  return out;
}

// ---- balanced ---------------------------------------------------------------
//
// A part [i, j) costs (T[j] - T[i]) + t[i] + t[j] in floating point, T the
// prefix sums of the unit times, t[i] the transfer of the tensor unit i-1
// sends (received at i > 0, sent at j < n). In exact arithmetic that is
// X[j] - Y[i] with X[j] = T[j] + t[j] and Y[i] = T[i] - t[i], which lets a
// sliding window find the best neighbour of a cut in O(1): the largest Y
// (cheapest part ending at j) or the smallest X (cheapest part starting at
// i). Rounding can make the floating-point cost of another neighbour a few
// ulps cheaper, so the window's pick is verified with the exact cost, and
// only when it misses the bound by less than the rounding slack are the
// other neighbours scanned. So every decision is the one the O(parts * n^2)
// dynamic program over the same costs makes:
//  1. the optimal bottleneck B is the smallest double for which a split
//     into exactly `parts` parts of cost <= B exists: bisection on the bits
//     of B (about 64 steps), each a pass per part count (O(parts * n));
//  2. among the splits meeting B, the one with the smallest sum of squared
//     part costs (ties: the earliest cut), by dynamic programming over the
//     cut positions reachable from the start and able to complete a split
//     meeting B, each scanning the starts whose part can meet B. When B is
//     close to the mean part cost, as in a model of many similar layers,
//     those positions are a narrow band and the work is about n times the
//     band; a model whose bottleneck is one huge unit leaves the other cuts
//     free and can cost up to parts * n^2 / 2 steps here.
// A part fits the memory cap on [first[j], j): a sub-range of a fitting
// range fits, so `first` is nondecreasing (two pointers).

struct Prefix {
  std::vector<double> time;      // summed unit time of units [0, i)
  std::vector<int64_t> params;   // summed param bytes
  std::vector<int64_t> acts;     // summed activation bytes
  std::vector<double> transfer;  // transfer[i] = link time of the tensor sent after unit i-1
};

Prefix make_prefix(const std::vector<Unit>& units, const std::vector<UnitTime>& times,
                   const LinkModel& link) {
  const size_t n = units.size();
  Prefix p;
  p.time.assign(n + 1, 0);
  p.params.assign(n + 1, 0);
  p.acts.assign(n + 1, 0);
  p.transfer.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    p.time[i + 1] = p.time[i] + times[i].total();
    p.params[i + 1] = p.params[i] + units[i].param_bytes;
    p.acts[i + 1] = p.acts[i] + units[i].activation_bytes;
    p.transfer[i + 1] = link.transfer_time(units[i].boundary_bytes);
  }
  return p;
}

bool fits(const Prefix& p, size_t i, size_t j, int64_t cap, int inflight,
          const MemoryModelOptions& memory) {
  if (cap <= 0) return true;
  const int64_t state = parameter_state(p.params[j] - p.params[i], memory).total();
  if (state > cap) return false;
  const int64_t acts = p.acts[j] - p.acts[i];
  // acts * inflight <= cap - state, without overflowing the product.
  return acts <= (cap - state) / inflight;
}

/// first[j]: the smallest i such that [i, j) fits the cap (j when none does).
std::vector<int> fit_starts(const Prefix& p, int n, int64_t cap, int inflight,
                            const MemoryModelOptions& memory) {
  std::vector<int> first(static_cast<size_t>(n) + 1, 0);
  int i = 0;
  for (int j = 1; j <= n; ++j) {
    while (i < j && !fits(p, static_cast<size_t>(i), static_cast<size_t>(j), cap, inflight, memory))
      ++i;
    first[static_cast<size_t>(j)] = i;
  }
  return first;
}

/// The parts' costs and what the searches need to order them.
class SplitCost {
 public:
  /// `time` and `transfer` as in Prefix; `first` from fit_starts.
  SplitCost(std::vector<double> time, std::vector<double> transfer, std::vector<int> first)
      : time_(std::move(time)), transfer_(std::move(transfer)), first_(std::move(first)) {
    n_ = static_cast<int>(time_.size()) - 1;
    end_key_ = time_;
    start_key_ = time_;
    double most = 0;
    for (int i = 1; i < n_; ++i) {
      end_key_[static_cast<size_t>(i)] += transfer_[static_cast<size_t>(i)];
      start_key_[static_cast<size_t>(i)] -= transfer_[static_cast<size_t>(i)];
      most = std::max(most, transfer_[static_cast<size_t>(i)]);
    }
    most_transfer_ = most;
    top_ = (time_.back() + most) + most;
    // Each cost and key is within 3 roundings of its exact value, all below
    // top_; 16 of them leave room to spare (see the section comment).
    slack_ = 16 * std::numeric_limits<double>::epsilon() * top_;
    // The tie-break sums squared costs: a power of two brings the largest
    // below 2^481, so no square (nor a sum of 2^24 of them) overflows, and
    // scaling by it is exact, so the sums order as the unscaled ones would.
    const int exponent = top_ > 0 ? std::ilogb(top_) : 0;
    square_scale_ = exponent > 480 ? std::ldexp(1.0, 480 - exponent) : 1.0;
  }

  int n() const { return n_; }
  /// The exact cost of [i, j), as the dynamic program computes it.
  double operator()(int i, int j) const {
    double c = time_[static_cast<size_t>(j)] - time_[static_cast<size_t>(i)];
    if (i > 0) c += transfer_[static_cast<size_t>(i)];   // receives what unit i-1 sent
    if (j < n_) c += transfer_[static_cast<size_t>(j)];  // sends unit j-1's output
    return c;
  }
  double time(int i) const { return time_[static_cast<size_t>(i)]; }
  double end_key(int j) const { return end_key_[static_cast<size_t>(j)]; }      ///< ~X[j]
  double start_key(int i) const { return start_key_[static_cast<size_t>(i)]; }  ///< ~Y[i]
  int first(int j) const { return first_[static_cast<size_t>(j)]; }
  double top() const { return top_; }  ///< >= every part's cost
  /// The square the tie-break sums for a part of cost `c`: c^2 times a
  /// power of two, finite for every c <= top().
  double square(double c) const {
    const double scaled = c * square_scale_;
    return scaled * scaled;
  }
  double slack() const { return slack_; }
  double most_transfer() const { return most_transfer_; }
  /// The first position whose T is >= t, and the last whose T is <= t.
  int first_time_at_least(double t) const {
    return static_cast<int>(std::lower_bound(time_.begin(), time_.end(), t) - time_.begin());
  }
  int last_time_at_most(double t) const {
    return static_cast<int>(std::upper_bound(time_.begin(), time_.end(), t) - time_.begin()) - 1;
  }
  /// The smallest start i whose part [i, j) can cost <= bound: the cost is
  /// at least T[j] - T[i], which falls as i grows.
  int earliest_start(int j, double bound) const {
    const auto it = std::partition_point(time_.begin(), time_.begin() + j,
                                         [&](double t) { return time(j) - t > bound; });
    return static_cast<int>(it - time_.begin());
  }

 private:
  std::vector<double> time_;
  std::vector<double> transfer_;
  std::vector<int> first_;
  std::vector<double> end_key_;
  std::vector<double> start_key_;
  int n_ = 0;
  double most_transfer_ = 0;
  double top_ = 0;
  double slack_ = 0;
  double square_scale_ = 1;
};

/// One part more: next[j] = 1 when some start i < j with prev[i] != 0 has a
/// fitting part [i, j) of cost <= bound, for the positions j part k may end
/// at. The window of starts [first[j], j) slides right as j grows; its
/// candidate is the start with the largest Y (a monotone deque).
void extend(const SplitCost& cost, int k, int parts, double bound, const std::vector<char>& prev,
            std::vector<char>& next, std::vector<int>& deque) {
  const int n = cost.n();
  std::fill(next.begin(), next.end(), 0);
  size_t head = 0;
  size_t tail = 0;
  int pushed = k - 1;  // next start position to offer to the window
  for (int j = k; j <= n - (parts - k); ++j) {
    for (; pushed < j; ++pushed) {
      if (prev[static_cast<size_t>(pushed)] == 0) continue;
      const double y = cost.start_key(pushed);
      while (tail > head && cost.start_key(deque[tail - 1]) <= y) --tail;
      deque[tail++] = pushed;
    }
    const int lo = cost.first(j);
    while (head < tail && deque[head] < lo) ++head;
    if (head == tail) continue;
    const double best = cost(deque[head], j);
    bool ok = best <= bound;
    if (!ok && best <= bound + cost.slack()) {
      // Another start can only win by rounding: its Y is within the slack
      // of the best Y, so its T lies in [Y - slack, Y + largest transfer +
      // slack], a few units.
      const double y = cost.start_key(deque[head]);
      const int from = std::max(lo, cost.first_time_at_least(y - cost.slack()));
      const int to =
          std::min(j - 1, cost.last_time_at_most(y + cost.most_transfer() + cost.slack()));
      for (int i = from; i <= to && !ok; ++i)
        ok = prev[static_cast<size_t>(i)] != 0 && cost(i, j) <= bound;
    }
    next[static_cast<size_t>(j)] = ok ? 1 : 0;
  }
}

/// Whether [0, n) splits into exactly `parts` fitting parts of cost <= bound.
bool feasible(const SplitCost& cost, int parts, double bound) {
  const auto size = static_cast<size_t>(cost.n()) + 1;
  std::vector<char> reach(size, 0);
  std::vector<char> next(size, 0);
  std::vector<int> deque(size);
  reach[0] = 1;
  for (int k = 1; k <= parts; ++k) {
    extend(cost, k, parts, bound, reach, next, deque);
    reach.swap(next);
  }
  return reach.back() != 0;
}

/// The smallest bound (a cost of some part, or 0) for which `feasible`
/// holds; +infinity when no split fits the cap at all. Costs are >= 0, and
/// the bits of non-negative doubles order as their values.
double min_max_bound(const SplitCost& cost, int parts) {
  if (!feasible(cost, parts, kInf)) return kInf;
  if (feasible(cost, parts, 0.0)) return 0.0;
  uint64_t lo = 0;  // infeasible
  auto hi = std::bit_cast<uint64_t>(cost.top());
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (feasible(cost, parts, std::bit_cast<double>(mid))) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return std::bit_cast<double>(hi);
}

/// done[k * (n + 1) + i]: [i, n) splits into parts - k fitting parts of
/// cost <= bound, the mirror of `feasible`: part k + 1 = [i, j) needs an end
/// j > i that can finish, whose part fits (first[j] <= i; `first` is
/// nondecreasing, so the ends form a window sliding right as i grows) and
/// costs <= bound; the window's candidate is the end with the smallest X.
std::vector<char> completions(const SplitCost& cost, int parts, double bound) {
  const int n = cost.n();
  const auto stride = static_cast<size_t>(n) + 1;
  std::vector<char> done(static_cast<size_t>(parts + 1) * stride, 0);
  done[static_cast<size_t>(parts) * stride + static_cast<size_t>(n)] = 1;
  std::vector<int> deque(stride);
  for (int k = parts - 1; k >= 0; --k) {
    const char* after = &done[static_cast<size_t>(k + 1) * stride];
    char* here = &done[static_cast<size_t>(k) * stride];
    size_t head = 0;
    size_t tail = 0;
    int pushed = k + 1;  // next end to offer to the window
    for (int i = k; i <= n - (parts - k); ++i) {
      for (; pushed <= n && cost.first(pushed) <= i; ++pushed) {
        if (after[pushed] == 0) continue;
        const double x = cost.end_key(pushed);
        while (tail > head && cost.end_key(deque[tail - 1]) >= x) --tail;
        deque[tail++] = pushed;
      }
      while (head < tail && deque[head] <= i) ++head;
      if (head == tail) continue;
      const double best = cost(i, deque[head]);
      bool ok = best <= bound;
      if (!ok && best <= bound + cost.slack()) {
        // As in `extend`: T of another winning end is within
        // [X - largest transfer - slack, X + slack] of the best X.
        const double x = cost.end_key(deque[head]);
        const int from =
            std::max(i + 1, cost.first_time_at_least(x - cost.most_transfer() - cost.slack()));
        const int to = std::min(pushed - 1, cost.last_time_at_most(x + cost.slack()));
        for (int j = from; j <= to && !ok; ++j) ok = after[j] != 0 && cost(i, j) <= bound;
      }
      here[i] = ok ? 1 : 0;
    }
  }
  return done;
}

/// Step 2: the most even split meeting `bound` (see the top of this section).
std::vector<UnitRange> most_even_split(const SplitCost& cost, int parts, double bound) {
  const int n = cost.n();
  const auto stride = static_cast<size_t>(n) + 1;
  const std::vector<char> done = completions(cost, parts, bound);
  std::vector<double> before(stride, kInf);
  std::vector<double> dp(stride, kInf);
  std::vector<int> arg(static_cast<size_t>(parts + 1) * stride, -1);
  // Positions reachable from the start with k parts meeting the bound
  // (`extend`, as `feasible` walks them).
  std::vector<char> reach(stride, 0);
  std::vector<char> next(stride, 0);
  std::vector<int> deque(stride);
  reach[0] = 1;
  before[0] = 0;
  for (int k = 1; k <= parts; ++k) {
    std::fill(dp.begin(), dp.end(), kInf);
    extend(cost, k, parts, bound, reach, next, deque);
    reach.swap(next);
    const char* can_finish = &done[static_cast<size_t>(k) * stride];
    for (int j = k; j <= n - (parts - k); ++j) {
      if (can_finish[j] == 0 || reach[static_cast<size_t>(j)] == 0) continue;
      const int lo = std::max({k - 1, cost.first(j), cost.earliest_start(j, bound)});
      double best = kInf;
      int best_i = -1;
      for (int i = lo; i < j; ++i) {
        const double b = before[static_cast<size_t>(i)];
        const double c = cost(i, j);
        if (b == kInf || c > bound) continue;
        const double value = b + cost.square(c);
        if (value < best) {
          best = value;
          best_i = i;
        }
      }
      dp[static_cast<size_t>(j)] = best;
      arg[static_cast<size_t>(k) * stride + static_cast<size_t>(j)] = best_i;
    }
    before.swap(dp);
  }
  PPB_CHECK(before[static_cast<size_t>(n)] < kInf,
            "most_even_split: no split meets the min-max bound");
  std::vector<UnitRange> out(static_cast<size_t>(parts));
  int j = n;
  for (int k = parts; k >= 1; --k) {
    const int i = arg[static_cast<size_t>(k) * stride + static_cast<size_t>(j)];
    out[static_cast<size_t>(k - 1)] = {i, j};
    j = i;
  }
  return out;
}

std::vector<UnitRange> balanced_partition(const std::vector<Unit>& units,
                                          const std::vector<UnitTime>& times, int parts,
                                          const PartitionOptions& options) {
  const int n = static_cast<int>(units.size());
  if (options.inflight < 1) {
    throw UsageError("--partition balanced: in-flight micro-batches must be >= 1, got " +
                     std::to_string(options.inflight));
  }
  if (options.memory_cap_bytes < 0) {
    throw UsageError("--partition balanced: memory cap must be >= 0 bytes, got " +
                     std::to_string(options.memory_cap_bytes));
  }
  for (size_t u = 0; u < times.size(); ++u) {
    if (!(std::isfinite(times[u].total()) && times[u].total() >= 0)) {
      throw UsageError("--partition balanced: unit " + units[u].name +
                       ": its time is not a finite number of seconds >= 0");
    }
  }
  Prefix p = make_prefix(units, times, options.link);
  const int64_t cap = options.memory_cap_bytes;
  const int inflight = options.inflight;
  std::vector<int> first = fit_starts(p, n, cap, inflight, options.memory);
  // The memory of a part by the same search, for the message below.
  std::vector<double> mem(p.params.size());
  for (size_t i = 0; i < mem.size(); ++i) {
    mem[i] = static_cast<double>(parameter_state(p.params[i], options.memory).total() +
                                 int64_t{inflight} * p.acts[i]);
  }

  const SplitCost cost(std::move(p.time), std::move(p.transfer), std::move(first));
  if (!std::isfinite(cost.top())) {
    // Each unit and link time is finite, but their sum is not: no bound
    // could be told from another.
    throw UsageError(
        "--partition balanced: the model's time plus its links' transfer times exceeds the "
        "largest number of seconds a double holds (the device, link or calibration figures are "
        "out of range)");
  }
  const double best = min_max_bound(cost, parts);
  if (best == kInf) {
    // Say how much memory the best split by memory would need.
    const size_t size = mem.size();
    const SplitCost by_memory(std::move(mem), std::vector<double>(size, 0.0),
                              std::vector<int>(size, 0));
    const double need = min_max_bound(by_memory, parts);
    throw UsageError("--partition balanced: no split into " + std::to_string(parts) +
                     " parts fits the memory cap of " + bytes_text(cap) + " per part with " +
                     std::to_string(inflight) +
                     " micro-batch(es) in flight; the smallest possible peak is " +
                     bytes_text(static_cast<int64_t>(need)));
  }
  return most_even_split(cost, parts, best);
}

// ---- manual -----------------------------------------------------------------

/// The ranges of "manual:...", each checked; throws UsageError naming a bad
/// one or ranges that do not cover the model (the user's spec is wrong,
/// whatever the part count).
std::vector<UnitRange> manual_ranges(std::string_view spec, int units) {
  const std::string flag = "--partition " + std::string(spec);
  std::string_view rest = spec.substr(kManualPrefix.size());
  if (rest.empty()) {
    throw UsageError(flag + ": expected unit ranges such as manual:0-9,10-30,31-58");
  }
  auto parse_index = [&flag](std::string_view text, std::string_view range) {
    int value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || value < 0) {
      throw UsageError(flag + ": range '" + std::string(range) +
                       "': expected FIRST-LAST unit indices (non-negative integers)");
    }
    return value;
  };
  std::vector<UnitRange> out;
  int expected = 0;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view range = rest.substr(0, comma);
    const size_t dash = range.find('-');
    const int first = parse_index(range.substr(0, dash), range);
    const int last =
        dash == std::string_view::npos ? first : parse_index(range.substr(dash + 1), range);
    if (last < first) {
      throw UsageError(flag + ": range '" + std::string(range) + "' ends before it starts");
    }
    if (first != expected) {
      throw UsageError(flag + ": range '" + std::string(range) + "' starts at unit " +
                       std::to_string(first) + " but must start at " + std::to_string(expected) +
                       " (ranges must be contiguous and start at 0)");
    }
    if (last >= units) {
      throw UsageError(flag + ": range '" + std::string(range) + "' goes past the last unit " +
                       std::to_string(units - 1));
    }
    out.push_back({first, last + 1});
    expected = last + 1;
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (expected != units) {
    throw UsageError(flag + ": the ranges end at unit " + std::to_string(expected - 1) +
                     " but the model has units 0-" + std::to_string(units - 1));
  }
  return out;
}

bool is_manual(std::string_view name) {
  return name.substr(0, kManualPrefix.size()) == kManualPrefix;
}

}  // namespace

const std::vector<PartitionInfo>& partition_list() {
  static const std::vector<PartitionInfo> kList = {
      {.name = "layer",
       .help = "whole transformer layers, equal counts (embedding first, head last)"},
      {.name = "operator", .help = "cuts between operator units, greedy equal compute"},
      {.name = "balanced",
       .help = "exact min-max over operator units, counting the cut tensor's transfer and a memory "
               "cap"},
      {.name = "manual:<ranges>", .help = "inclusive unit ranges, e.g. manual:0-9,10-30,31-58"},
  };
  return kList;
}

double part_cost(const std::vector<Unit>& units, const std::vector<UnitTime>& times,
                 UnitRange range, const LinkModel& link) {
  PPB_CHECK(range.begin >= 0 && range.begin < range.end &&
                range.end <= static_cast<int>(units.size()) && times.size() == units.size(),
            "part_cost: bad range");
  double c = 0;
  for (int i = range.begin; i < range.end; ++i) c += times[static_cast<size_t>(i)].total();
  if (range.begin > 0)
    c += link.transfer_time(units[static_cast<size_t>(range.begin - 1)].boundary_bytes);
  if (range.end < static_cast<int>(units.size())) {
    c += link.transfer_time(units[static_cast<size_t>(range.end - 1)].boundary_bytes);
  }
  return c;
}

int64_t part_memory_bytes(const std::vector<Unit>& units, UnitRange range, int inflight,
                          const MemoryModelOptions& memory) {
  int64_t params = 0;
  int64_t acts = 0;
  for (int i = range.begin; i < range.end; ++i) {
    params += units[static_cast<size_t>(i)].param_bytes;
    acts += units[static_cast<size_t>(i)].activation_bytes;
  }
  return parameter_state(params, memory).total() + int64_t{inflight} * acts;
}

std::string format_partition(const std::vector<UnitRange>& parts) {
  std::string out;
  for (const UnitRange& r : parts) {
    if (!out.empty()) out += ",";
    out += std::to_string(r.begin) + "-" + std::to_string(r.end - 1);
  }
  return out;
}

std::optional<std::string> partition_problem(std::string_view name, const std::vector<Unit>& units,
                                             int parts) {
  const bool manual = is_manual(name);
  if (!manual && name != "layer" && name != "operator" && name != "balanced") {
    return "--partition: unknown partition '" + std::string(name) +
           "' (partitions: " + names_list() + ")";
  }
  const std::string flag = "--partition " + std::string(manual ? "manual" : name);
  if (parts < 1) return flag + ": need at least 1 part, got " + std::to_string(parts);
  const int n = static_cast<int>(units.size());
  if (parts > n) {
    return flag + ": " + std::to_string(parts) + " parts but the model has " + std::to_string(n) +
           " units";
  }
  if (manual) {
    const size_t given = manual_ranges(name, n).size();
    if (static_cast<int>(given) == parts) return std::nullopt;
    return "--partition " + std::string(name) + ": " + std::to_string(given) +
           " ranges given but " + std::to_string(parts) + " parts are needed";
  }
  if (name == "layer") {
    const int layers = static_cast<int>(layer_starts(units).size());
    if (parts > layers) {
      return "--partition layer: " + std::to_string(parts) + " parts but the model has " +
             std::to_string(layers) + " layers";
    }
  }
  return std::nullopt;
}

std::vector<UnitRange> make_partition(std::string_view name, const std::vector<Unit>& units,
                                      const std::vector<UnitTime>& times, int parts,
                                      const PartitionOptions& options) {
  PPB_CHECK(times.size() == units.size(), "make_partition: one time per unit");
  if (std::optional<std::string> why = partition_problem(name, units, parts)) {
    throw UsageError(*why);
  }
  if (is_manual(name)) return manual_ranges(name, static_cast<int>(units.size()));
  if (name == "layer") return layer_partition(units, parts);
  if (name == "operator") return operator_partition(times, parts);
  return balanced_partition(units, times, parts, options);
}

}  // namespace ppb
