#include "worker/trainer/timing.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "fmt/format.h"
#include "inputs/input_file.h"
#include "worker/trainer/init.h"
#include "worker/trainer/trace.h"

namespace psbench::trainer {
namespace {

using Clock = std::chrono::steady_clock;

float* AllocateFloats(size_t bytes) {
  bytes = std::max<size_t>((bytes + 63) / 64 * 64, 64);
  auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  std::fill_n(p, bytes / sizeof(float), 0.f);
  return p;
}

}  // namespace

SecondsSummary Summarize(std::vector<double> seconds) {
  std::sort(seconds.begin(), seconds.end());
  return {std::accumulate(seconds.begin(), seconds.end(), 0.0) / seconds.size(), seconds[seconds.size() / 2],
          seconds.front(), seconds.back()};
}

nlohmann::json SecondsStats(const std::vector<double>& seconds) {
  const SecondsSummary s = Summarize(seconds);
  return {{"mean_s", s.mean_s}, {"median_s", s.median_s}, {"min_s", s.min_s}, {"max_s", s.max_s}};
}

ParamStorage::ParamStorage(const std::vector<ParamInfo>& params) {
  for (const ParamInfo& p : params) {
    values_.push_back(AllocateFloats(p.bytes));
    grads_.push_back(AllocateFloats(p.bytes));
  }
}

ParamStorage::~ParamStorage() {
  for (float* p : values_) std::free(p);
  for (float* p : grads_) std::free(p);
}

namespace {

// Twelve independent FMA chains, enough to keep two pipes of 4-cycle latency busy. Written
// out per ISA so each compiles to nothing but vfmadd in registers.
#define PSB_FMA_CHAINS(V, SET, FMA, FIRST)                                              \
  V a0 = SET(1.0f), a1 = SET(1.1f), a2 = SET(1.2f), a3 = SET(1.3f), a4 = SET(1.4f);   \
  V a5 = SET(1.5f), a6 = SET(1.6f), a7 = SET(1.7f), a8 = SET(1.8f), a9 = SET(1.9f);   \
  V a10 = SET(2.0f), a11 = SET(2.1f);                                                   \
  const V m = SET(0.999999f), c = SET(1e-6f);                                           \
  for (int64_t i = 0; i < n; ++i) {                                                     \
    a0 = FMA(a0, m, c); a1 = FMA(a1, m, c); a2 = FMA(a2, m, c); a3 = FMA(a3, m, c);     \
    a4 = FMA(a4, m, c); a5 = FMA(a5, m, c); a6 = FMA(a6, m, c); a7 = FMA(a7, m, c);     \
    a8 = FMA(a8, m, c); a9 = FMA(a9, m, c); a10 = FMA(a10, m, c); a11 = FMA(a11, m, c); \
  }                                                                                     \
  return FIRST(a0) + FIRST(a1) + FIRST(a2) + FIRST(a3) + FIRST(a4) + FIRST(a5) +        \
         FIRST(a6) + FIRST(a7) + FIRST(a8) + FIRST(a9) + FIRST(a10) + FIRST(a11);

__attribute__((target("avx512f"))) double Chains512(int64_t n) {
  PSB_FMA_CHAINS(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_cvtss_f32)
}
__attribute__((target("avx2,fma"))) double Chains256(int64_t n) {
  PSB_FMA_CHAINS(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_cvtss_f32)
}
#undef PSB_FMA_CHAINS

}  // namespace

PeakEstimate MeasuredPeakGflops(int threads) {
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  PeakEstimate peak;
  if (!avx512 && !avx2) return peak;
  const int lanes = avx512 ? 16 : 8;
  const int64_t iterations = 100'000'000;
  double sink = 0;
  const auto start = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  sink += avx512 ? Chains512(iterations) : Chains256(iterations);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  peak.gflops = threads * double(iterations) * 12 * lanes * 2 / seconds * 1e-9 + 0 * sink;
  peak.basis = fmt::format("measured: {} threads running {}-bit FMA chains for {:.2f} s",
                           threads, lanes * 32, seconds);
  return peak;
}

PeakEstimate CpuPeakGflops(int threads) {
  std::ifstream in("/proc/cpuinfo");
  std::string line, vendor, flags;
  double mhz = 0;
  int family = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> kv = absl::StrSplit(line, absl::MaxSplits(':', 1));
    if (kv.size() != 2) continue;
    std::string key(absl::StripAsciiWhitespace(kv[0]));
    std::string value(absl::StripAsciiWhitespace(kv[1]));
    if (key == "vendor_id" && vendor.empty()) vendor = value;
    if (key == "flags" && flags.empty()) flags = " " + value + " ";
    if (key == "cpu MHz" && mhz == 0) (void)absl::SimpleAtod(value, &mhz);
    if (key == "cpu family" && family == 0) (void)absl::SimpleAtoi(value, &family);
  }
  // FP32 FLOPs per cycle per core: two FMA pipes x lanes x 2. AMD's AVX-512 (Zen 4) runs on
  // 256-bit pipes, so it peaks where AVX2 does.
  int per_cycle = 8;
  std::string isa = "SSE";
  const bool amd = vendor == "AuthenticAMD";
  const bool avx512 = absl::StrContains(flags, " avx512f ");
  if (avx512 && (!amd || family >= 26)) {
    per_cycle = 64;
    isa = amd ? "AVX-512, 2 x 512-bit FMA (AMD Zen 5)" : "AVX-512, 2 FMA units";
  } else if (absl::StrContains(flags, " fma ")) {
    per_cycle = 32;
    isa = avx512 ? "AVX-512 on 256-bit FMA pipes (AMD Zen 4)" : "AVX2, 2 FMA units";
  }
  PeakEstimate peak;
  peak.gflops = threads * mhz * 1e-3 * per_cycle;
  peak.basis = fmt::format("{} cores x {:.0f} MHz (nominal, /proc/cpuinfo) x {} FP32 FLOP/cycle ({})",
                           threads, mhz, per_cycle, isa);
  return peak;
}

absl::StatusOr<nlohmann::json> RunTiming(const TimingOptions& options, absl::Status* trace_failure) {
  if (options.batch < 1) return absl::InvalidArgumentError("--batch must be >= 1");
  if (options.iterations < 1) return absl::InvalidArgumentError("--iterations must be >= 1");
  if (options.warmup < 0) return absl::InvalidArgumentError("--warmup must be >= 0");
  if (!options.trace_path.empty()) {
    if (options.forward_only) return absl::InvalidArgumentError("--write-trace needs the backward pass (not --forward-only)");
    if (absl::Status s = CheckOutputWritable("--write-trace", options.trace_path); !s.ok()) return s;
  }
  absl::StatusOr<Model> model = BuildModel(options.model);
  if (!model.ok()) return model.status();
  absl::StatusOr<Math> math = ParseMath(options.math);
  if (!math.ok()) return math.status();
  absl::StatusOr<Layout> layout = ParseLayout(options.layout);
  if (!layout.ok()) return layout.status();
  absl::StatusOr<std::unique_ptr<Network>> made =
      MakeNetwork(options.engine, *model, options.batch, options.threads, *math, *layout);
  if (!made.ok()) return made.status();
  ParamStorage storage((*made)->params());
  // Declared after the memory it is bound to, so that it goes first (it unpins that memory).
  const std::unique_ptr<Network> owned = std::move(*made);
  Network& net = *owned;
  if (absl::Status s = net.Bind(storage.values(), storage.grads()); !s.ok()) return s;
  net.InitParams(options.seed);

  // One fixed synthetic batch, as tf_cnn_benchmarks' synthetic input: no data loading cost.
  const Shape in = model->layers[0].out;
  std::vector<float> images(size_t(options.batch) * in.elements());
  std::vector<int> labels(options.batch);
  SyntheticImages(in, model->num_classes, options.seed).Fill(0, options.batch, images, labels);
  net.SetBatch(images, labels);

  const size_t layers = model->layers.size();
  auto no_ready = [](int) {};
  for (int i = 0; i < options.warmup; ++i) {
    net.Forward();
    if (!options.forward_only) net.Backward(no_ready);
  }
  std::vector<LayerTime> forward_layers(layers), train_layers(layers);
  std::vector<double> forward_s, train_s, d2h_s, exposed_s;
  for (int i = 0; i < options.iterations; ++i) {
    auto start = Clock::now();
    net.Forward();
    forward_s.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    for (size_t l = 0; l < layers; ++l) forward_layers[l].forward_s += net.layer_times()[l].forward_s;
  }
  double last_loss = 0;
  GradientTrace trace(net);
  auto ready = [&trace](int p) { trace.Ready(p); };
  if (!options.forward_only) {
    for (int i = 0; i < options.iterations; ++i) {
      auto start = Clock::now();
      trace.StepStart();
      last_loss = net.Forward();
      net.Backward(ready);
      trace.StepEnd();
      train_s.push_back(std::chrono::duration<double>(Clock::now() - start).count());
      d2h_s.push_back(net.staging().device_to_host_s);
      exposed_s.push_back(net.staging().exposed_s);
      for (size_t l = 0; l < layers; ++l) {
        train_layers[l].forward_s += net.layer_times()[l].forward_s;
        train_layers[l].backward_s += net.layer_times()[l].backward_s;
      }
    }
  }

  const int threads = omp_get_max_threads();
  // A GPU's peak comes from its properties. A CPU's share of peak is taken against what the
  // cores were measured to do right now (clocks boost well past the nominal MHz
  // /proc/cpuinfo shows); the nominal estimate is recorded.
  const std::optional<PeakEstimate> device = net.DevicePeak();
  PeakEstimate nominal, peak;
  if (device) {
    nominal = peak = *device;
  } else if (options.engine == "cpu") {
    nominal = CpuPeakGflops(threads);
    peak = MeasuredPeakGflops(threads);
    if (peak.gflops <= 0) peak = nominal;
  } else {
    nominal.basis = peak.basis = "not known for this device and math (no share of peak)";
  }
  std::string peak_basis = peak.basis;
  if (options.peak_gflops > 0) {
    peak.gflops = options.peak_gflops;
    peak_basis = "given with --peak-gflops";
  }

  const double flops = model->forward_flops_per_image();
  nlohmann::json result;
  result["kind"] = "train_timing";
  result["model"] = model->name;
  result["engine"] = options.engine;
  result["engine_description"] = net.description();
  result["math"] = options.math;
  if (!net.layout().empty()) result["layout"] = net.layout();
  result["batch"] = options.batch;
  result["threads"] = threads;
  result["warmup_iterations"] = options.warmup;
  result["seed"] = options.seed;
  result["input"] = {in.c, in.h, in.w};
  result["classes"] = model->num_classes;
  result["parameters"] = model->parameter_count();
  result["forward_gflop_per_image"] = flops * 1e-9;
  // Backward computes the data and the weight gradients: twice the forward work.
  result["train_gflop_per_image"] = 3 * flops * 1e-9;
  result["peak_gflops"] = peak.gflops;
  result["peak_basis"] = peak_basis;
  result["nominal_peak_gflops"] = nominal.gflops;
  result["nominal_peak_basis"] = nominal.basis;
  auto pass = [&](const char* name, const std::vector<double>& seconds, double gflop_per_image) {
    nlohmann::json stats = SecondsStats(seconds);
    stats["iterations"] = seconds.size();
    stats["images_per_s"] = options.batch / stats["mean_s"].get<double>();
    double gflops = stats["images_per_s"].get<double>() * gflop_per_image;
    stats["gflops"] = gflops;
    if (peak.gflops > 0) stats["fraction_of_peak"] = gflops / peak.gflops;
    result[name] = stats;
  };
  pass("forward", forward_s, flops * 1e-9);
  if (!options.forward_only) {
    pass("forward_backward", train_s, 3 * flops * 1e-9);
    result["loss"] = last_loss;
    // An engine that computes outside host memory copies every gradient out during the
    // backward pass (a worker sends from host memory): the copies, and what of them the pass
    // did not hide, are inside forward_backward's time.
    if (options.engine != "cpu") {
      result["gradients_to_host"] = SecondsStats(d2h_s);
      result["gradients_to_host_exposed"] = SecondsStats(exposed_s);
    }
  }
  nlohmann::json table = nlohmann::json::array();
  const std::vector<LayerTime>& per_layer = options.forward_only ? forward_layers : train_layers;
  for (size_t l = 1; l < layers; ++l) {
    const Layer& layer = model->layers[l];
    table.push_back({{"layer", layer.name},
                     {"kind", LayerKindName(layer.kind)},
                     {"output", {layer.out.c, layer.out.h, layer.out.w}},
                     {"forward_ms", 1e3 * per_layer[l].forward_s / options.iterations},
                     {"backward_ms", 1e3 * per_layer[l].backward_s / options.iterations},
                     {"gflop_per_image", layer.forward_flops * 1e-9}});
  }
  result["layers"] = table;
  if (!options.trace_path.empty()) {
    // A trace that cannot be written is said after the record is saved, not instead of it.
    if (absl::Status s = trace.Write(options.trace_path); !s.ok()) {
      if (trace_failure == nullptr) return s;
      *trace_failure = s;
    } else {
      result["trace"] = options.trace_path;
    }
  }
  return result;
}

std::string FormatTiming(const nlohmann::json& r) {
  std::string out = fmt::format(
      "{} batch {} on {}: {:.2f} M parameters, {:.2f} GFLOP forward per image\n",
      r["model"].get<std::string>(), r["batch"].get<int>(),
      r["engine_description"].get<std::string>(), r["parameters"].get<int64_t>() * 1e-6,
      r["forward_gflop_per_image"].get<double>());
  auto line = [&](const char* label, const nlohmann::json& p) {
    const std::string share = p.contains("fraction_of_peak")
                                  ? fmt::format(" = {:4.1f}% of peak", 100 * p["fraction_of_peak"].get<double>())
                                  : "";
    out += fmt::format("  {:<17} {:9.2f} images/s  {:8.1f} ms/iter (median {:.1f}, min {:.1f}, max {:.1f})  {:7.1f} GFLOP/s{}\n",
                       label, p["images_per_s"].get<double>(), 1e3 * p["mean_s"].get<double>(),
                       1e3 * p["median_s"].get<double>(), 1e3 * p["min_s"].get<double>(),
                       1e3 * p["max_s"].get<double>(), p["gflops"].get<double>(), share);
  };
  line("forward", r["forward"]);
  if (r.contains("forward_backward")) line("forward+backward", r["forward_backward"]);
  if (r.contains("gradients_to_host")) {
    out += fmt::format("  gradients to host {:.1f} ms per step (copies overlapping the backward pass), "
                       "{:.1f} ms of it after the pass\n",
                       1e3 * r["gradients_to_host"]["mean_s"].get<double>(),
                       1e3 * r["gradients_to_host_exposed"]["mean_s"].get<double>());
  }
  out += fmt::format("  peak {:.0f} GFLOP/s: {} (nominal {:.0f}: {})\n",
                     r["peak_gflops"].get<double>(), r["peak_basis"].get<std::string>(),
                     r["nominal_peak_gflops"].get<double>(), r["nominal_peak_basis"].get<std::string>());
  out += fmt::format("\n  {:<28} {:<12} {:>16} {:>12} {:>12} {:>9}\n", "layer", "kind", "output",
                     "forward ms", "backward ms", "GFLOP/img");
  double total_f = 0, total_b = 0;
  for (const auto& l : r["layers"]) {
    const auto& o = l["output"];
    total_f += l["forward_ms"].get<double>();
    total_b += l["backward_ms"].get<double>();
    out += fmt::format("  {:<28} {:<12} {:>16} {:12.2f} {:12.2f} {:9.3f}\n",
                       l["layer"].get<std::string>(), l["kind"].get<std::string>(),
                       fmt::format("{}x{}x{}", o[0].get<int>(), o[1].get<int>(), o[2].get<int>()),
                       l["forward_ms"].get<double>(), l["backward_ms"].get<double>(),
                       l["gflop_per_image"].get<double>());
  }
  out += fmt::format("  {:<28} {:<12} {:>16} {:12.2f} {:12.2f}\n", "total", "", "", total_f, total_b);
  return out;
}

}  // namespace psbench::trainer
