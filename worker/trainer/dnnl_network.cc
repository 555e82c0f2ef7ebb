// The CPU engine on oneDNN. Activations stay in the blocked layouts oneDNN's convolutions
// choose (nChw16c and friends) from the first convolution to the classifier, and weights
// live in the layout their primitives prefer, so no reorder runs inside a training step
// except around concatenations of unaligned branches and the loss. Primitives are built
// once and reused every step; ReLUs fuse into the convolution, batch norm or fully
// connected layer before them (their backward runs from the saved output).
#include "worker/trainer/dnnl_network.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dnnl.hpp"
#include "worker/trainer/dnnl_internal.h"
#include "worker/trainer/loss.h"

namespace psbench::trainer {
namespace dnnl_engine {

absl::Status DnnlNetwork::Build() {
  if (batch_ < 1) return absl::InvalidArgumentError("batch must be >= 1");
  tensors_.resize(model_.layers.size());
  nodes_.resize(model_.layers.size());
  times_.assign(model_.layers.size(), {});
  for (const Layer& layer : model_.layers)
    for (int in : layer.inputs) ++tensors_[in].consumers;
  for (size_t i = 0; i < model_.layers.size(); ++i) {
    try {
      if (absl::Status s = BuildLayer(static_cast<int>(i)); !s.ok()) return s;
    } catch (const dnnl::error& e) {
      return absl::InternalError(absl::StrCat(model_.name, " layer ", model_.layers[i].name,
                                              ": oneDNN: ", e.what()));
    }
  }
  const char* isa_names[] = {"any", "sse41", "avx", "avx2", "avx512_core", "avx512_core_vnni",
                             "avx512_core_bf16", "avx512_core_amx"};
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: isa_ = isa_names[1]; break;
    case dnnl::cpu_isa::avx: isa_ = isa_names[2]; break;
    case dnnl::cpu_isa::avx2: isa_ = isa_names[3]; break;
    case dnnl::cpu_isa::avx512_core: isa_ = isa_names[4]; break;
    case dnnl::cpu_isa::avx512_core_vnni: isa_ = isa_names[5]; break;
    case dnnl::cpu_isa::avx512_core_bf16: isa_ = isa_names[6]; break;
    case dnnl::cpu_isa::avx512_core_amx: isa_ = isa_names[7]; break;
    default: isa_ = "other"; break;
  }
  return absl::OkStatus();
}

absl::Status DnnlNetwork::BuildLayer(int index) {
  const Layer& layer = model_.layers[index];
  Tensor& out = tensors_[index];
  switch (layer.kind) {
    case LayerKind::kInput:
      out.md = memory::desc(Dims(batch_, layer.out, false), dt::f32, tag::nchw);
      out.value = memory(out.md, engine_);
      return absl::OkStatus();
    case LayerKind::kConvolution: BuildConvolution(index); break;
    case LayerKind::kBatchNorm: BuildBatchNorm(index); break;
    case LayerKind::kRelu: BuildRelu(index); break;
    case LayerKind::kMaxPool:
    case LayerKind::kAvgPool: BuildPool(index); break;
    case LayerKind::kLrn: BuildLrn(index); break;
    case LayerKind::kFullyConnected: BuildFullyConnected(index); break;
    case LayerKind::kConcat: BuildConcat(index); break;
    case LayerKind::kAdd: BuildAdd(index); break;
    case LayerKind::kSoftmaxCrossEntropy: BuildLoss(index); return absl::OkStatus();
  }
  // Every non-input tensor has a gradient in its own layout (made by the builders above,
  // whose backward steps already refer to it).
  if (out.consumers > 1) out.diff_scratch = memory(out.md, engine_);
  return absl::OkStatus();
}

void DnnlNetwork::AddParam(int layer, const Layer::Param& p, const memory::desc& md) {
  nodes_[layer].param_indices.push_back(static_cast<int>(params_.size()));
  params_.push_back({p.name, layer, p.count, md.get_size()});
  param_md_.push_back(md);
}

memory DnnlNetwork::FusedReluBackward(int index) {
  Tensor& out = tensors_[index];
  Node& node = nodes_[index];
  dnnl::eltwise_forward::primitive_desc hint(
      {dnnl::prop_kind::forward_training, dnnl::algorithm::eltwise_relu_use_dst_for_bwd, out.md,
       0.f, 0.f},
      engine_);
  dnnl::eltwise_backward::primitive_desc pd(
      {dnnl::algorithm::eltwise_relu_use_dst_for_bwd, out.md, out.md, 0.f, 0.f}, engine_, hint);
  node.relu_diff = memory(out.md, engine_);
  node.backward_relu.push_back({dnnl::eltwise_backward(pd),
                                {{DNNL_ARG_DST, out.value},
                                 {DNNL_ARG_DIFF_DST, out.diff},
                                 {DNNL_ARG_DIFF_SRC, node.relu_diff}}});
  return node.relu_diff;
}

void DnnlNetwork::BreakWeightGradients(const Layer& layer, const Node& node) {
  auto grads = [&](int k) {
    const int p = node.param_indices[k];
    return std::span<float>(param_grads_[p], params_[p].bytes / sizeof(float));
  };
  if (fault_ == EngineFault::kScaledWeightGradient && layer.kind == LayerKind::kConvolution) {
    for (float& g : grads(0)) g *= 1.5f;
  }
  if (fault_ == EngineFault::kFullyConnectedBiasLost && layer.kind == LayerKind::kFullyConnected) {
    for (float& g : grads(1)) g = 0.f;
  }
}

absl::Status DnnlNetwork::Bind(std::span<float* const> values, std::span<float* const> grads) {
  if (values.size() != params_.size() || grads.size() != params_.size())
    return absl::InvalidArgumentError("Bind: one value and one gradient buffer per parameter");
  for (size_t layer = 0; layer < nodes_.size(); ++layer) {
    Node& node = nodes_[layer];
    const LayerKind kind = model_.layers[layer].kind;
    for (size_t k = 0; k < node.param_indices.size(); ++k) {
      const int p = node.param_indices[k];
      memory value(param_md_[p], engine_, values[p]);
      memory grad(param_md_[p], engine_, grads[p]);
      int value_arg = k == 0 ? DNNL_ARG_WEIGHTS : DNNL_ARG_BIAS;
      int grad_arg = k == 0 ? DNNL_ARG_DIFF_WEIGHTS : DNNL_ARG_DIFF_BIAS;
      if (kind == LayerKind::kBatchNorm) {
        value_arg = k == 0 ? DNNL_ARG_SCALE : DNNL_ARG_SHIFT;
        const bool swapped = fault_ == EngineFault::kBatchNormScaleShiftSwapped;
        grad_arg = (k == 0) != swapped ? DNNL_ARG_DIFF_SCALE : DNNL_ARG_DIFF_SHIFT;
      }
      for (Step& s : node.forward) s.args[value_arg] = value;
      if (k == 0 && node.backward_weights_for_data) {
        node.weights_to_backward = {dnnl::reorder(node.weights_reorder),
                                    {{DNNL_ARG_FROM, value},
                                     {DNNL_ARG_TO, node.backward_weights_for_data}}};
      }
      for (Step& s : node.backward_weights) s.args[grad_arg] = grad;
      for (Step& s : node.backward_data) {
        if (kind == LayerKind::kBatchNorm) {
          s.args[value_arg] = value;
          s.args[grad_arg] = grad;
        } else if (k == 0 && !s.args.count(DNNL_ARG_WEIGHTS)) {
          s.args[DNNL_ARG_WEIGHTS] = value;
        }
      }
    }
  }
  param_values_.assign(values.begin(), values.end());
  param_grads_.assign(grads.begin(), grads.end());
  return absl::OkStatus();
}

memory::desc DnnlNetwork::PlainDesc(int p) const {
  const memory::dims dims = param_md_[p].dims();
  switch (dims.size()) {
    case 1: return memory::desc(dims, dt::f32, tag::x);
    case 2: return memory::desc(dims, dt::f32, tag::oi);
    default: return memory::desc(dims, dt::f32, tag::oihw);
  }
}

void DnnlNetwork::WriteParam(int p, std::span<const float> values) {
  memory plain(PlainDesc(p), engine_, const_cast<float*>(values.data()));
  memory target(param_md_[p], engine_, param_values_[p]);
  dnnl::reorder(plain, target).execute(stream_, plain, target);
  stream_.wait();
}

std::vector<float> DnnlNetwork::ReadPlain(int p, bool grad) {
  std::vector<float> out(params_[p].count);
  memory plain(PlainDesc(p), engine_, out.data());
  memory source(param_md_[p], engine_, grad ? param_grads_[p] : param_values_[p]);
  dnnl::reorder(source, plain).execute(stream_, source, plain);
  stream_.wait();
  return out;
}

void DnnlNetwork::SetBatch(std::span<const float> images, std::span<const int> labels) {
  Tensor& input = tensors_[0];
  std::memcpy(input.value.get_data_handle(), images.data(),
              std::min(images.size_bytes(), input.md.get_size()));
  std::copy_n(labels.begin(), std::min<size_t>(labels.size(), labels_.size()), labels_.begin());
}

double DnnlNetwork::Forward() {
  for (size_t i = 1; i + 1 < nodes_.size(); ++i) {
    current_layer_ = model_.layers[i].name + " forward";
    const auto start = Clock::now();
    for (Step& step : nodes_[i].forward) Run(step);
    stream_.wait();
    times_[i].forward_s = std::chrono::duration<double>(Clock::now() - start).count();
  }
  const auto start = Clock::now();
  for (Step& step : logits_to_plain_) Run(step);
  stream_.wait();
  const double loss = SoftmaxCrossEntropy(
      static_cast<const float*>(logits_plain_.get_data_handle()), labels_.data(), batch_,
      model_.num_classes, static_cast<float*>(logits_diff_plain_.get_data_handle()));
  times_.back().forward_s = std::chrono::duration<double>(Clock::now() - start).count();
  return loss;
}

absl::StatusOr<EngineFault> TestEngineFault() {
  static constexpr std::pair<const char*, EngineFault> kFaults[] = {
      {"scaled-weight-gradient", EngineFault::kScaledWeightGradient},
      {"relu-without-mask", EngineFault::kReluWithoutMask},
      {"concat-slice-misplaced", EngineFault::kConcatSliceMisplaced},
      {"lost-accumulation", EngineFault::kLostAccumulation},
      {"batch-norm-swapped", EngineFault::kBatchNormScaleShiftSwapped},
      {"max-pool-as-average", EngineFault::kMaxPoolAsAverage},
      {"fc-bias-lost", EngineFault::kFullyConnectedBiasLost}};
  const char* armed = std::getenv("PSBENCH_TEST_ENGINE_FAULT");
  if (armed == nullptr || *armed == '\0') return EngineFault::kNone;
  std::string known;
  for (const auto& [name, fault] : kFaults) {
    if (std::string_view(armed) == name) {
      std::fprintf(stderr, "psbench trainer: TEST FAULT ARMED: PSBENCH_TEST_ENGINE_FAULT=%s\n", armed);
      return fault;
    }
    absl::StrAppend(&known, known.empty() ? "" : ", ", name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("PSBENCH_TEST_ENGINE_FAULT=", armed, ": not a test fault (", known, ")"));
}

void DnnlNetwork::AccumulateDiff(int t) {
  if (fault_ == EngineFault::kLostAccumulation) return;
  Tensor& tensor = tensors_[t];
  float* into = static_cast<float*>(tensor.diff.get_data_handle());
  const float* add = static_cast<const float*>(tensor.diff_scratch.get_data_handle());
  const int64_t n = static_cast<int64_t>(tensor.md.get_size() / sizeof(float));
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) into[i] += add[i];
}

void DnnlNetwork::Backward(const std::function<void(int)>& ready) {
  for (Tensor& t : tensors_) t.diff_written = false;
  {
    const auto start = Clock::now();
    for (Step& step : plain_to_diff_) Run(step);
    stream_.wait();
    times_.back().backward_s = std::chrono::duration<double>(Clock::now() - start).count();
  }
  for (size_t i = nodes_.size() - 2; i >= 1; --i) {
    Node& node = nodes_[i];
    const Layer& layer = model_.layers[i];
    current_layer_ = layer.name + " backward";
    const auto start = Clock::now();
    for (Step& step : node.backward_relu) Run(step);
    for (Step& step : node.backward_weights) Run(step);
    if (!node.backward_weights.empty()) {
      stream_.wait();
      BreakWeightGradients(layer, node);
      for (int p : node.param_indices) ready(p);
    }
    if (node.backward_weights_for_data) Run(node.weights_to_backward);
    for (Step& step : node.backward_data) {
      const int t = layer.inputs[step.input];
      if (t == 0) {  // nobody needs the gradient of the images...
        // ...but batch norm's one primitive also yields its parameter gradients.
        if (layer.kind == LayerKind::kBatchNorm) {
          Run(step);
          stream_.wait();
        }
        continue;
      }
      const bool accumulate = tensors_[t].diff_written;
      step.args[step.output_arg] = DiffTarget(t);
      Run(step);
      stream_.wait();
      if (accumulate) AccumulateDiff(t);
      tensors_[t].diff_written = true;
    }
    if (layer.kind == LayerKind::kBatchNorm) {
      for (int p : node.param_indices) ready(p);
    }
    times_[i].backward_s = std::chrono::duration<double>(Clock::now() - start).count();
  }
}

}  // namespace dnnl_engine

absl::StatusOr<std::unique_ptr<Network>> MakeDnnlNetwork(const Model& model, int batch,
                                                         int threads) {
  absl::StatusOr<dnnl_engine::EngineFault> fault = dnnl_engine::TestEngineFault();
  if (!fault.ok()) return fault.status();
  if (threads > 0) omp_set_num_threads(threads);
  auto network = std::make_unique<dnnl_engine::DnnlNetwork>(model, batch, omp_get_max_threads(), *fault);
  if (absl::Status s = network->Build(); !s.ok()) return s;
  return network;
}

}  // namespace psbench::trainer
