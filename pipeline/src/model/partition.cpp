#include "ppb/pipeline/partition.hpp"

#include <charconv>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>
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

std::vector<UnitRange> layer_partition(const std::vector<Unit>& units, int parts) {
  // A layer starts at its LayerNorm1; cuts may only fall there.
  std::vector<int> starts;
  for (size_t i = 0; i < units.size(); ++i) {
    if (units[i].kind == UnitKind::kLayerNorm1) starts.push_back(static_cast<int>(i));
  }
  const int layers = static_cast<int>(starts.size());
  if (parts > layers) {
    throw UsageError("--partition layer: " + std::to_string(parts) + " parts but the model has " +
                     std::to_string(layers) + " layers");
  }
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

bool fits(const Prefix& p, int i, int j, int64_t cap, int inflight) {
  if (cap <= 0) return true;
  const int64_t state = 2 * (p.params[static_cast<size_t>(j)] - p.params[static_cast<size_t>(i)]);
  if (state > cap) return false;
  const int64_t acts = p.acts[static_cast<size_t>(j)] - p.acts[static_cast<size_t>(i)];
  // acts * inflight <= cap - state, without overflowing the product.
  return acts <= (cap - state) / inflight;
}

int64_t memory_of(const Prefix& p, int i, int j, int inflight) {
  return 2 * (p.params[static_cast<size_t>(j)] - p.params[static_cast<size_t>(i)]) +
         int64_t{inflight} * (p.acts[static_cast<size_t>(j)] - p.acts[static_cast<size_t>(i)]);
}

// Minimises max over parts of `cost(i, j)` over all splits of [0, n) into
// `parts` non-empty contiguous parts: dp[k][j] = min_i max(dp[k-1][i], cost(i, j)),
// O(parts * n^2) — 64 parts x 230 units is about 1.7 million steps.
template <typename Cost>
std::vector<UnitRange> min_max_split(int n, int parts, const Cost& cost, double* best_value) {
  const auto stride = static_cast<size_t>(n + 1);
  std::vector<double> dp(static_cast<size_t>(parts + 1) * stride, kInf);
  std::vector<int> arg(dp.size(), -1);
  dp[0] = 0;  // zero parts cover zero units
  for (int k = 1; k <= parts; ++k) {
    // Part k ends at j; the k-1 parts before need >= k-1 units and the
    // parts after need >= parts-k units.
    for (int j = k; j <= n - (parts - k); ++j) {
      double best = kInf;
      int best_i = -1;
      for (int i = k - 1; i < j; ++i) {
        const double before = dp[static_cast<size_t>(k - 1) * stride + static_cast<size_t>(i)];
        if (before == kInf) continue;
        const double c = cost(i, j);
        const double value = before > c ? before : c;
        if (value < best) {
          best = value;
          best_i = i;
        }
      }
      dp[static_cast<size_t>(k) * stride + static_cast<size_t>(j)] = best;
      arg[static_cast<size_t>(k) * stride + static_cast<size_t>(j)] = best_i;
    }
  }
  *best_value = dp[static_cast<size_t>(parts) * stride + static_cast<size_t>(n)];
  if (*best_value == kInf) return {};
  std::vector<UnitRange> out(static_cast<size_t>(parts));
  int j = n;
  for (int k = parts; k >= 1; --k) {
    const int i = arg[static_cast<size_t>(k) * stride + static_cast<size_t>(j)];
    out[static_cast<size_t>(k - 1)] = {i, j};
    j = i;
  }
  return out;
}

// Among the splits whose every part costs at most `bound`, the one with the
// smallest sum of squared part costs: the bottleneck stays optimal and the
// other parts come out as even as they can (min-max alone leaves them
// arbitrary, e.g. one unit in a part next to the head's part).
// REQUIRES: some split meets the bound (min_max_split found one).
template <typename Cost>
std::vector<UnitRange> most_even_split(int n, int parts, const Cost& cost, double bound) {
  const auto stride = static_cast<size_t>(n + 1);
  std::vector<double> dp(static_cast<size_t>(parts + 1) * stride, kInf);
  std::vector<int> arg(dp.size(), -1);
  dp[0] = 0;
  for (int k = 1; k <= parts; ++k) {
    for (int j = k; j <= n - (parts - k); ++j) {
      double best = kInf;
      int best_i = -1;
      for (int i = k - 1; i < j; ++i) {
        const double before = dp[static_cast<size_t>(k - 1) * stride + static_cast<size_t>(i)];
        const double c = cost(i, j);
        if (before == kInf || c > bound) continue;
        const double value = before + c * c;
        if (value < best) {
          best = value;
          best_i = i;
        }
      }
      dp[static_cast<size_t>(k) * stride + static_cast<size_t>(j)] = best;
      arg[static_cast<size_t>(k) * stride + static_cast<size_t>(j)] = best_i;
    }
  }
  PPB_CHECK(dp[static_cast<size_t>(parts) * stride + static_cast<size_t>(n)] < kInf,
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
  const Prefix p = make_prefix(units, times, options.link);
  const int64_t cap = options.memory_cap_bytes;
  const int inflight = options.inflight;
  auto cost = [&p, n, cap, inflight](int i, int j) {
    if (!fits(p, i, j, cap, inflight)) return kInf;
    double c = p.time[static_cast<size_t>(j)] - p.time[static_cast<size_t>(i)];
    if (i > 0) c += p.transfer[static_cast<size_t>(i)];  // receives what unit i-1 sent
    if (j < n) c += p.transfer[static_cast<size_t>(j)];  // sends unit j-1's output
    return c;
  };
  double best = 0;
  const std::vector<UnitRange> out = min_max_split(n, parts, cost, &best);
  if (out.empty()) {
    // Say how much memory the best split by memory would need.
    double need = 0;
    auto mem = [&p, inflight](int i, int j) {
      return static_cast<double>(memory_of(p, i, j, inflight));
    };
    min_max_split(n, parts, mem, &need);
    throw UsageError("--partition balanced: no split into " + std::to_string(parts) +
                     " parts fits the memory cap of " + bytes_text(cap) + " per part with " +
                     std::to_string(inflight) +
                     " micro-batch(es) in flight; the smallest possible peak is " +
                     bytes_text(static_cast<int64_t>(need)));
  }
  return most_even_split(n, parts, cost, best);
}

// ---- manual -----------------------------------------------------------------

std::vector<UnitRange> manual_partition(std::string_view spec, int units, int parts) {
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
  if (static_cast<int>(out.size()) != parts) {
    throw UsageError(flag + ": " + std::to_string(out.size()) + " ranges given but " +
                     std::to_string(parts) + " parts are needed");
  }
  return out;
}

}  // namespace

const std::vector<PartitionInfo>& partition_list() {
  static const std::vector<PartitionInfo> kList = {
      {"layer", "whole transformer layers, equal counts (embedding first, head last)"},
      {"operator", "cuts between operator units, greedy equal compute"},
      {"balanced",
       "exact min-max over operator units, counting the cut tensor's transfer and a memory cap"},
      {"manual:<ranges>", "inclusive unit ranges, e.g. manual:0-9,10-30,31-58"},
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

int64_t part_memory_bytes(const std::vector<Unit>& units, UnitRange range, int inflight) {
  int64_t params = 0;
  int64_t acts = 0;
  for (int i = range.begin; i < range.end; ++i) {
    params += units[static_cast<size_t>(i)].param_bytes;
    acts += units[static_cast<size_t>(i)].activation_bytes;
  }
  return 2 * params + int64_t{inflight} * acts;
}

std::string format_partition(const std::vector<UnitRange>& parts) {
  std::string out;
  for (const UnitRange& r : parts) {
    if (!out.empty()) out += ",";
    out += std::to_string(r.begin) + "-" + std::to_string(r.end - 1);
  }
  return out;
}

std::vector<UnitRange> make_partition(std::string_view name, const std::vector<Unit>& units,
                                      const std::vector<UnitTime>& times, int parts,
                                      const PartitionOptions& options) {
  PPB_CHECK(times.size() == units.size(), "make_partition: one time per unit");
  const bool manual = name.substr(0, kManualPrefix.size()) == kManualPrefix;
  if (!manual && name != "layer" && name != "operator" && name != "balanced") {
    throw UsageError("--partition: unknown partition '" + std::string(name) +
                     "' (partitions: " + names_list() + ")");
  }
  const std::string flag = "--partition " + std::string(manual ? "manual" : name);
  if (parts < 1) {
    throw UsageError(flag + ": need at least 1 part, got " + std::to_string(parts));
  }
  const int n = static_cast<int>(units.size());
  if (parts > n) {
    throw UsageError(flag + ": " + std::to_string(parts) + " parts but the model has " +
                     std::to_string(n) + " units");
  }
  if (manual) return manual_partition(name, n, parts);
  if (name == "layer") return layer_partition(units, parts);
  if (name == "operator") return operator_partition(times, parts);
  return balanced_partition(units, times, parts, options);
}

}  // namespace ppb
