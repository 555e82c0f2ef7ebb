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
#include "worker/trainer/loss.h"

namespace psbench::trainer {
namespace {

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
dnnl::primitive_attr FusedReluAttr(bool relu) {
  dnnl::primitive_attr attr;
  if (relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  return attr;
}

memory::dims Dims(int n, const Shape& s, bool flat) {
  if (flat) return {n, s.c};
  return {n, s.c, s.h, s.w};
}

class DnnlNetwork final : public Network {
 public:
  DnnlNetwork(const Model& model, int batch, int threads)
      : model_(model), batch_(batch), threads_(threads), engine_(dnnl::engine::kind::cpu, 0),
        stream_(engine_) {}

  absl::Status Build();

  const Model& model() const override { return model_; }
  int batch() const override { return batch_; }
  std::string description() const override {
    const dnnl_version_t* v = dnnl_version();
    return absl::StrCat("oneDNN ", v->major, ".", v->minor, ".", v->patch,
                        " (cpu, OpenMP, ", threads_, " threads, ", isa_, ")");
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

void DnnlNetwork::BuildConvolution(int index) {
  const Layer& layer = model_.layers[index];
  const int in = layer.inputs[0];
  Tensor& src = tensors_[in];
  Tensor& out = tensors_[index];
  Node& node = nodes_[index];
  const Shape& s = model_.layers[in].out;
  memory::dims wdims = {layer.outputs, s.c, layer.kernel_h, layer.kernel_w};
  memory::dims strides = {layer.stride_h, layer.stride_w};
  memory::dims pad_l = {layer.pad_top, layer.pad_left}, pad_r = {layer.pad_bottom, layer.pad_right};
  memory::desc w_any(wdims, dt::f32, tag::any);
  memory::desc b_md = layer.bias ? memory::desc({layer.outputs}, dt::f32, tag::x) : memory::desc();
  memory::desc dst_any(Dims(batch_, layer.out, false), dt::f32, tag::any);

  const dnnl::primitive_attr attr = FusedReluAttr(layer.relu);
  dnnl::convolution_forward::primitive_desc fwd(
      {dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src.md, w_any, b_md,
       dst_any, strides, pad_l, pad_r},
      attr, engine_);
  out.md = fwd.dst_desc();
  out.value = memory(out.md, engine_);
  AddParam(index, layer.params[0], fwd.weights_desc());
  if (layer.bias) AddParam(index, layer.params[1], b_md);

  Step step{dnnl::convolution_forward(fwd), {{DNNL_ARG_SRC, src.value}, {DNNL_ARG_DST, out.value}}};
  node.forward.push_back(std::move(step));

  out.diff = memory(out.md, engine_);  // needed now by the ReLU backward
  memory diff_dst = layer.relu ? FusedReluBackward(index) : out.diff;
  dnnl::convolution_backward_weights::primitive_desc bww(
      {dnnl::algorithm::convolution_direct, src.md, fwd.weights_desc(), b_md, out.md, strides,
       pad_l, pad_r},
      engine_, fwd);
  node.backward_weights.push_back(
      {dnnl::convolution_backward_weights(bww), {{DNNL_ARG_SRC, src.value}, {DNNL_ARG_DIFF_DST, diff_dst}}});
  if (in != 0) {
    // Backward data wants the weights transposed (OIhw16o16i where forward has
    // OIhw16i16o): forcing the forward layout on it would select the reference kernel, so
    // the weights are reordered for it every step, as PyTorch does.
    dnnl::convolution_backward_data::primitive_desc bwd(
        {dnnl::algorithm::convolution_direct, src.md, w_any, out.md, strides, pad_l, pad_r},
        engine_, fwd);
    Step back{dnnl::convolution_backward_data(bwd), {{DNNL_ARG_DIFF_DST, diff_dst}}};
    if (bwd.weights_desc() != fwd.weights_desc()) {
      node.backward_weights_for_data = memory(bwd.weights_desc(), engine_);
      back.args[DNNL_ARG_WEIGHTS] = node.backward_weights_for_data;
      node.weights_reorder = dnnl::reorder::primitive_desc(engine_, fwd.weights_desc(), engine_,
                                                           bwd.weights_desc());
    }
    node.backward_data.push_back(std::move(back));
  }
}

void DnnlNetwork::BuildBatchNorm(int index) {
  const Layer& layer = model_.layers[index];
  const int in = layer.inputs[0];
  Tensor& src = tensors_[in];
  Tensor& out = tensors_[index];
  Node& node = nodes_[index];
  auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  if (layer.relu) flags = flags | dnnl::normalization_flags::fuse_norm_relu;
  dnnl::batch_normalization_forward::primitive_desc fwd(
      {dnnl::prop_kind::forward_training, src.md, layer.epsilon, flags}, engine_);
  out.md = fwd.dst_desc();
  out.value = memory(out.md, engine_);
  memory::desc c_md({layer.out.c}, dt::f32, tag::x);
  AddParam(index, layer.params[0], c_md);
  AddParam(index, layer.params[1], c_md);
  node.mean = memory(fwd.mean_desc(), engine_);
  node.variance = memory(fwd.variance_desc(), engine_);
  Step step{dnnl::batch_normalization_forward(fwd),
            {{DNNL_ARG_SRC, src.value},
             {DNNL_ARG_DST, out.value},
             {DNNL_ARG_MEAN, node.mean},
             {DNNL_ARG_VARIANCE, node.variance}}};
  if (layer.relu) {
    node.workspace = memory(fwd.workspace_desc(), engine_);
    step.args[DNNL_ARG_WORKSPACE] = node.workspace;
  }
  node.forward.push_back(std::move(step));

  out.diff = memory(out.md, engine_);
  dnnl::batch_normalization_backward::primitive_desc bwd(
      {dnnl::prop_kind::backward, out.md, src.md, layer.epsilon, flags}, engine_, fwd);
  Step back{dnnl::batch_normalization_backward(bwd),
            {{DNNL_ARG_SRC, src.value},
             {DNNL_ARG_MEAN, node.mean},
             {DNNL_ARG_VARIANCE, node.variance},
             {DNNL_ARG_DIFF_DST, out.diff}}};
  if (layer.relu) back.args[DNNL_ARG_WORKSPACE] = node.workspace;
  // Batch norm on the images: nobody wants their gradient, but the primitive must still run
  // for the scale and shift gradients; it writes the input gradient here, unread.
  if (in == 0) back.args[DNNL_ARG_DIFF_SRC] = memory(src.md, engine_);
  // One primitive yields both the parameter and the input gradients: it is the layer's
  // backward_data step, and its parameter gradients are final after it.
  node.backward_data.push_back(std::move(back));
}

void DnnlNetwork::BuildRelu(int index) {
  const int in = model_.layers[index].inputs[0];
  Tensor& src = tensors_[in];
  Tensor& out = tensors_[index];
  dnnl::eltwise_forward::primitive_desc fwd(
      {dnnl::prop_kind::forward_training, dnnl::algorithm::eltwise_relu_use_dst_for_bwd, src.md,
       0.f, 0.f},
      engine_);
  out.md = fwd.dst_desc();
  out.value = memory(out.md, engine_);
  nodes_[index].forward.push_back(
      {dnnl::eltwise_forward(fwd), {{DNNL_ARG_SRC, src.value}, {DNNL_ARG_DST, out.value}}});
  out.diff = memory(out.md, engine_);
  dnnl::eltwise_backward::primitive_desc bwd(
      {dnnl::algorithm::eltwise_relu_use_dst_for_bwd, src.md, out.md, 0.f, 0.f}, engine_, fwd);
  nodes_[index].backward_data.push_back(
      {dnnl::eltwise_backward(bwd), {{DNNL_ARG_DST, out.value}, {DNNL_ARG_DIFF_DST, out.diff}}});
}

void DnnlNetwork::BuildPool(int index) {
  const Layer& layer = model_.layers[index];
  const int in = layer.inputs[0];
  Tensor& src = tensors_[in];
  Tensor& out = tensors_[index];
  Node& node = nodes_[index];
  const bool max = layer.kind == LayerKind::kMaxPool;
  auto algo = max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding;
  memory::dims strides = {layer.stride_h, layer.stride_w};
  memory::dims kernel = {layer.kernel_h, layer.kernel_w};
  memory::dims pad_l = {layer.pad_top, layer.pad_left}, pad_r = {layer.pad_bottom, layer.pad_right};
  memory::desc dst_any(Dims(batch_, layer.out, false), dt::f32, tag::any);
  dnnl::pooling_forward::primitive_desc fwd(
      {dnnl::prop_kind::forward_training, algo, src.md, dst_any, strides, kernel, pad_l, pad_r},
      engine_);
  out.md = fwd.dst_desc();
  out.value = memory(out.md, engine_);
  Step step{dnnl::pooling_forward(fwd), {{DNNL_ARG_SRC, src.value}, {DNNL_ARG_DST, out.value}}};
  if (max) {
    node.workspace = memory(fwd.workspace_desc(), engine_);
    step.args[DNNL_ARG_WORKSPACE] = node.workspace;
  }
  node.forward.push_back(std::move(step));
  out.diff = memory(out.md, engine_);
  dnnl::pooling_backward::primitive_desc bwd(
      {algo, src.md, out.md, strides, kernel, pad_l, pad_r}, engine_, fwd);
  Step back{dnnl::pooling_backward(bwd), {{DNNL_ARG_DIFF_DST, out.diff}}};
  if (max) back.args[DNNL_ARG_WORKSPACE] = node.workspace;
  node.backward_data.push_back(std::move(back));
}

void DnnlNetwork::BuildLrn(int index) {
  const Layer& layer = model_.layers[index];
  const int in = layer.inputs[0];
  Tensor& src = tensors_[in];
  Tensor& out = tensors_[index];
  Node& node = nodes_[index];
  auto algo = dnnl::algorithm::lrn_across_channels;
  dnnl::lrn_forward::primitive_desc fwd(
      {dnnl::prop_kind::forward_training, algo, src.md, layer.lrn_size, layer.lrn_alpha,
       layer.lrn_beta, layer.lrn_k},
      engine_);
  out.md = fwd.dst_desc();
  out.value = memory(out.md, engine_);
  node.workspace = memory(fwd.workspace_desc(), engine_);
  node.forward.push_back({dnnl::lrn_forward(fwd),
                          {{DNNL_ARG_SRC, src.value},
                           {DNNL_ARG_DST, out.value},
                           {DNNL_ARG_WORKSPACE, node.workspace}}});
  out.diff = memory(out.md, engine_);
  dnnl::lrn_backward::primitive_desc bwd(
      {algo, src.md, out.md, layer.lrn_size, layer.lrn_alpha, layer.lrn_beta, layer.lrn_k},
      engine_, fwd);
  node.backward_data.push_back({dnnl::lrn_backward(bwd),
                                {{DNNL_ARG_SRC, src.value},
                                 {DNNL_ARG_DIFF_DST, out.diff},
                                 {DNNL_ARG_WORKSPACE, node.workspace}}});
}

void DnnlNetwork::BuildFullyConnected(int index) {
  const Layer& layer = model_.layers[index];
  const int in = layer.inputs[0];
  Tensor& src = tensors_[in];
  Tensor& out = tensors_[index];
  Node& node = nodes_[index];
  const Shape& s = model_.layers[in].out;
  const bool flat_input = src.md.dims().size() == 2;
  memory::dims wdims = flat_input ? memory::dims{layer.outputs, s.c}
                                  : memory::dims{layer.outputs, s.c, s.h, s.w};
  memory::desc w_any(wdims, dt::f32, tag::any);
  memory::desc b_md({layer.outputs}, dt::f32, tag::x);
  memory::desc dst_md({batch_, layer.outputs}, dt::f32, tag::nc);
  const dnnl::primitive_attr attr = FusedReluAttr(layer.relu);
  dnnl::inner_product_forward::primitive_desc fwd(
      {dnnl::prop_kind::forward_training, src.md, w_any, b_md, dst_md}, attr, engine_);
  out.md = fwd.dst_desc();
  out.value = memory(out.md, engine_);
  AddParam(index, layer.params[0], fwd.weights_desc());
  AddParam(index, layer.params[1], b_md);
  node.forward.push_back(
      {dnnl::inner_product_forward(fwd), {{DNNL_ARG_SRC, src.value}, {DNNL_ARG_DST, out.value}}});
  out.diff = memory(out.md, engine_);
  memory diff_dst = layer.relu ? FusedReluBackward(index) : out.diff;
  dnnl::inner_product_backward_weights::primitive_desc bww(
      {src.md, fwd.weights_desc(), b_md, out.md}, engine_, fwd);
  node.backward_weights.push_back({dnnl::inner_product_backward_weights(bww),
                                   {{DNNL_ARG_SRC, src.value}, {DNNL_ARG_DIFF_DST, diff_dst}}});
  if (in != 0) {
    dnnl::inner_product_backward_data::primitive_desc bwd({src.md, fwd.weights_desc(), out.md},
                                                          engine_, fwd);
    node.backward_data.push_back(
        {dnnl::inner_product_backward_data(bwd), {{DNNL_ARG_DIFF_DST, diff_dst}}});
  }
}

void DnnlNetwork::BuildConcat(int index) {
  const Layer& layer = model_.layers[index];
  Tensor& out = tensors_[index];
  Node& node = nodes_[index];
  std::vector<memory::desc> srcs;
  for (int in : layer.inputs) srcs.push_back(tensors_[in].md);
  dnnl::concat::primitive_desc fwd(1, srcs, engine_);
  out.md = fwd.dst_desc();
  out.value = memory(out.md, engine_);
  Step step{dnnl::concat(fwd), {{DNNL_ARG_DST, out.value}}};
  for (size_t i = 0; i < layer.inputs.size(); ++i)
    step.args[DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i)] = tensors_[layer.inputs[i]].value;
  node.forward.push_back(std::move(step));
  // Backward: each input's gradient is its slice of the output gradient.
  out.diff = memory(out.md, engine_);
  memory::dim offset = 0;
  for (size_t i = 0; i < layer.inputs.size(); ++i) {
    const memory::desc& in_md = tensors_[layer.inputs[i]].md;
    memory::dims sub_dims = in_md.dims();
    memory::desc slice = out.md.submemory_desc(sub_dims, {0, offset, 0, 0});
    memory slice_mem(slice, engine_, out.diff.get_data_handle());
    dnnl::reorder::primitive_desc pd(engine_, slice, engine_, in_md);
    node.backward_data.push_back(
        {dnnl::reorder(pd), {{DNNL_ARG_FROM, slice_mem}}, DNNL_ARG_TO, static_cast<int>(i)});
    offset += sub_dims[1];
  }
}

void DnnlNetwork::BuildAdd(int index) {
  const Layer& layer = model_.layers[index];
  Tensor& a = tensors_[layer.inputs[0]];
  Tensor& b = tensors_[layer.inputs[1]];
  Tensor& out = tensors_[index];
  Node& node = nodes_[index];
  dnnl::binary::primitive_desc fwd({dnnl::algorithm::binary_add, a.md, b.md, a.md}, engine_);
  out.md = fwd.dst_desc();
  out.value = memory(out.md, engine_);
  node.forward.push_back({dnnl::binary(fwd),
                          {{DNNL_ARG_SRC_0, a.value}, {DNNL_ARG_SRC_1, b.value},
                           {DNNL_ARG_DST, out.value}}});
  out.diff = memory(out.md, engine_);
  // Both summands receive the output gradient unchanged (a reorder doubles as copy).
  for (int i = 0; i < 2; ++i) {
    dnnl::reorder::primitive_desc pd(engine_, out.md, engine_, tensors_[layer.inputs[i]].md);
    node.backward_data.push_back({dnnl::reorder(pd), {{DNNL_ARG_FROM, out.diff}}, DNNL_ARG_TO, i});
  }
}

void DnnlNetwork::BuildLoss(int index) {
  const int in = model_.layers[index].inputs[0];
  Tensor& logits = tensors_[in];
  const int classes = model_.num_classes;
  memory::desc plain({batch_, classes}, dt::f32, tag::nc);
  memory::desc logits_md = logits.md;
  if (logits_md.dims().size() == 4) logits_md = logits_md.reshape({batch_, classes});
  logits_plain_ = memory(plain, engine_);
  logits_diff_plain_ = memory(plain, engine_);
  memory logits_view(logits_md, engine_, logits.value.get_data_handle());
  memory diff_view(logits_md, engine_, logits.diff.get_data_handle());
  logits_to_plain_.push_back({dnnl::reorder(logits_view, logits_plain_),
                              {{DNNL_ARG_FROM, logits_view}, {DNNL_ARG_TO, logits_plain_}}});
  plain_to_diff_.push_back({dnnl::reorder(logits_diff_plain_, diff_view),
                            {{DNNL_ARG_FROM, logits_diff_plain_}, {DNNL_ARG_TO, diff_view}}});
  probabilities_.resize(size_t(batch_) * classes);
  labels_.assign(batch_, 0);
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
        grad_arg = k == 0 ? DNNL_ARG_DIFF_SCALE : DNNL_ARG_DIFF_SHIFT;
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

void DnnlNetwork::AccumulateDiff(int t) {
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

}  // namespace

absl::StatusOr<std::unique_ptr<Network>> MakeDnnlNetwork(const Model& model, int batch,
                                                         int threads) {
  if (threads > 0) omp_set_num_threads(threads);
  auto network = std::make_unique<DnnlNetwork>(model, batch, omp_get_max_threads());
  if (absl::Status s = network->Build(); !s.ok()) return s;
  return network;
}

}  // namespace psbench::trainer
