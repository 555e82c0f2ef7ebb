// Standalone timing of one model on one engine, like Caffe's `time` and tf_cnn_benchmarks:
// images/s for forward and for forward+backward after warm-up, and where the time goes,
// layer by layer.
#ifndef PSBENCH_WORKER_TRAINER_TIMING_H_
#define PSBENCH_WORKER_TRAINER_TIMING_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "worker/trainer/network.h"

namespace psbench::trainer {

// Parameter values and gradients in plain host memory, as Network::Bind wants them.
class ParamStorage {
 public:
  explicit ParamStorage(const std::vector<ParamInfo>& params);
  ~ParamStorage();
  ParamStorage(const ParamStorage&) = delete;
  ParamStorage& operator=(const ParamStorage&) = delete;
  const std::vector<float*>& values() const { return values_; }
  const std::vector<float*>& grads() const { return grads_; }

 private:
  std::vector<float*> values_, grads_;
};

struct TimingOptions {
  std::string model;
  std::string engine = "cpu";
  std::string math = "fp32";
  std::string layout = "auto";  // the GPU engine's (ParseLayout)
  int batch = 16;
  int threads = 0;      // 0: the engine's default (all cores)
  int warmup = 2;       // iterations before measuring
  int iterations = 10;  // measured iterations of each pass
  bool forward_only = false;
  uint64_t seed = 1;
  double peak_gflops = 0;  // 0: estimate from the CPU (see CpuPeakGflops)
  std::string trace_path;  // write the last backward pass's gradient trace here
};

// Peak FP32 GFLOP/s of `threads` cores of this CPU: cores x clock x FLOPs per cycle from its
// vector units (AVX-512/AVX2 FMA), with how it was estimated.
PeakEstimate CpuPeakGflops(int threads);
// Peak FP32 GFLOP/s as measured: `threads` threads running independent vector FMA chains
// (AVX-512 or AVX2), at the clocks the cores reach under that load. 0 without AVX2/FMA.
PeakEstimate MeasuredPeakGflops(int threads);

// mean, median, min and max of per-step seconds, as every trainer record reports them.
struct SecondsSummary {
  double mean_s, median_s, min_s, max_s;
};
SecondsSummary Summarize(std::vector<double> seconds);
nlohmann::json SecondsStats(const std::vector<double>& seconds);

// Runs the timing; the JSON holds the options, the engine, model facts (parameters, FLOPs),
// images/s per pass with per-iteration statistics, the share of peak, and per-layer times.
// With `trace_failure`, a --write-trace that cannot be written is put there (the result is
// still returned, without its "trace"); without, it is the error.
absl::StatusOr<nlohmann::json> RunTiming(const TimingOptions& options, absl::Status* trace_failure = nullptr);

// The human-readable report of a RunTiming result (summary and per-layer table).
std::string FormatTiming(const nlohmann::json& result);

}  // namespace psbench::trainer

#endif  // PSBENCH_WORKER_TRAINER_TIMING_H_
