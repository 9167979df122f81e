// Partitions: `balanced` against a brute-force optimum and against
// torchgpipe's balance-by-time heuristic, `layer` equal counts, `operator`'s
// greedy rule, the memory cap, and every manual-range error.
#include "ppb/pipeline/partition.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ppb/pipeline/device.hpp"
#include "ppb/pipeline/model.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

// Units whose compute is `costs` (all in fwd), with given boundary, param and
// activation bytes.
struct Synthetic {
  std::vector<Unit> units;
  std::vector<UnitTime> times;
};

Synthetic synthetic(const std::vector<double>& costs, const std::vector<int64_t>& boundary = {},
                    const std::vector<int64_t>& params = {},
                    const std::vector<int64_t>& acts = {}) {
  Synthetic s;
  for (size_t i = 0; i < costs.size(); ++i) {
    Unit u;
    u.name = "u" + std::to_string(i);
    u.boundary_bytes = boundary.empty() ? 0 : boundary[i];
    u.param_bytes = params.empty() ? 0 : params[i];
    u.activation_bytes = acts.empty() ? 0 : acts[i];
    s.units.push_back(u);
    s.times.push_back({costs[i], 0, 0});
  }
  return s;
}

double bottleneck(const Synthetic& s, const std::vector<UnitRange>& parts, const LinkModel& link) {
  double worst = 0;
  for (const UnitRange& r : parts) worst = std::max(worst, part_cost(s.units, s.times, r, link));
  return worst;
}

// Brute force over every set of cut positions; nullopt when no split fits the cap.
std::optional<double> brute_force(const Synthetic& s, int parts, const PartitionOptions& opt) {
  const int n = static_cast<int>(s.units.size());
  std::optional<double> best;
  std::vector<int> cuts(static_cast<size_t>(parts - 1));
  // Enumerate combinations of parts-1 cut points among 1..n-1.
  std::vector<bool> choose(static_cast<size_t>(n - 1), false);
  std::fill(choose.begin(), choose.begin() + (parts - 1), true);
  do {
    std::vector<UnitRange> ranges;
    int begin = 0;
    for (int i = 0; i < n - 1; ++i) {
      if (choose[static_cast<size_t>(i)]) {
        ranges.push_back({begin, i + 1});
        begin = i + 1;
      }
    }
    ranges.push_back({begin, n});
    bool ok = true;
    for (const UnitRange& r : ranges) {
      if (opt.memory_cap_bytes > 0 &&
          part_memory_bytes(s.units, r, opt.inflight) > opt.memory_cap_bytes) {
        ok = false;
      }
    }
    if (!ok) continue;
    const double b = bottleneck(s, ranges, opt.link);
    if (!best || b < *best) best = b;
  } while (std::prev_permutation(choose.begin(), choose.end()));
  return best;
}

// torchgpipe's balance-by-time partitioner (torchgpipe/balance/blockpartition.py,
// `solve`, after Barany et al., "Block partitions of sequences"), reimplemented:
// normalise the costs to [0, 1], start from equal-count blocks, and move one
// element at a time from a neighbour into the lightest block until the
// heaviest block exceeds the lightest by at most 1 (in normalised units).
// Python's max/min over (size, index) tuples break ties towards the larger
// index for the maximum and the smaller index for the minimum; kept here.
std::vector<UnitRange> torchgpipe_solve(const std::vector<double>& seq, int parts) {
  const int n = static_cast<int>(seq.size());
  const double lo = *std::min_element(seq.begin(), seq.end());
  const double span = *std::max_element(seq.begin(), seq.end()) - lo;
  std::vector<double> norm;
  for (double x : seq) norm.push_back(span == 0 ? 0.0 : (x - lo) / span);
  std::vector<int> splits;
  for (int x = 0; x < parts - 1; ++x) splits.push_back(n / parts * (x + 1));
  splits.push_back(n);
  auto block = [&](int i) {
    const int start = i > 0 ? splits[static_cast<size_t>(i - 1)] : 0;
    double sum = 0;
    for (int k = start; k < splits[static_cast<size_t>(i)]; ++k)
      sum += norm[static_cast<size_t>(k)];
    return sum;
  };
  auto result = [&] {
    std::vector<UnitRange> out;
    int begin = 0;
    for (int s : splits) {
      out.push_back({begin, s});
      begin = s;
    }
    return out;
  };
  for (int guard = 0; guard < 100000; ++guard) {
    int p = 0;
    double max_size = -1;
    for (int i = 0; i < parts; ++i) {
      if (block(i) >= max_size) {
        max_size = block(i);
        p = i;
      }
    }
    while (true) {
      int q = 0;
      double min_size = std::numeric_limits<double>::infinity();
      for (int i = 0; i < parts; ++i) {
        if (block(i) < min_size) {
          min_size = block(i);
          q = i;
        }
      }
      if (max_size <= min_size + 1) return result();
      int h = 0;
      if (p < q) {
        h = q - 1;
        splits[static_cast<size_t>(h)] -= 1;
      } else {
        h = q + 1;
        splits[static_cast<size_t>(q)] += 1;
      }
      if (++guard > 100000) break;
      if (p == h) break;
    }
  }
  ADD_FAILURE() << "torchgpipe_solve did not terminate";
  return result();
}

// Largest block sum of a plain cost vector; blocks may be empty (torchgpipe's
// solve can leave a block empty, e.g. {7, 7, 8, 8} into 3 gives {7, 7, 8}, {}, {8}).
double block_bottleneck(const std::vector<double>& costs, const std::vector<UnitRange>& blocks) {
  double worst = 0;
  for (const UnitRange& r : blocks) {
    double sum = 0;
    for (int i = r.begin; i < r.end; ++i) sum += costs[static_cast<size_t>(i)];
    worst = std::max(worst, sum);
  }
  return worst;
}

TEST(Balanced, EqualsBruteForceOnRandomCosts) {
  std::mt19937 rng(20241129);
  std::uniform_int_distribution<int> cost(0, 20);
  std::uniform_int_distribution<int> bytes(0, 6);
  int infeasible = 0;
  int capped = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int n = std::uniform_int_distribution<int>(1, 9)(rng);
    const int parts = std::uniform_int_distribution<int>(1, std::min(n, 5))(rng);
    std::vector<double> c;
    std::vector<int64_t> b, p, a;
    for (int i = 0; i < n; ++i) {
      c.push_back(cost(rng));
      b.push_back(bytes(rng));
      p.push_back(bytes(rng));
      a.push_back(bytes(rng));
    }
    const Synthetic s = synthetic(c, b, p, a);
    PartitionOptions opt;
    // Integer latency and bandwidth 1 keep every cost an exact integer.
    opt.link.latency = trial % 3;
    opt.link.bandwidth = trial % 2 == 0 ? 1.0 : 0.0;
    opt.inflight = 1 + trial % 3;
    opt.memory_cap_bytes = trial % 4 == 0 ? 0 : std::uniform_int_distribution<int>(4, 60)(rng);
    const std::optional<double> best = brute_force(s, parts, opt);
    if (!best) {
      ++infeasible;
      EXPECT_THROW(make_partition("balanced", s.units, s.times, parts, opt), UsageError);
      continue;
    }
    if (opt.memory_cap_bytes > 0) ++capped;
    const auto ranges = make_partition("balanced", s.units, s.times, parts, opt);
    ASSERT_EQ(ranges.size(), static_cast<size_t>(parts));
    EXPECT_EQ(bottleneck(s, ranges, opt.link), *best) << "trial " << trial;
    for (const UnitRange& r : ranges) {
      if (opt.memory_cap_bytes > 0) {
        EXPECT_LE(part_memory_bytes(s.units, r, opt.inflight), opt.memory_cap_bytes);
      }
    }
  }
  // The random instances exercise both the cap and infeasibility.
  EXPECT_GT(infeasible, 50);
  EXPECT_GT(capped, 500);
}

TEST(Balanced, BeatsTorchgpipeWhereItMissesTheOptimum) {
  // Normalised, {5, 5, 8} is {0, 0, 1}: the equal-count start {5 | 5, 8} has
  // blocks 0 and 1, within torchgpipe's stopping slack of 1, so it stops at
  // bottleneck 13 although {5, 5 | 8} gives 10.
  const std::vector<double> costs = {5, 5, 8};
  const Synthetic s = synthetic(costs);
  const LinkModel none;
  const auto theirs = torchgpipe_solve(costs, 2);
  EXPECT_EQ(block_bottleneck(costs, theirs), 13);
  EXPECT_EQ(brute_force(s, 2, {}), 10);
  const auto ours = make_partition("balanced", s.units, s.times, 2);
  EXPECT_EQ(bottleneck(s, ours, none), 10);
  EXPECT_EQ(ours, (std::vector<UnitRange>{{0, 2}, {2, 3}}));

  // On random vectors ours is never worse than torchgpipe's and sometimes better.
  std::mt19937 rng(7);
  int strictly_better = 0;
  for (int trial = 0; trial < 500; ++trial) {
    const int n = std::uniform_int_distribution<int>(2, 10)(rng);
    const int parts = std::uniform_int_distribution<int>(2, std::min(n, 4))(rng);
    std::vector<double> c;
    for (int i = 0; i < n; ++i) c.push_back(std::uniform_int_distribution<int>(1, 9)(rng));
    const Synthetic r = synthetic(c);
    const double mine = bottleneck(r, make_partition("balanced", r.units, r.times, parts), none);
    const double tg = block_bottleneck(c, torchgpipe_solve(c, parts));
    EXPECT_LE(mine, tg);
    if (mine < tg) ++strictly_better;
  }
  EXPECT_GT(strictly_better, 0);
}

TEST(Balanced, KeepsTheOtherPartsEvenBesideTheBottleneck) {
  // The 10 is the bottleneck whatever the cuts; of the splits that reach 10,
  // {10 | 1 1 1 | 1 1 1} is the most even, {10 | 1 | 1 1 1 1 1} is not.
  const Synthetic s = synthetic({10, 1, 1, 1, 1, 1, 1});
  EXPECT_EQ(make_partition("balanced", s.units, s.times, 3),
            (std::vector<UnitRange>{{0, 1}, {1, 4}, {4, 7}}));
  const Synthetic t = synthetic({1, 1, 1, 1, 1, 1, 10});
  EXPECT_EQ(make_partition("balanced", t.units, t.times, 3),
            (std::vector<UnitRange>{{0, 3}, {3, 6}, {6, 7}}));
}

TEST(Balanced, HugeFiniteCostsCutAsTheirScaledDownCopy) {
  // Costs near 1e300: their squares overflow a double, yet scaled by 2^-900
  // (exactly) they are ordinary numbers; both must cut alike, and the tie-
  // break must still prefer the even split.
  const std::vector<double> small = {10, 1, 1, 1, 1, 1, 1, 3, 2, 2};
  std::vector<double> huge;
  for (double c : small) huge.push_back(std::ldexp(c, 990));
  const Synthetic s = synthetic(small);
  const Synthetic h = synthetic(huge);
  for (int parts = 1; parts <= 6; ++parts) {
    EXPECT_EQ(make_partition("balanced", h.units, h.times, parts),
              make_partition("balanced", s.units, s.times, parts))
        << parts << " parts";
  }
  EXPECT_EQ(make_partition("balanced", h.units, h.times, 3),
            (std::vector<UnitRange>{{0, 1}, {1, 7}, {7, 10}}));
}

TEST(Balanced, CostsBeyondADoubleAreAUsageError) {
  // Each transfer is finite, the part between two of them is not.
  const Synthetic s = synthetic({1, 1, 1, 1}, {1, 1, 1, 0});
  PartitionOptions opt;
  opt.link.latency = 1e308;
  try {
    make_partition("balanced", s.units, s.times, 3, opt);
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--partition balanced: the model's time plus its links'"),
              std::string::npos)
        << e.what();
  }
  Synthetic t = synthetic({1, 1, 1});
  t.times[1].bwd_input = std::numeric_limits<double>::infinity();
  EXPECT_THROW(make_partition("balanced", t.units, t.times, 2), UsageError);
  t.times[1].bwd_input = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(make_partition("balanced", t.units, t.times, 2), UsageError);
}

TEST(Balanced, CountsTheTransferOfTheCutTensor) {
  // Compute alone would cut {4, 4 | 4, 4}; but the tensor after unit 1 is
  // huge and the one after unit 0 is free, so the optimum moves the cut.
  const Synthetic s = synthetic({4, 4, 4, 4}, {0, 100, 0, 0});
  PartitionOptions opt;
  opt.link.bandwidth = 10;  // 100 bytes take 10
  const auto ranges = make_partition("balanced", s.units, s.times, 2, opt);
  // {4 | 4,4,4} and {4,4,4 | 4} give 12; {4,4 | 4,4} gives 8 + 10 = 18.
  EXPECT_EQ(bottleneck(s, ranges, opt.link), 12);
  EXPECT_EQ(ranges, (std::vector<UnitRange>{{0, 1}, {1, 4}}));
}

TEST(Balanced, HonoursTheMemoryCapOnAModel) {
  // gpt-tiny on the cpu preset, 2 parts, 1 micro-batch in flight. The
  // time-optimal split (0-30, 31-58: the head is expensive) is not the
  // memory-optimal one, so a cap at the smallest possible peak must move the
  // cut and keep every part under it.
  const ModelSpec spec = parse_model_spec("gpt-tiny");
  const auto units = expand_units(spec);
  const auto times = unit_times(units, device_preset("cpu", 4));
  const int inflight = 1;
  const int parts = 2;
  const auto free = make_partition("balanced", units, times, parts);
  int64_t free_worst = 0;
  for (const UnitRange& r : free)
    free_worst = std::max(free_worst, part_memory_bytes(units, r, inflight));
  // The smallest possible worst-part memory, by brute force over all cuts.
  const int n = static_cast<int>(units.size());
  int64_t min_peak = std::numeric_limits<int64_t>::max();
  for (int cut = 1; cut < n; ++cut) {
    min_peak = std::min(min_peak, std::max(part_memory_bytes(units, {0, cut}, inflight),
                                           part_memory_bytes(units, {cut, n}, inflight)));
  }
  ASSERT_LT(min_peak, free_worst)
      << "the test needs a time-optimal split that is not memory-optimal";
  PartitionOptions opt;
  opt.inflight = inflight;
  opt.memory_cap_bytes = min_peak;
  const auto capped = make_partition("balanced", units, times, parts, opt);
  EXPECT_NE(capped, free);
  for (const UnitRange& r : capped) EXPECT_LE(part_memory_bytes(units, r, inflight), min_peak);
  // Its bottleneck is the best among the splits that fit: no worse than any
  // fitting split, and no better than the unconstrained optimum.
  double capped_cost = 0;
  double free_cost = 0;
  for (const UnitRange& r : capped)
    capped_cost = std::max(capped_cost, part_cost(units, times, r, {}));
  for (const UnitRange& r : free) free_cost = std::max(free_cost, part_cost(units, times, r, {}));
  EXPECT_GE(capped_cost, free_cost);
  double best_fitting = std::numeric_limits<double>::infinity();
  for (int cut = 1; cut < n; ++cut) {
    const UnitRange a{0, cut};
    const UnitRange b{cut, n};
    if (part_memory_bytes(units, a, inflight) <= min_peak &&
        part_memory_bytes(units, b, inflight) <= min_peak) {
      best_fitting = std::min(
          best_fitting, std::max(part_cost(units, times, a, {}), part_cost(units, times, b, {})));
    }
  }
  EXPECT_EQ(capped_cost, best_fitting);

  opt.memory_cap_bytes = min_peak - 1;  // nothing fits
  try {
    make_partition("balanced", units, times, parts, opt);
    ADD_FAILURE() << "expected a UsageError";
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("memory cap of " + std::to_string(min_peak - 1) + " bytes"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("the smallest possible peak is " + std::to_string(min_peak) + " bytes"),
              std::string::npos)
        << msg;
  }
}

TEST(Balanced, LargeModelManyPartsIsOptimalAgainstTheOtherPartitions) {
  // gpt-7b: 227 units; 64 parts (the size the issue names).
  const ModelSpec spec = parse_model_spec("gpt-7b");
  const auto units = expand_units(spec);
  ASSERT_EQ(units.size(), 227U);
  const DeviceSpec dev = device_preset("h100", 2);
  const auto times = unit_times(units, dev);
  PartitionOptions opt;
  opt.link = dev.link();
  for (const int parts : {4, 32, 64}) {
    const auto best = make_partition("balanced", units, times, parts, opt);
    ASSERT_EQ(best.size(), static_cast<size_t>(parts));
    double b = 0;
    for (const UnitRange& r : best) b = std::max(b, part_cost(units, times, r, opt.link));
    double o = 0;
    for (const UnitRange& r : make_partition("operator", units, times, parts, opt)) {
      o = std::max(o, part_cost(units, times, r, opt.link));
    }
    EXPECT_LE(b, o * (1 + 1e-12)) << parts;
    if (parts <= 32) {
      double l = 0;
      for (const UnitRange& r : make_partition("layer", units, times, parts, opt)) {
        l = std::max(l, part_cost(units, times, r, opt.link));
      }
      EXPECT_LE(b, l * (1 + 1e-12)) << parts;
    }
  }
}

// The O(parts * n^2) dynamic programs `balanced` used before its search
// (kept as the oracle): min over splits of the largest part cost, then among
// the splits meeting it the smallest sum of squared costs, the earliest cut
// winning ties. `cost(i, j)` returns infinity for a part over the cap.
template <typename Cost>
std::vector<UnitRange> reference_split(int n, int parts, const Cost& cost) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const auto stride = static_cast<size_t>(n + 1);
  auto run = [&](auto value_of, std::vector<int>& arg) {
    std::vector<double> dp(static_cast<size_t>(parts + 1) * stride, kInf);
    arg.assign(dp.size(), -1);
    dp[0] = 0;
    for (int k = 1; k <= parts; ++k) {
      for (int j = k; j <= n - (parts - k); ++j) {
        double best = kInf;
        for (int i = k - 1; i < j; ++i) {
          const double before = dp[static_cast<size_t>(k - 1) * stride + static_cast<size_t>(i)];
          if (before == kInf) continue;
          const double value = value_of(before, cost(i, j));
          if (value < best) {
            best = value;
            arg[static_cast<size_t>(k) * stride + static_cast<size_t>(j)] = i;
          }
        }
        dp[static_cast<size_t>(k) * stride + static_cast<size_t>(j)] = best;
      }
    }
    return dp[static_cast<size_t>(parts) * stride + static_cast<size_t>(n)];
  };
  std::vector<int> arg;
  const double bound = run([](double b, double c) { return std::max(b, c); }, arg);
  if (bound == kInf) return {};
  run([bound](double b, double c) { return c > bound ? kInf : b + c * c; }, arg);
  std::vector<UnitRange> out(static_cast<size_t>(parts));
  int j = n;
  for (int k = parts; k >= 1; --k) {
    const int i = arg[static_cast<size_t>(k) * stride + static_cast<size_t>(j)];
    out[static_cast<size_t>(k - 1)] = {i, j};
    j = i;
  }
  return out;
}

// The part cost as partition.hpp defines it, in the same floating-point
// steps as `balanced`: prefix sums of the unit totals, then the received
// and the sent tensor's transfer added in that order.
std::vector<UnitRange> reference_balanced(const std::vector<Unit>& units,
                                          const std::vector<UnitTime>& times, int parts,
                                          const PartitionOptions& opt) {
  const size_t n = units.size();
  std::vector<double> t(n + 1, 0);
  for (size_t i = 0; i < n; ++i) t[i + 1] = t[i] + times[i].total();
  auto cost = [&](int i, int j) {
    if (opt.memory_cap_bytes > 0 &&
        part_memory_bytes(units, {i, j}, opt.inflight) > opt.memory_cap_bytes) {
      return std::numeric_limits<double>::infinity();
    }
    double c = t[static_cast<size_t>(j)] - t[static_cast<size_t>(i)];
    if (i > 0) c += opt.link.transfer_time(units[static_cast<size_t>(i - 1)].boundary_bytes);
    if (j < static_cast<int>(n)) {
      c += opt.link.transfer_time(units[static_cast<size_t>(j - 1)].boundary_bytes);
    }
    return c;
  };
  return reference_split(static_cast<int>(n), parts, cost);
}

// The search returns exactly the old dynamic program's split: random real
// costs (rounding decides near-ties), small integer costs (many exact ties,
// where the earliest cut must win), transfers, memory caps, infeasible caps.
TEST(Balanced, EqualsTheQuadraticDynamicProgram) {
  std::mt19937 rng(20261201);
  int infeasible = 0;
  int tied = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    const int n = std::uniform_int_distribution<int>(1, 48)(rng);
    const int parts = std::uniform_int_distribution<int>(1, std::min(n, 12))(rng);
    const bool integers = trial % 2 == 0;
    std::vector<double> c;
    std::vector<int64_t> b, p, a;
    for (int i = 0; i < n; ++i) {
      c.push_back(integers ? std::uniform_int_distribution<int>(0, 4)(rng)
                           : std::uniform_real_distribution<double>(0, 1e-3)(rng));
      b.push_back(std::uniform_int_distribution<int64_t>(0, 1 << 20)(rng));
      p.push_back(std::uniform_int_distribution<int64_t>(0, 100)(rng));
      a.push_back(std::uniform_int_distribution<int64_t>(0, 100)(rng));
    }
    const Synthetic s = synthetic(c, b, p, a);
    PartitionOptions opt;
    if (trial % 3 != 0) {
      opt.link.latency = integers ? trial % 2 : 1e-5;
      opt.link.bandwidth = integers ? (trial % 5 == 0 ? 1 << 20 : 0) : 1e9 * (1 + trial % 7);
    }
    opt.inflight = 1 + trial % 4;
    opt.memory_cap_bytes = trial % 4 == 1 ? 0 : std::uniform_int_distribution<int>(50, 900)(rng);
    const std::vector<UnitRange> want = reference_balanced(s.units, s.times, parts, opt);
    if (want.empty()) {
      ++infeasible;
      EXPECT_THROW(make_partition("balanced", s.units, s.times, parts, opt), UsageError);
      continue;
    }
    if (integers) ++tied;
    EXPECT_EQ(make_partition("balanced", s.units, s.times, parts, opt), want)
        << "trial " << trial << " n " << n << " parts " << parts;
  }
  EXPECT_GT(infeasible, 100);
  EXPECT_GT(tied, 300);
}

TEST(Balanced, EqualsTheQuadraticDynamicProgramOnEveryPreset) {
  std::vector<std::string> models = model_preset_names();
  models.emplace_back("gpt:layers=48,hidden=128,heads=4,seq=64,vocab=512,mbs=2");
  for (const std::string& name : models) {
    const auto units = expand_units(parse_model_spec(name));
    for (const std::string device : {"cpu", "a100", "h100"}) {
      const DeviceSpec dev = device_preset(device, 2);
      const auto times = unit_times(units, dev);
      PartitionOptions opt;
      opt.link = dev.link();
      for (const int parts : {1, 2, 3, 4, 5, 6, 8, 12, 16, 32, 64}) {
        if (parts > static_cast<int>(units.size())) continue;
        EXPECT_EQ(make_partition("balanced", units, times, parts, opt),
                  reference_balanced(units, times, parts, opt))
            << name << " on " << device << " into " << parts;
      }
    }
  }
}

TEST(Layer, EqualLayerCounts) {
  const auto units = expand_units(parse_model_spec("gpt-tiny"));  // 8 layers, 59 units
  const std::vector<UnitTime> times(units.size(), UnitTime{1, 1, 1});
  // Layer l starts at unit 1 + 7l; embedding goes first, final_norm + head last.
  EXPECT_EQ(make_partition("layer", units, times, 4),
            (std::vector<UnitRange>{{0, 15}, {15, 29}, {29, 43}, {43, 59}}));
  EXPECT_EQ(make_partition("layer", units, times, 1), (std::vector<UnitRange>{{0, 59}}));
  // 8 layers into 3: the first two parts take the extra layers (3, 3, 2).
  EXPECT_EQ(make_partition("layer", units, times, 3),
            (std::vector<UnitRange>{{0, 22}, {22, 43}, {43, 59}}));
  const auto eight = make_partition("layer", units, times, 8);
  for (size_t k = 0; k < eight.size(); ++k) {
    int layers = 0;
    for (int i = eight[k].begin; i < eight[k].end; ++i) {
      layers += units[static_cast<size_t>(i)].kind == UnitKind::kLayerNorm1 ? 1 : 0;
    }
    EXPECT_EQ(layers, 1) << k;
  }
  try {
    make_partition("layer", units, times, 16);
    ADD_FAILURE() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--partition layer: 16 parts but the model has 8 layers");
  }
}

// What a search over part counts asks instead of catching make_partition's
// UsageError: the same reason, or nullopt when the cut can be made.
TEST(PartitionProblem, NamesWhatMakePartitionRefuses) {
  const auto units = expand_units(parse_model_spec("gpt-tiny"));  // 8 layers, 59 units
  const std::vector<UnitTime> times(units.size(), UnitTime{1, 1, 1});
  const std::string manual = "manual:0-29,30-58";
  for (const auto& [name, parts] : {std::pair<std::string, int>{"layer", 16},
                                    {"layer", 8},
                                    {"operator", 60},
                                    {"operator", 0},
                                    {"balanced", 59},
                                    {"nope", 2},
                                    {manual, 3},
                                    {manual, 2}}) {
    const std::optional<std::string> why = partition_problem(name, units, parts);
    try {
      (void)make_partition(name, units, times, parts);
      EXPECT_FALSE(why.has_value()) << name << " into " << parts << ": " << *why;
    } catch (const UsageError& e) {
      EXPECT_EQ(why.value_or(""), e.what()) << name << " into " << parts;
    }
  }
  EXPECT_EQ(partition_problem("layer", units, 16).value_or(""),
            "--partition layer: 16 parts but the model has 8 layers");
  EXPECT_EQ(partition_problem(manual, units, 3).value_or(""),
            "--partition manual:0-29,30-58: 2 ranges given but 3 parts are needed");
  // A malformed spec is the user's error whatever the count: thrown, not returned.
  EXPECT_THROW((void)partition_problem("manual:0-9,x", units, 2), UsageError);
}

TEST(Operator, CutsWhereTheRunningCostReachesEachShare) {
  const Synthetic eq = synthetic({1, 1, 1, 1, 1, 1, 1, 1});
  EXPECT_EQ(make_partition("operator", eq.units, eq.times, 4),
            (std::vector<UnitRange>{{0, 2}, {2, 4}, {4, 6}, {6, 8}}));
  // Total 20, shares 10: running 1, 2, 12 -> cut after unit 2; then the rest.
  const Synthetic s = synthetic({1, 1, 10, 4, 4});
  EXPECT_EQ(make_partition("operator", s.units, s.times, 2),
            (std::vector<UnitRange>{{0, 3}, {3, 5}}));
  // A heavy first unit passes several shares at once; every part stays non-empty.
  const Synthetic heavy = synthetic({100, 1, 1, 1});
  EXPECT_EQ(make_partition("operator", heavy.units, heavy.times, 4),
            (std::vector<UnitRange>{{0, 1}, {1, 2}, {2, 3}, {3, 4}}));
  // Greedy is not optimal: total 14, share 7 is passed by unit 1, so
  // {6, 6 | 1, 1} has bottleneck 12; balanced finds {6 | 6, 1, 1} = 8.
  const Synthetic g = synthetic({6, 6, 1, 1});
  EXPECT_EQ(make_partition("operator", g.units, g.times, 2),
            (std::vector<UnitRange>{{0, 2}, {2, 4}}));
  EXPECT_EQ(bottleneck(g, make_partition("balanced", g.units, g.times, 2), {}), 8);
}

void expect_partition_error(const std::string& name, int parts, const std::string& needle) {
  const Synthetic s = synthetic(std::vector<double>(10, 1.0));
  try {
    make_partition(name, s.units, s.times, parts);
    ADD_FAILURE() << "no error for " << name;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message '" << e.what() << "' lacks '" << needle << "'";
  }
}

TEST(Manual, RangesAndRoundTrip) {
  const Synthetic s = synthetic(std::vector<double>(10, 1.0));
  const auto r = make_partition("manual:0-2,3-3,4-9", s.units, s.times, 3);
  EXPECT_EQ(r, (std::vector<UnitRange>{{0, 3}, {3, 4}, {4, 10}}));
  EXPECT_EQ(format_partition(r), "0-2,3-3,4-9");
  EXPECT_EQ(make_partition("manual:" + format_partition(r), s.units, s.times, 3), r);
  // A single index is a one-unit range.
  EXPECT_EQ(make_partition("manual:0-4,5,6-9", s.units, s.times, 3),
            (std::vector<UnitRange>{{0, 5}, {5, 6}, {6, 10}}));
}

TEST(Manual, ErrorsNameTheBadRange) {
  expect_partition_error("manual:0-4,6-9", 2, "range '6-9' starts at unit 6 but must start at 5");
  expect_partition_error("manual:0-4,4-9", 2, "range '4-9' starts at unit 4 but must start at 5");
  expect_partition_error("manual:1-9", 1, "range '1-9' starts at unit 1 but must start at 0");
  expect_partition_error("manual:0-4,5-12", 2, "range '5-12' goes past the last unit 9");
  expect_partition_error("manual:0-4,5-8", 2,
                         "the ranges end at unit 8 but the model has units 0-9");
  expect_partition_error("manual:0-4,5-9", 3, "2 ranges given but 3 parts are needed");
  expect_partition_error("manual:0-4,x-9", 2, "range 'x-9': expected FIRST-LAST");
  expect_partition_error("manual:0-4,,5-9", 2, "range '': expected FIRST-LAST");
  expect_partition_error("manual:4-0", 1, "range '4-0' ends before it starts");
  expect_partition_error("manual:", 1, "expected unit ranges");
}

TEST(Partition, CommonErrors) {
  expect_partition_error("operator", 11,
                         "--partition operator: 11 parts but the model has 10 units");
  expect_partition_error("balanced", 0, "--partition balanced: need at least 1 part");
  expect_partition_error(
      "zigzag", 2,
      "unknown partition 'zigzag' (partitions: layer, operator, balanced, manual:<ranges>)");
  EXPECT_EQ(partition_list().size(), 4U);
}

}  // namespace
}  // namespace ppb
