// The cuDNN engine's construction: each layer's tensors, descriptors and buffers in the
// chosen layout (NCHW, or NHWC with KRSC filters), convolution algorithms by cuDNN's own
// measurements, and the loss's buffers.
#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/trainer/cudnn_internal.h"

namespace psbench::trainer::cudnn_engine {
namespace {

bool AllowedMath(cudnnMathType_t m, Math math) {
  return math == Math::kTf32 || (m != CUDNN_TENSOR_OP_MATH && m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
}

// cuDNN's own measurements (cudnnFind*), as PyTorch's cudnn.benchmark does; the fastest
// algorithm that succeeded in the allowed arithmetic and fits the workspace cap.
constexpr size_t kMaxWorkspace = size_t{2} << 30;
template <typename Perf>
const Perf* Fastest(const Perf* perf, int found, Math math) {
  for (int i = 0; i < found; ++i) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kMaxWorkspace &&
        AllowedMath(perf[i].mathType, math))
      return &perf[i];
  }
  return nullptr;
}

}  // namespace

float* CudnnNetwork::Alloc(size_t count) {
  allocations_.push_back(DeviceFloats(count));
  return allocations_.back();
}

cudnnTensorDescriptor_t CudnnNetwork::Descriptor(int n, int c, int h, int w, bool nhwc) {
  cudnnTensorDescriptor_t d = nullptr;
  PSB_CUDNN(cudnnCreateTensorDescriptor(&d));
  descriptors_.push_back(d);
  PSB_CUDNN(cudnnSetTensor4dDescriptor(d, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                       n, c, h, w));
  return d;
}

absl::Status CudnnNetwork::ChooseConvolution(int index) {
  Node& node = nodes_[index];
  Tensor& src = tensors_[model_.layers[index].inputs[0]];
  Tensor& out = tensors_[index];
  PSB_CUDNN(cudnnSetConvolutionMathType(node.conv, math_ == Math::kTf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
  int found = 0;
  cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  PSB_CUDNN(cudnnFindConvolutionForwardAlgorithm(cudnn_, src.desc, node.filter, node.conv, out.desc,
                                                 CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, fwd));
  const auto* f = Fastest(fwd, found, math_);
  cudnnConvolutionBwdFilterAlgoPerf_t bwf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  PSB_CUDNN(cudnnFindConvolutionBackwardFilterAlgorithm(cudnn_, src.desc, out.desc, node.conv, node.filter,
                                                        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &found, bwf));
  const auto* wf = Fastest(bwf, found, math_);
  cudnnConvolutionBwdDataAlgoPerf_t bwd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  PSB_CUDNN(cudnnFindConvolutionBackwardDataAlgorithm(cudnn_, node.filter, out.desc, node.conv, src.desc,
                                                      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &found, bwd));
  const auto* df = Fastest(bwd, found, math_);
  if (!f || !wf || !df) return absl::InternalError("cuDNN found no convolution algorithm for this layer");
  node.fwd_algo = f->algo;
  node.bwd_filter_algo = wf->algo;
  node.bwd_data_algo = df->algo;
  Workspace(std::max({f->memory, wf->memory, df->memory}));
  return absl::OkStatus();
}

// A residual block's add and its ReLU are memory-bound passes over the same tensor; fused,
// the add's own output is never written or read. Only where nothing else reads that output.
int CudnnNetwork::FusableRelu(int add) const {
  const Layer& layer = model_.layers[add];
  if (layer.inputs.size() != 2 || layer.inputs[0] == layer.inputs[1]) return -1;
  int consumer = -1;
  for (size_t j = add + 1; j < model_.layers.size(); ++j) {
    for (int in : model_.layers[j].inputs) {
      if (in != add) continue;
      if (consumer >= 0) return -1;
      consumer = static_cast<int>(j);
    }
  }
  return consumer >= 0 && model_.layers[consumer].kind == LayerKind::kRelu ? consumer : -1;
}

// Each input's channels are a strided view of the output: one transform copies them in
// (forward) and out, accumulating where the input already has a gradient (backward).
void CudnnNetwork::BuildConcat(int index) {
  const Layer& layer = model_.layers[index];
  Node& node = nodes_[index];
  const Shape& o = layer.out;
  int channel = 0;
  for (int in : layer.inputs) {
    const Shape& s = model_.layers[in].out;
    cudnnTensorDescriptor_t d = nullptr;
    PSB_CUDNN(cudnnCreateTensorDescriptor(&d));
    descriptors_.push_back(d);
    if (nhwc_) {
      PSB_CUDNN(cudnnSetTensor4dDescriptorEx(d, CUDNN_DATA_FLOAT, batch_, s.c, o.h, o.w, o.h * o.w * o.c, 1,
                                             o.w * o.c, o.c));
      node.slice_offsets.push_back(size_t(channel));
    } else {
      PSB_CUDNN(cudnnSetTensor4dDescriptorEx(d, CUDNN_DATA_FLOAT, batch_, s.c, o.h, o.w, o.c * o.h * o.w,
                                             o.h * o.w, o.w, 1));
      node.slice_offsets.push_back(size_t(channel) * o.h * o.w);
    }
    node.slices.push_back(d);
    channel += s.c;
  }
}

absl::Status CudnnNetwork::BuildLoss() {
  const int classes = model_.num_classes;
  if (model_.layers[model_.loss().inputs[0]].out.elements() != classes)
    return absl::InvalidArgumentError("the loss's input must be one logit per class");
  logits_desc_ = Descriptor(batch_, classes, 1, 1, false);
  log_probs_ = Alloc(size_t(batch_) * classes);
  one_hot_ = Alloc(size_t(batch_) * classes);
  one_hot_host_.assign(size_t(batch_) * classes, 0.f);
  labels_.assign(batch_, 0);
  return absl::OkStatus();
}

absl::Status CudnnNetwork::BuildLayer(int index) {
  const Layer& layer = model_.layers[index];
  Tensor& out = tensors_[index];
  Node& node = nodes_[index];
  if (layer.kind == LayerKind::kSoftmaxCrossEntropy) return BuildLoss();
  out.count = size_t(batch_) * layer.out.elements();
  out.desc = Descriptor(batch_, layer.out.c, layer.out.h, layer.out.w, nhwc_);
  out.value = Alloc(out.count);
  // The images get a gradient buffer too: batch norm computes its parameter gradients and
  // its input gradient in one call, even when that input is the images.
  out.diff = Alloc(out.count);
  auto add_param = [&](const Layer::Param& p) {
    node.params.push_back(static_cast<int>(params_.size()));
    params_.push_back({p.name, index, p.count, size_t(p.count) * sizeof(float)});
    device_values_.push_back(Alloc(p.count));
    device_grads_.push_back(Alloc(p.count));
    node.value.push_back(device_values_.back());
    node.grad.push_back(device_grads_.back());
  };
  // 1 x C x 1 x 1 is the same memory in either layout; described in the engine's.
  auto channel_desc = [&](int c) { node.bias_desc = Descriptor(1, c, 1, 1, nhwc_); };
  const bool window = layer.kind == LayerKind::kConvolution || layer.kind == LayerKind::kMaxPool ||
                      layer.kind == LayerKind::kAvgPool;
  if (window && (layer.pad_top != layer.pad_bottom || layer.pad_left != layer.pad_right))
    return absl::UnimplementedError("cuDNN takes symmetric padding only");
  const bool fused_relu = layer.relu && (layer.kind == LayerKind::kConvolution ||
                                         layer.kind == LayerKind::kFullyConnected ||
                                         layer.kind == LayerKind::kBatchNorm);
  if (fused_relu && !(layer.kind == LayerKind::kBatchNorm && own_batch_norm())) node.relu_diff = Alloc(out.count);
  const Shape& in = layer.inputs.empty() ? layer.out : model_.layers[layer.inputs[0]].out;
  switch (layer.kind) {
    case LayerKind::kInput:
      if (nhwc_) {
        images_desc_ = Descriptor(batch_, in.c, in.h, in.w, false);
        images_ = Alloc(out.count);
      }
      return absl::OkStatus();
    case LayerKind::kConvolution: {
      PSB_CUDNN(cudnnCreateFilterDescriptor(&node.filter));
      PSB_CUDNN(cudnnSetFilter4dDescriptor(node.filter, CUDNN_DATA_FLOAT,
                                           nhwc_ ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, layer.outputs,
                                           in.c, layer.kernel_h, layer.kernel_w));
      PSB_CUDNN(cudnnCreateConvolutionDescriptor(&node.conv));
      PSB_CUDNN(cudnnSetConvolution2dDescriptor(node.conv, layer.pad_top, layer.pad_left,
                                                layer.stride_h, layer.stride_w, 1, 1,
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
      if (absl::Status s = ChooseConvolution(index); !s.ok()) return s;
      add_param(layer.params[0]);
      if (nhwc_) {
        node.kcrs = Descriptor(layer.outputs, in.c, layer.kernel_h, layer.kernel_w, false);
        node.krsc = Descriptor(layer.outputs, in.c, layer.kernel_h, layer.kernel_w, true);
        node.filter_value = Alloc(layer.params[0].count);
        node.filter_grad = Alloc(layer.params[0].count);
      }
      if (layer.bias) {
        add_param(layer.params[1]);
        channel_desc(layer.outputs);
      }
      return absl::OkStatus();
    }
    case LayerKind::kBatchNorm:
      // Scale, shift and statistics as cuDNN derives them for this input and mode.
      PSB_CUDNN(cudnnCreateTensorDescriptor(&node.bias_desc));
      descriptors_.push_back(node.bias_desc);
      PSB_CUDNN(cudnnDeriveBNTensorDescriptor(node.bias_desc, tensors_[layer.inputs[0]].desc, CUDNN_BATCHNORM_SPATIAL));
      add_param(layer.params[0]);
      add_param(layer.params[1]);
      node.save_mean = Alloc(layer.out.c);
      node.save_inv_var = Alloc(layer.out.c);
      node.bn_coeff = Alloc(3 * size_t(layer.out.c));
      return absl::OkStatus();
    case LayerKind::kConcat:
      BuildConcat(index);
      return absl::OkStatus();
    case LayerKind::kAdd:
      node.fused_relu = FusableRelu(index);
      if (node.fused_relu >= 0) nodes_[node.fused_relu].fused_into = index;
      return absl::OkStatus();
    case LayerKind::kRelu:
      return absl::OkStatus();
    case LayerKind::kMaxPool:
    case LayerKind::kAvgPool:
      PSB_CUDNN(cudnnCreatePoolingDescriptor(&node.pool));
      PSB_CUDNN(cudnnSetPooling2dDescriptor(
          node.pool,
          layer.kind == LayerKind::kMaxPool ? CUDNN_POOLING_MAX
                                            : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING,
          CUDNN_NOT_PROPAGATE_NAN, layer.kernel_h, layer.kernel_w, layer.pad_top, layer.pad_left,
          layer.stride_h, layer.stride_w));
      return absl::OkStatus();
    case LayerKind::kLrn:
      PSB_CUDNN(cudnnCreateLRNDescriptor(&node.lrn));
      PSB_CUDNN(cudnnSetLRNDescriptor(node.lrn, layer.lrn_size, layer.lrn_alpha, layer.lrn_beta,
                                      layer.lrn_k));
      if (nhwc_) {
        node.nchw = Descriptor(batch_, layer.out.c, layer.out.h, layer.out.w, false);
        for (float** b : {&node.nchw_in, &node.nchw_in_diff, &node.nchw_out, &node.nchw_out_diff})
          *b = Alloc(out.count);
      }
      return absl::OkStatus();
    case LayerKind::kFullyConnected:
      add_param(layer.params[0]);
      add_param(layer.params[1]);
      // The weights' columns are in (C, H, W) order: an NHWC input is transposed first.
      if (nhwc_ && in.h * in.w > 1) {
        node.nchw = Descriptor(batch_, in.c, in.h, in.w, false);
        node.nchw_in = Alloc(size_t(batch_) * in.elements());
        node.nchw_in_diff = Alloc(size_t(batch_) * in.elements());
      }
      return absl::OkStatus();
    case LayerKind::kSoftmaxCrossEntropy:
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

}  // namespace psbench::trainer::cudnn_engine
