// The oneDNN engine's network (dnnl_network.cc: building, binding, forward and backward;
// dnnl_layers.cc: each layer kind's primitives). Only for those two files.
#ifndef PSBENCH_WORKER_TRAINER_DNNL_INTERNAL_H_
#define PSBENCH_WORKER_TRAINER_DNNL_INTERNAL_H_

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "dnnl.hpp"
#include "worker/trainer/model.h"
#include "worker/trainer/network.h"

namespace psbench::trainer::dnnl_engine {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;
using Clock = std::chrono::steady_clock;

struct Step {
  dnnl::primitive primitive;
  std::unordered_map<int, memory> args;
  // For backward-data steps: the argument their input gradient goes to (DIFF_SRC, or TO for
  // the reorders that slice concatenations and copy residual gradients).
  int output_arg = DNNL_ARG_DIFF_SRC;
  int input = 0;  // and which of the layer's inputs that gradient belongs to
};

// One activation tensor (a layer's output) and its gradient.
struct Tensor {
  memory::desc md;
  memory value;
  memory diff;
  // Gradient contributions of a second, third... consumer land here, then are added.
  memory diff_scratch;
  int consumers = 0;
  bool diff_written = false;
};

struct Node {
  std::vector<Step> forward;
  // Backward in order; the callback marks where parameter gradients become final.
  std::vector<Step> backward_relu;     // fused ReLU's backward, before the layer's own
  std::vector<Step> backward_weights;  // parameter gradients
  std::vector<Step> backward_data;     // into the inputs' gradients (one per input)
  std::vector<int> param_indices;
  memory weights, bias, diff_weights, diff_bias;  // bound to trainer memory
  memory workspace, mean, variance;
  memory relu_diff;  // gradient before the fused ReLU (pre-activation)
  // Weights in the layout the backward-data primitive wants, when it differs from forward's.
  memory backward_weights_for_data;
  dnnl::reorder::primitive_desc weights_reorder;
  Step weights_to_backward;  // built at Bind, when the weights memory is known
};

// A ReLU fused into the primitive before it, as a post-op.
inline dnnl::primitive_attr FusedReluAttr(bool relu) {
  dnnl::primitive_attr attr;
  if (relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  return attr;
}

inline memory::dims Dims(int n, const Shape& s, bool flat) {
  if (flat) return {n, s.c};
  return {n, s.c, s.h, s.w};
}

// Test-only faults, each a backward pass broken in one way the gradient checks must catch
// (tests/trainer/gradient_test.cc, BrokenEngineTest). Armed by PSBENCH_TEST_ENGINE_FAULT in the
// environment of the process that makes a network (never by a flag), which then says so on
// stderr.
enum class EngineFault {
  kNone,
  kScaledWeightGradient,        // "scaled-weight-gradient": convolution weight gradients x 1.5
  kReluWithoutMask,             // "relu-without-mask": a ReLU passes every gradient back
  kConcatSliceMisplaced,        // "concat-slice-misplaced": input 0's gradient from input 1's slice
  kLostAccumulation,            // "lost-accumulation": a tensor read twice gets one gradient
  kBatchNormScaleShiftSwapped,  // "batch-norm-swapped": scale and shift gradients exchanged
  kMaxPoolAsAverage,            // "max-pool-as-average": max pooling's gradient spread evenly
  kFullyConnectedBiasLost,      // "fc-bias-lost": fully connected bias gradients zero
};
// The fault PSBENCH_TEST_ENGINE_FAULT names (kNone when unset); INVALID_ARGUMENT naming the
// known ones for another value.
absl::StatusOr<EngineFault> TestEngineFault();

class DnnlNetwork final : public Network {
 public:
  DnnlNetwork(const Model& model, int batch, int threads, EngineFault fault = EngineFault::kNone)
      : model_(model), batch_(batch), threads_(threads), fault_(fault),
        engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}

  absl::Status Build();

  const Model& model() const override { return model_; }
  int batch() const override { return batch_; }
  std::string description() const override {
    const dnnl_version_t* v = dnnl_version();
    return absl::StrCat("oneDNN ", v->major, ".", v->minor, ".", v->patch,
                        " (cpu, OpenMP, ", threads_, " threads, ", isa_, ")",
                        fault_ == EngineFault::kNone ? ""
                                                     : ", TEST FAULT ARMED (PSBENCH_TEST_ENGINE_FAULT)");
  }
  const std::vector<ParamInfo>& params() const override { return params_; }
  absl::Status Bind(std::span<float* const> values, std::span<float* const> grads) override;
  void SetBatch(std::span<const float> images, std::span<const int> labels) override;
  double Forward() override;
  void Backward(const std::function<void(int)>& ready) override;
  const std::vector<LayerTime>& layer_times() const override { return times_; }
  std::vector<float> ReadParam(int i) override { return ReadPlain(i, false); }
  void WriteParam(int i, std::span<const float> values) override;
  std::vector<float> ReadGrad(int i) override { return ReadPlain(i, true); }

 private:
  absl::Status BuildLayer(int index);
  void BuildConvolution(int index);
  void BuildBatchNorm(int index);
  void BuildRelu(int index);
  void BuildPool(int index);
  void BuildLrn(int index);
  void BuildFullyConnected(int index);
  void BuildConcat(int index);
  void BuildAdd(int index);
  void BuildLoss(int index);

  // Adds a fused ReLU's backward (from the saved output) ahead of the layer's backward, and
  // returns the memory the layer's backward must read as its output gradient.
  memory FusedReluBackward(int index);
  // Where a backward step writes the gradient of input tensor `t`: its diff, or the scratch
  // when an earlier consumer already wrote there (then AccumulateDiff adds it).
  memory& DiffTarget(int t) { return tensors_[t].diff_written ? tensors_[t].diff_scratch : tensors_[t].diff; }
  void AccumulateDiff(int t);
  // The test faults that act on a layer's parameter gradients once they are computed.
  void BreakWeightGradients(const Layer& layer, const Node& node);
  void AddParam(int layer, const Layer::Param& p, const memory::desc& md);
  memory::desc PlainDesc(int param) const;
  std::vector<float> ReadPlain(int i, bool grad);
  void Run(Step& step) {
    try {
      step.primitive.execute(stream_, step.args);
    } catch (const dnnl::error& e) {
      // A primitive that was built but cannot run is a bug in this engine: say where.
      std::fprintf(stderr, "psbench trainer: oneDNN failed in %s: %s\n", current_layer_.c_str(),
                   e.what());
      std::abort();
    }
  }
  std::string current_layer_;

  Model model_;
  int batch_;
  int threads_;
  EngineFault fault_;
  std::string isa_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::vector<Tensor> tensors_;
  std::vector<Node> nodes_;
  std::vector<ParamInfo> params_;
  std::vector<memory::desc> param_md_;
  std::vector<float*> param_values_, param_grads_;
  std::vector<LayerTime> times_;
  // Loss: logits in plain N x classes (reordered from the classifier's layout if needed).
  std::vector<float> probabilities_;
  std::vector<int> labels_;
  std::vector<Step> logits_to_plain_, plain_to_diff_;
  memory logits_plain_, logits_diff_plain_;
};

}  // namespace psbench::trainer::dnnl_engine

#endif  // PSBENCH_WORKER_TRAINER_DNNL_INTERNAL_H_
