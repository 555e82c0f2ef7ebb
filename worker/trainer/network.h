// The seam between the trainer and a compute engine (oneDNN on CPU, cuDNN on GPU): a model
// instantiated for one batch size, trained one forward and backward pass at a time. The
// trainer owns parameter and gradient memory (so gradients can be sent to a PS without a
// copy); the engine only reads and writes it.
#ifndef PSBENCH_WORKER_TRAINER_NETWORK_H_
#define PSBENCH_WORKER_TRAINER_NETWORK_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/trainer/model.h"
#include "worker/trainer/numerics.h"

namespace psbench::trainer {

struct ParamInfo {
  std::string name;
  int layer = 0;       // index into Model::layers
  int64_t count = 0;   // logical number of floats
  size_t bytes = 0;    // storage the engine needs (a blocked layout may pad)
};

struct LayerTime {
  double forward_s = 0;
  double backward_s = 0;
};

// A processor's peak GFLOP/s for the arithmetic an engine runs, with how it was obtained.
struct PeakEstimate {
  double gflops = 0;
  std::string basis;
};

// What moving gradients from the engine's memory to the host cost in the last backward pass
// (zero for an engine that computes in host memory). Copying parameters in is ParamsChanged,
// which its caller times.
struct StagingTimes {
  double device_to_host_s = 0;  // gradient copies, summed (they overlap the backward pass)
  double exposed_s = 0;         // of those, after the backward pass's last kernel: on the step
};

class Network {
 public:
  virtual ~Network() = default;

  virtual const Model& model() const = 0;
  virtual int batch() const = 0;
  // e.g. "oneDNN 2.6.3 (cpu, OpenMP, 2 threads, avx512_core)"
  virtual std::string description() const = 0;
  // The device's peak for this engine's arithmetic, where the engine knows it (a GPU from its
  // properties); nullopt: the caller estimates the CPU's.
  virtual std::optional<PeakEstimate> DevicePeak() const { return std::nullopt; }
  virtual StagingTimes staging() const { return {}; }
  // The device layout the engine chose ("nchw", "nhwc"); "" where the engine picks its own
  // per layer (oneDNN).
  virtual std::string layout() const { return ""; }

  // Every trainable parameter, in model order.
  virtual const std::vector<ParamInfo>& params() const = 0;
  // Hands over host memory for parameter values and gradients, params()[i].bytes each,
  // 64-byte aligned, alive as long as the network. Call once, before anything else.
  virtual absl::Status Bind(std::span<float* const> values, std::span<float* const> grads) = 0;
  // Deterministic initial values from `seed`, the same on every engine and batch size
  // (FillInitial in the canonical layout, through WriteParam).
  void InitParams(uint64_t seed);

  // One batch: images batch x C x H x W (NCHW, plain floats), labels batch.
  virtual void SetBatch(std::span<const float> images, std::span<const int> labels) = 0;
  // Runs the forward pass; returns the mean loss over the batch.
  virtual double Forward() = 0;
  // Runs the backward pass after Forward(), writing batch-mean gradients into the bound
  // memory. `ready(i)` runs once per parameter i as soon as its gradient is final, in the
  // order the backward pass produces them (this is what a trace records).
  virtual void Backward(const std::function<void(int)>& ready) = 0;
  // Engines that keep parameters outside host memory copy them in after the bound host
  // values changed (a pull from the PS) / copy gradients out before they are sent.
  virtual void ParamsChanged() {}

  // Time spent per layer (Model::layers order) by the last Forward/Backward.
  virtual const std::vector<LayerTime>& layer_times() const = 0;

  // Whole-tensor access for tests: the parameter in the canonical layout (OIHW, OI, C).
  virtual std::vector<float> ReadParam(int i) = 0;
  virtual void WriteParam(int i, std::span<const float> values) = 0;
  virtual std::vector<float> ReadGrad(int i) = 0;
};

// Engines by name: "cpu" (oneDNN) and, when built with CUDA, "gpu" (cuDNN). The CPU engine
// computes in fp32 only.
std::vector<std::string> EngineNames();
absl::StatusOr<std::unique_ptr<Network>> MakeNetwork(absl::string_view engine,
                                                     const Model& model, int batch,
                                                     int threads, Math math = Math::kFp32,
                                                     Layout layout = Layout::kAuto);

}  // namespace psbench::trainer

#endif  // PSBENCH_WORKER_TRAINER_NETWORK_H_
