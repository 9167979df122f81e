// `pipebench health`: the GPUs' own speed and state, measured without
// pipebench's pipeline code, so that the nightly gate can tell a slower GPU
// from slower code (docs/cli.md, "health").
//
//   pipebench health --out DIR [--repeats 5] [--iters 20] [--model gpt-small]
//                    [--copy-bytes 256MiB] [--interval-ms 100]
//
// One process, every visible GPU in turn, each figure measured --repeats
// times (its samples, for the gate's rank statistics), the figures of one
// repeat taken together so that a drift spreads over all of them:
//  * gemm_bf16_tflops, gemm_fp32_tflops: the cuda backend's GEMMs of one
//    layer and the head of --model per micro-batch, timed as ppb_gemm_bench
//    times its backend column (one function, gpu_probe.hpp);
//  * copy_d2d_gbps, copy_h2d_gbps, copy_d2h_gbps: --copy-bytes within the
//    GPU, and from and to pinned host memory;
//  * peer_gbps_to_gpu<N>: to every other GPU N, where there are two or more.
// Meanwhile NVML (where the driver has it) samples the GPU being measured:
// clocks, power, temperature, throttle reasons and ECC counts each --interval-ms;
// without NVML one line says so and the probe goes on. Writes
// DIR/health.json (pipebench.health/1) and prints a table. Exit 0; 2 on bad
// flags or where no GPU is usable (one line saying why).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "cli.hpp"
#include "ppb/exec/cuda_device.hpp"
#include "ppb/exec/gpu_probe.hpp"
#include "ppb/exec/nvml.hpp"
#include "ppb/pipeline/health.hpp"
#include "ppb/reports/stats.hpp"
#include "run/environment.hpp"
#include "run/out_dir.hpp"
#include "run/run_options.hpp"

namespace ppb::cli {
namespace {

struct HealthOptions {
  std::string out;
  int repeats = 5;
  int iters = 20;
  std::string model = "gpt-small";
  std::string copy_bytes = "256MiB";
  int interval_ms = 100;
};

// The GPUs this process sees, with their names and bus ids.
std::vector<HealthGpu> visible_gpus() {
  std::vector<HealthGpu> gpus;
  const int n = cuda::device_count();
  for (int d = 0; d < n; ++d) {
    const cuda::DeviceFacts f = cuda::device_facts(d);
    gpus.push_back({.device = d, .name = f.name, .bus = f.bus, .figures = {}, .gpu_state = {}});
  }
  return gpus;
}

// One repeat of every figure of `gpu`, appended to its samples.
void measure_once(HealthGpu& gpu, const std::vector<HealthGpu>& all, const ModelSpec& spec,
                  const HealthOptions& o, int64_t bytes) {
  const int d = gpu.device;
  gpu.figures["gemm_bf16_tflops"].push_back(cuda::backend_gemm_tflops(d, spec, false, o.iters));
  gpu.figures["gemm_fp32_tflops"].push_back(cuda::backend_gemm_tflops(d, spec, true, o.iters));
  gpu.figures["copy_d2d_gbps"].push_back(
      cuda::copy_gbps(cuda::Copy::kDeviceToDevice, d, -1, bytes, o.iters));
  gpu.figures["copy_h2d_gbps"].push_back(
      cuda::copy_gbps(cuda::Copy::kHostToDevice, d, -1, bytes, o.iters));
  gpu.figures["copy_d2h_gbps"].push_back(
      cuda::copy_gbps(cuda::Copy::kDeviceToHost, d, -1, bytes, o.iters));
  for (const HealthGpu& peer : all) {
    if (peer.device == d) continue;
    gpu.figures["peer_gbps_to_gpu" + std::to_string(peer.device)].push_back(
        cuda::copy_gbps(cuda::Copy::kPeer, d, peer.device, bytes, o.iters));
  }
}

void print_table(const HealthFile& h) {
  std::printf("%-4s %-24s %10s %10s %10s %10s\n", "gpu", "figure", "median", "min", "max", "n");
  for (const HealthGpu& g : h.gpus) {
    for (const auto& [name, samples] : g.figures) {
      const reports::Spread s = reports::spread(samples);
      std::printf("%-4d %-24s %10.2f %10.2f %10.2f %10d\n", g.device, name.c_str(), s.median, s.min,
                  s.max, static_cast<int>(samples.size()));
    }
    if (!g.gpu_state) continue;
    std::printf("gpu %d state: %s\n", g.device, gpu_state_text(*g.gpu_state).c_str());
  }
}

void run_health(const HealthOptions& o) {
  const int64_t bytes = parse_bytes(o.copy_bytes, "--copy-bytes");
  if (bytes < 1) throw UsageError("--copy-bytes: expected at least 1 byte");
  const ModelSpec spec = parse_model_spec(o.model);  // its errors name --model
  if (const std::string why = cuda::unusable_reason(); !why.empty())
    throw UsageError("health: no usable GPU: " + why);
  if (const std::string why = run::make_writable_folder(o.out); !why.empty()) throw UsageError(why);
  const OutputPath path(o.out, "health.json");
  check_output_path(path);

  HealthFile h;
  h.config = {.model = o.model, .iters = o.iters, .repeats = o.repeats, .copy_bytes = bytes};
  h.gpus = visible_gpus();
  h.environment = run::host_environment();
  const cuda::DeviceFacts first = cuda::device_facts(0);
  h.environment.cuda = first.runtime;
  h.environment.driver = first.driver;
  for (const HealthGpu& g : h.gpus) h.environment.gpus.push_back(g.name);

  std::string why;
  const std::shared_ptr<const nvml::Library> lib = nvml::Library::open(&why);
  if (!lib) {
    h.gpu_state_note = nvml::unavailable_line(why);
    std::fprintf(stderr, "%s\n", h.gpu_state_note.c_str());
  }
  // Each GPU is sampled while it is measured, not while it idles as the
  // others are: its clocks are those of a GPU at work.
  std::vector<std::vector<GpuSample>> samples(h.gpus.size());
  for (int r = 0; r < o.repeats; ++r) {
    for (size_t i = 0; i < h.gpus.size(); ++i) {
      nvml::Sampler sampler(lib, {h.gpus[i].bus}, std::chrono::milliseconds(o.interval_ms));
      sampler.start();
      measure_once(h.gpus[i], h.gpus, spec, o, bytes);
      const std::vector<std::vector<GpuSample>> taken = sampler.stop();
      if (!taken.empty())
        samples[i].insert(samples[i].end(), taken.front().begin(), taken.front().end());
    }
  }
  if (lib) {
    for (size_t i = 0; i < h.gpus.size(); ++i) {
      GpuState st = summarise_gpu_samples(samples[i]);
      st.gpu = h.gpus[i].name + " (" + h.gpus[i].bus + ")";
      h.gpus[i].gpu_state = st;
    }
  }
  h.date = run::iso8601_utc(static_cast<int64_t>(std::time(nullptr)));
  h.environment.date = h.date;
  write_health_file(path, h);
  std::printf(
      "# pipebench health: %zu GPU(s), %d repeat(s) of each figure, model %s, copies of %s\n",
      h.gpus.size(), o.repeats, o.model.c_str(), format_bytes(bytes).c_str());
  print_table(h);
  std::printf("wrote %s/health.json\n", o.out.c_str());
}

}  // namespace

void register_health(CLI::App& app) {
  auto o = std::make_shared<HealthOptions>();
  CLI::App* cmd = app.add_subcommand(
      "health",
      "The GPUs' own speed and state without pipebench's pipeline code: GEMM TFLOP/s, copy "
      "bandwidths, NVML's clocks, power, temperature, throttling and ECC errors (health.json)");
  cmd->add_option("--out", o->out, "Folder for health.json")
      ->required()
      ->check(non_empty("a path"));
  cmd->add_option("--repeats", o->repeats, "Samples of each figure (default 5)")
      ->check(integer_in(1, 1000));
  cmd->add_option("--iters", o->iters, "Calls per timed round (default 20)")
      ->check(integer_in(1, 100000));
  cmd->add_option("--model", o->model,
                  "Whose GEMMs (one layer and the head per micro-batch) to time (default "
                  "gpt-small, as ppb_gemm_bench)")
      ->check(non_empty("a model"));
  cmd->add_option("--copy-bytes", o->copy_bytes, "Bytes per copy (default 256MiB)")
      ->check(non_empty("a size"));
  cmd->add_option("--interval-ms", o->interval_ms,
                  "NVML sampling period in milliseconds (default 100)")
      ->check(integer_in(10, 60000));
  cmd->callback([o]() { run_health(*o); });
}

}  // namespace ppb::cli
