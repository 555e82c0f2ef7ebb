// The GPU engine on cuDNN (convolution, pooling, LRN, batch norm, activations) and cuBLAS
// (fully connected layers, gradient sums). Activations are NCHW on the device; parameters
// live on the device in the canonical layout (OIHW, OI, C), so host and device copies are
// plain memcpys: the trainer's host buffers (what goes to the PS) are copied in after a pull
// (ParamsChanged) and each layer's gradients are copied out as soon as backward produced
// them. Gradients of tensors read by several layers accumulate through cuDNN's and cuBLAS's
// beta = 1. The loss (softmax cross-entropy over N x classes) is computed on the host.
#include "worker/trainer/cudnn_network.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/trainer/loss.h"

namespace psbench::trainer {
namespace {

using Clock = std::chrono::steady_clock;

// A failed CUDA call after the network was built is a bug or a dead device: say which and stop.
#define PSB_CUDA(call)                                                                  \
  do {                                                                                  \
    cudaError_t e_ = (call);                                                            \
    if (e_ != cudaSuccess) Fatal(#call, cudaGetErrorString(e_));                        \
  } while (0)
#define PSB_CUDNN(call)                                                                 \
  do {                                                                                  \
    cudnnStatus_t e_ = (call);                                                          \
    if (e_ != CUDNN_STATUS_SUCCESS) Fatal(#call, cudnnGetErrorString(e_));              \
  } while (0)
#define PSB_CUBLAS(call)                                                                \
  do {                                                                                  \
    cublasStatus_t e_ = (call);                                                         \
    if (e_ != CUBLAS_STATUS_SUCCESS) Fatal(#call, "cuBLAS error");                      \
  } while (0)

[[noreturn]] void Fatal(const char* call, const char* what) {
  std::fprintf(stderr, "psbench trainer (gpu): %s failed: %s\n", call, what);
  std::abort();
}

float* DeviceFloats(size_t count) {
  void* p = nullptr;
  PSB_CUDA(cudaMalloc(&p, std::max<size_t>(count, 1) * sizeof(float)));
  PSB_CUDA(cudaMemset(p, 0, std::max<size_t>(count, 1) * sizeof(float)));
  return static_cast<float*>(p);
}

struct Tensor {
  cudnnTensorDescriptor_t desc = nullptr;
  float* value = nullptr;
  float* diff = nullptr;
  size_t count = 0;
  bool diff_written = false;
};

struct Node {
  cudnnFilterDescriptor_t filter = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_algo{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo{};
  cudnnTensorDescriptor_t bias_desc = nullptr;  // 1 x C x 1 x 1 (bias, BN scale/shift)
  cudnnPoolingDescriptor_t pool = nullptr;
  cudnnLRNDescriptor_t lrn = nullptr;
  float* save_mean = nullptr;
  float* save_inv_var = nullptr;
  float* relu_diff = nullptr;  // gradient before a fused ReLU
  std::vector<int> params;
  std::vector<float*> value, grad;  // device copies of this layer's parameters
};

class CudnnNetwork final : public Network {
 public:
  CudnnNetwork(const Model& model, int batch) : model_(model), batch_(batch) {}
  ~CudnnNetwork() override;

  absl::Status Build();

  const Model& model() const override { return model_; }
  int batch() const override { return batch_; }
  std::string description() const override { return description_; }
  const std::vector<ParamInfo>& params() const override { return params_; }
  absl::Status Bind(std::span<float* const> values, std::span<float* const> grads) override;
  void SetBatch(std::span<const float> images, std::span<const int> labels) override;
  double Forward() override;
  void Backward(const std::function<void(int)>& ready) override;
  void ParamsChanged() override;
  const std::vector<LayerTime>& layer_times() const override { return times_; }
  std::vector<float> ReadParam(int i) override;
  void WriteParam(int i, std::span<const float> values) override;
  std::vector<float> ReadGrad(int i) override;

 private:
  absl::Status BuildLayer(int index);
  void ForwardLayer(int index);
  void BackwardLayer(int index, const std::function<void(int)>& ready);
  // beta for writing the gradient of input tensor t: accumulate after the first writer.
  float Beta(int t) { return tensors_[t].diff_written ? 1.f : 0.f; }
  void Written(int t) { tensors_[t].diff_written = true; }
  void ReluForward(Tensor& t);
  float* ReluBackward(int index);  // returns the pre-activation gradient
  void* Workspace(size_t bytes);

  Model model_;
  int batch_;
  std::string description_;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnActivationDescriptor_t relu_ = nullptr;
  std::vector<Tensor> tensors_;
  std::vector<Node> nodes_;
  std::vector<ParamInfo> params_;
  std::vector<float*> host_values_, host_grads_;
  std::vector<float*> device_values_, device_grads_;
  std::vector<LayerTime> times_;
  float* ones_ = nullptr;  // batch_ ones, for FC bias sums
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::vector<float> logits_, logits_diff_;
  std::vector<int> labels_;
};

CudnnNetwork::~CudnnNetwork() {
  for (Tensor& t : tensors_) {
    if (t.desc) cudnnDestroyTensorDescriptor(t.desc);
    cudaFree(t.value);
    cudaFree(t.diff);
  }
  for (Node& n : nodes_) {
    if (n.filter) cudnnDestroyFilterDescriptor(n.filter);
    if (n.conv) cudnnDestroyConvolutionDescriptor(n.conv);
    if (n.bias_desc) cudnnDestroyTensorDescriptor(n.bias_desc);
    if (n.pool) cudnnDestroyPoolingDescriptor(n.pool);
    if (n.lrn) cudnnDestroyLRNDescriptor(n.lrn);
    cudaFree(n.save_mean);
    cudaFree(n.save_inv_var);
    cudaFree(n.relu_diff);
  }
  for (float* p : device_values_) cudaFree(p);
  for (float* p : device_grads_) cudaFree(p);
  cudaFree(ones_);
  cudaFree(workspace_);
  if (relu_) cudnnDestroyActivationDescriptor(relu_);
  if (cublas_) cublasDestroy(cublas_);
  if (cudnn_) cudnnDestroy(cudnn_);
}

void* CudnnNetwork::Workspace(size_t bytes) {
  if (bytes > workspace_bytes_) {
    cudaFree(workspace_);
    PSB_CUDA(cudaMalloc(&workspace_, bytes));
    workspace_bytes_ = bytes;
  }
  return workspace_;
}

absl::Status CudnnNetwork::Build() {
  if (batch_ < 1) return absl::InvalidArgumentError("batch must be >= 1");
  int devices = 0;
  if (cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--engine=gpu: no CUDA device (", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices", ")"));
  }
  cudaDeviceProp prop{};
  PSB_CUDA(cudaGetDeviceProperties(&prop, 0));
  if (cudnnCreate(&cudnn_) != CUDNN_STATUS_SUCCESS)
    return absl::FailedPreconditionError("--engine=gpu: cudnnCreate failed");
  if (cublasCreate(&cublas_) != CUBLAS_STATUS_SUCCESS)
    return absl::FailedPreconditionError("--engine=gpu: cublasCreate failed");
  PSB_CUDNN(cudnnCreateActivationDescriptor(&relu_));
  PSB_CUDNN(cudnnSetActivationDescriptor(relu_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  description_ = absl::StrCat("cuDNN ", cudnnGetVersion(), ", cuBLAS (gpu: ", prop.name, ")");
  tensors_.resize(model_.layers.size());
  nodes_.resize(model_.layers.size());
  times_.assign(model_.layers.size(), {});
  std::vector<float> ones(batch_, 1.f);
  ones_ = DeviceFloats(batch_);
  PSB_CUDA(cudaMemcpy(ones_, ones.data(), batch_ * sizeof(float), cudaMemcpyHostToDevice));
  for (size_t i = 0; i < model_.layers.size(); ++i) {
    if (absl::Status s = BuildLayer(static_cast<int>(i)); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat(model_.name, " layer ", model_.layers[i].name,
                                                     ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status CudnnNetwork::BuildLayer(int index) {
  const Layer& layer = model_.layers[index];
  Tensor& out = tensors_[index];
  Node& node = nodes_[index];
  if (layer.kind == LayerKind::kSoftmaxCrossEntropy) {
    logits_.resize(size_t(batch_) * model_.num_classes);
    logits_diff_.resize(logits_.size());
    labels_.assign(batch_, 0);
    return absl::OkStatus();
  }
  out.count = size_t(batch_) * layer.out.elements();
  PSB_CUDNN(cudnnCreateTensorDescriptor(&out.desc));
  PSB_CUDNN(cudnnSetTensor4dDescriptor(out.desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, batch_,
                                       layer.out.c, layer.out.h, layer.out.w));
  out.value = DeviceFloats(out.count);
  // The images get a gradient buffer too: batch norm computes its parameter gradients and
  // its input gradient in one call, even when that input is the images.
  out.diff = DeviceFloats(out.count);
  auto add_param = [&](const Layer::Param& p) {
    node.params.push_back(static_cast<int>(params_.size()));
    params_.push_back({p.name, index, p.count, size_t(p.count) * sizeof(float)});
    device_values_.push_back(DeviceFloats(p.count));
    device_grads_.push_back(DeviceFloats(p.count));
    node.value.push_back(device_values_.back());
    node.grad.push_back(device_grads_.back());
  };
  auto channel_desc = [&](int c) {
    PSB_CUDNN(cudnnCreateTensorDescriptor(&node.bias_desc));
    PSB_CUDNN(cudnnSetTensor4dDescriptor(node.bias_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, c, 1, 1));
  };
  const bool window = layer.kind == LayerKind::kConvolution || layer.kind == LayerKind::kMaxPool ||
                      layer.kind == LayerKind::kAvgPool;
  if (window && (layer.pad_top != layer.pad_bottom || layer.pad_left != layer.pad_right))
    return absl::UnimplementedError("cuDNN takes symmetric padding only");
  const bool fused_relu = layer.relu && (layer.kind == LayerKind::kConvolution ||
                                         layer.kind == LayerKind::kFullyConnected ||
                                         layer.kind == LayerKind::kBatchNorm);
  if (fused_relu) node.relu_diff = DeviceFloats(out.count);
  switch (layer.kind) {
    case LayerKind::kInput:
      return absl::OkStatus();
    case LayerKind::kConvolution: {
      const Shape& in = model_.layers[layer.inputs[0]].out;
      Tensor& src = tensors_[layer.inputs[0]];
      PSB_CUDNN(cudnnCreateFilterDescriptor(&node.filter));
      PSB_CUDNN(cudnnSetFilter4dDescriptor(node.filter, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                           layer.outputs, in.c, layer.kernel_h, layer.kernel_w));
      PSB_CUDNN(cudnnCreateConvolutionDescriptor(&node.conv));
      PSB_CUDNN(cudnnSetConvolution2dDescriptor(node.conv, layer.pad_top, layer.pad_left,
                                                layer.stride_h, layer.stride_w, 1, 1,
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
      PSB_CUDNN(cudnnSetConvolutionMathType(node.conv, CUDNN_DEFAULT_MATH));  // FP32, no TF32
      int found = 0;
      cudnnConvolutionFwdAlgoPerf_t fwd;
      PSB_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(cudnn_, src.desc, node.filter, node.conv,
                                                       out.desc, 1, &found, &fwd));
      node.fwd_algo = fwd.algo;
      cudnnConvolutionBwdFilterAlgoPerf_t bwf;
      PSB_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnn_, src.desc, out.desc, node.conv,
                                                              node.filter, 1, &found, &bwf));
      node.bwd_filter_algo = bwf.algo;
      cudnnConvolutionBwdDataAlgoPerf_t bwd;
      PSB_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnn_, node.filter, out.desc, node.conv,
                                                            src.desc, 1, &found, &bwd));
      node.bwd_data_algo = bwd.algo;
      Workspace(std::max({fwd.memory, bwf.memory, bwd.memory}));
      add_param(layer.params[0]);
      if (layer.bias) {
        add_param(layer.params[1]);
        channel_desc(layer.outputs);
      }
      return absl::OkStatus();
    }
    case LayerKind::kBatchNorm:
      channel_desc(layer.out.c);
      add_param(layer.params[0]);
      add_param(layer.params[1]);
      node.save_mean = DeviceFloats(layer.out.c);
      node.save_inv_var = DeviceFloats(layer.out.c);
      return absl::OkStatus();
    case LayerKind::kRelu:
    case LayerKind::kConcat:
    case LayerKind::kAdd:
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
      return absl::OkStatus();
    case LayerKind::kFullyConnected:
      add_param(layer.params[0]);
      add_param(layer.params[1]);
      return absl::OkStatus();
    case LayerKind::kSoftmaxCrossEntropy:
      return absl::OkStatus();
  }
  return absl::OkStatus();
}


absl::Status CudnnNetwork::Bind(std::span<float* const> values, std::span<float* const> grads) {
  if (values.size() != params_.size() || grads.size() != params_.size())
    return absl::InvalidArgumentError("Bind: one value and one gradient buffer per parameter");
  host_values_.assign(values.begin(), values.end());
  host_grads_.assign(grads.begin(), grads.end());
  return absl::OkStatus();
}

void CudnnNetwork::WriteParam(int p, std::span<const float> values) {
  std::memcpy(host_values_[p], values.data(), params_[p].bytes);
  PSB_CUDA(cudaMemcpy(device_values_[p], values.data(), params_[p].bytes, cudaMemcpyHostToDevice));
}

std::vector<float> CudnnNetwork::ReadParam(int p) {
  std::vector<float> out(params_[p].count);
  PSB_CUDA(cudaMemcpy(out.data(), device_values_[p], params_[p].bytes, cudaMemcpyDeviceToHost));
  return out;
}

std::vector<float> CudnnNetwork::ReadGrad(int p) {
  std::vector<float> out(params_[p].count);
  PSB_CUDA(cudaMemcpy(out.data(), device_grads_[p], params_[p].bytes, cudaMemcpyDeviceToHost));
  return out;
}

void CudnnNetwork::ParamsChanged() {
  for (size_t p = 0; p < params_.size(); ++p)
    PSB_CUDA(cudaMemcpy(device_values_[p], host_values_[p], params_[p].bytes, cudaMemcpyHostToDevice));
}

void CudnnNetwork::SetBatch(std::span<const float> images, std::span<const int> labels) {
  Tensor& input = tensors_[0];
  PSB_CUDA(cudaMemcpy(input.value, images.data(),
                      std::min(images.size(), input.count) * sizeof(float), cudaMemcpyHostToDevice));
  std::copy_n(labels.begin(), std::min<size_t>(labels.size(), labels_.size()), labels_.begin());
}

void CudnnNetwork::ReluForward(Tensor& t) {
  const float one = 1.f, zero = 0.f;
  PSB_CUDNN(cudnnActivationForward(cudnn_, relu_, &one, t.desc, t.value, &zero, t.desc, t.value));
}

float* CudnnNetwork::ReluBackward(int index) {
  Tensor& out = tensors_[index];
  Node& node = nodes_[index];
  const float one = 1.f, zero = 0.f;
  // ReLU's gradient depends only on where its output is positive: y stands in for x.
  PSB_CUDNN(cudnnActivationBackward(cudnn_, relu_, &one, out.desc, out.value, out.desc, out.diff,
                                    out.desc, out.value, &zero, out.desc, node.relu_diff));
  return node.relu_diff;
}

void CudnnNetwork::ForwardLayer(int index) {
  const Layer& layer = model_.layers[index];
  Tensor& out = tensors_[index];
  Node& node = nodes_[index];
  const float one = 1.f, zero = 0.f;
  switch (layer.kind) {
    case LayerKind::kInput:
    case LayerKind::kSoftmaxCrossEntropy:
      return;
    case LayerKind::kConvolution: {
      Tensor& src = tensors_[layer.inputs[0]];
      PSB_CUDNN(cudnnConvolutionForward(cudnn_, &one, src.desc, src.value, node.filter,
                                        node.value[0], node.conv, node.fwd_algo, workspace_,
                                        workspace_bytes_, &zero, out.desc, out.value));
      if (layer.bias)
        PSB_CUDNN(cudnnAddTensor(cudnn_, &one, node.bias_desc, node.value[1], &one, out.desc, out.value));
      if (layer.relu) ReluForward(out);
      return;
    }
    case LayerKind::kBatchNorm: {
      Tensor& src = tensors_[layer.inputs[0]];
      PSB_CUDNN(cudnnBatchNormalizationForwardTraining(
          cudnn_, CUDNN_BATCHNORM_SPATIAL, &one, &zero, src.desc, src.value, out.desc, out.value,
          node.bias_desc, node.value[0], node.value[1], 0.0, nullptr, nullptr,
          std::max<double>(layer.epsilon, CUDNN_BN_MIN_EPSILON), node.save_mean, node.save_inv_var));
      if (layer.relu) ReluForward(out);
      return;
    }
    case LayerKind::kRelu: {
      Tensor& src = tensors_[layer.inputs[0]];
      PSB_CUDNN(cudnnActivationForward(cudnn_, relu_, &one, src.desc, src.value, &zero, out.desc, out.value));
      return;
    }
    case LayerKind::kMaxPool:
    case LayerKind::kAvgPool: {
      Tensor& src = tensors_[layer.inputs[0]];
      PSB_CUDNN(cudnnPoolingForward(cudnn_, node.pool, &one, src.desc, src.value, &zero, out.desc, out.value));
      return;
    }
    case LayerKind::kLrn: {
      Tensor& src = tensors_[layer.inputs[0]];
      PSB_CUDNN(cudnnLRNCrossChannelForward(cudnn_, node.lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one,
                                            src.desc, src.value, &zero, out.desc, out.value));
      return;
    }
    case LayerKind::kFullyConnected: {
      // Row-major out[N][O] = in[N][K] W[O][K]^T + b: in cuBLAS's column-major terms
      // out(OxN) = W^T(OxK) in(KxN), then out += b 1^T.
      Tensor& src = tensors_[layer.inputs[0]];
      const int k = static_cast<int>(model_.layers[layer.inputs[0]].out.elements());
      const int o = layer.outputs;
      PSB_CUBLAS(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, o, batch_, k, &one, node.value[0],
                             k, src.value, k, &zero, out.value, o));
      PSB_CUBLAS(cublasSger(cublas_, o, batch_, &one, node.value[1], 1, ones_, 1, out.value, o));
      if (layer.relu) ReluForward(out);
      return;
    }
    case LayerKind::kConcat: {
      // NCHW: each image's slice of channels is one contiguous run.
      const size_t out_image = layer.out.elements();
      size_t offset = 0;
      for (int in : layer.inputs) {
        const size_t in_image = model_.layers[in].out.elements();
        PSB_CUDA(cudaMemcpy2D(out.value + offset, out_image * sizeof(float), tensors_[in].value,
                              in_image * sizeof(float), in_image * sizeof(float), batch_,
                              cudaMemcpyDeviceToDevice));
        offset += in_image;
      }
      return;
    }
    case LayerKind::kAdd: {
      Tensor& a = tensors_[layer.inputs[0]];
      Tensor& b = tensors_[layer.inputs[1]];
      PSB_CUDA(cudaMemcpy(out.value, a.value, out.count * sizeof(float), cudaMemcpyDeviceToDevice));
      PSB_CUBLAS(cublasSaxpy(cublas_, static_cast<int>(out.count), &one, b.value, 1, out.value, 1));
      return;
    }
  }
}

void CudnnNetwork::BackwardLayer(int index, const std::function<void(int)>& ready) {
  const Layer& layer = model_.layers[index];
  Tensor& out = tensors_[index];
  Node& node = nodes_[index];
  const float one = 1.f, zero = 0.f;
  const int in0 = layer.inputs.empty() ? 0 : layer.inputs[0];
  Tensor& src = tensors_[in0];
  const bool data = in0 != 0;  // the images need no gradient
  auto params_ready = [&] {
    for (size_t k = 0; k < node.params.size(); ++k) {
      const int p = node.params[k];
      PSB_CUDA(cudaMemcpy(host_grads_[p], device_grads_[p], params_[p].bytes, cudaMemcpyDeviceToHost));
      ready(p);
    }
  };
  switch (layer.kind) {
    case LayerKind::kInput:
    case LayerKind::kSoftmaxCrossEntropy:
      return;
    case LayerKind::kConvolution: {
      float* dy = layer.relu ? ReluBackward(index) : out.diff;
      if (layer.bias)
        PSB_CUDNN(cudnnConvolutionBackwardBias(cudnn_, &one, out.desc, dy, &zero, node.bias_desc, node.grad[1]));
      PSB_CUDNN(cudnnConvolutionBackwardFilter(cudnn_, &one, src.desc, src.value, out.desc, dy,
                                               node.conv, node.bwd_filter_algo, workspace_,
                                               workspace_bytes_, &zero, node.filter, node.grad[0]));
      params_ready();
      if (data) {
        const float beta = Beta(in0);
        PSB_CUDNN(cudnnConvolutionBackwardData(cudnn_, &one, node.filter, node.value[0], out.desc, dy,
                                               node.conv, node.bwd_data_algo, workspace_,
                                               workspace_bytes_, &beta, src.desc, src.diff));
        Written(in0);
      }
      return;
    }
    case LayerKind::kBatchNorm: {
      float* dy = layer.relu ? ReluBackward(index) : out.diff;
      const float beta = Beta(in0);
      PSB_CUDNN(cudnnBatchNormalizationBackward(
          cudnn_, CUDNN_BATCHNORM_SPATIAL, &one, &beta, &one, &zero, src.desc, src.value, out.desc,
          dy, src.desc, src.diff, node.bias_desc, node.value[0], node.grad[0], node.grad[1],
          std::max<double>(layer.epsilon, CUDNN_BN_MIN_EPSILON), node.save_mean, node.save_inv_var));
      Written(in0);
      params_ready();
      return;
    }
    case LayerKind::kRelu: {
      if (!data) return;
      const float beta = Beta(in0);
      PSB_CUDNN(cudnnActivationBackward(cudnn_, relu_, &one, out.desc, out.value, out.desc, out.diff,
                                        src.desc, src.value, &beta, src.desc, src.diff));
      Written(in0);
      return;
    }
    case LayerKind::kMaxPool:
    case LayerKind::kAvgPool: {
      if (!data) return;
      const float beta = Beta(in0);
      PSB_CUDNN(cudnnPoolingBackward(cudnn_, node.pool, &one, out.desc, out.value, out.desc, out.diff,
                                     src.desc, src.value, &beta, src.desc, src.diff));
      Written(in0);
      return;
    }
    case LayerKind::kLrn: {
      if (!data) return;
      const float beta = Beta(in0);
      PSB_CUDNN(cudnnLRNCrossChannelBackward(cudnn_, node.lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one,
                                             out.desc, out.value, out.desc, out.diff, src.desc,
                                             src.value, &beta, src.desc, src.diff));
      Written(in0);
      return;
    }
    case LayerKind::kFullyConnected: {
      float* dy = layer.relu ? ReluBackward(index) : out.diff;
      const int k = static_cast<int>(model_.layers[in0].out.elements());
      const int o = layer.outputs;
      // dW(row-major OxK) = dy^T in: column-major dW(KxO) = in(KxN) dy(OxN)^T.
      PSB_CUBLAS(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_T, k, o, batch_, &one, src.value, k,
                             dy, o, &zero, node.grad[0], k));
      // db = dy summed over the batch.
      PSB_CUBLAS(cublasSgemv(cublas_, CUBLAS_OP_N, o, batch_, &one, dy, o, ones_, 1, &zero, node.grad[1], 1));
      params_ready();
      if (data) {
        // din(KxN) = W(KxO, column-major view of row-major OxK) dy(OxN).
        const float beta = Beta(in0);
        PSB_CUBLAS(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, k, batch_, o, &one, node.value[0],
                               k, dy, o, &beta, src.diff, k));
        Written(in0);
      }
      return;
    }
    case LayerKind::kConcat: {
      const size_t out_image = layer.out.elements();
      size_t offset = 0;
      for (int in : layer.inputs) {
        const size_t in_image = model_.layers[in].out.elements();
        Tensor& t = tensors_[in];
        if (in != 0) {
          if (!t.diff_written) {
            PSB_CUDA(cudaMemcpy2D(t.diff, in_image * sizeof(float), out.diff + offset,
                                  out_image * sizeof(float), in_image * sizeof(float), batch_,
                                  cudaMemcpyDeviceToDevice));
          } else {
            // Accumulate image by image (the slices are strided in the concatenation).
            for (int n = 0; n < batch_; ++n) {
              PSB_CUBLAS(cublasSaxpy(cublas_, static_cast<int>(in_image), &one,
                                     out.diff + n * out_image + offset, 1, t.diff + n * in_image, 1));
            }
          }
          Written(in);
        }
        offset += in_image;
      }
      return;
    }
    case LayerKind::kAdd: {
      for (int in : layer.inputs) {
        if (in == 0) continue;
        Tensor& t = tensors_[in];
        if (!t.diff_written) {
          PSB_CUDA(cudaMemcpy(t.diff, out.diff, out.count * sizeof(float), cudaMemcpyDeviceToDevice));
        } else {
          PSB_CUBLAS(cublasSaxpy(cublas_, static_cast<int>(out.count), &one, out.diff, 1, t.diff, 1));
        }
        Written(in);
      }
      return;
    }
  }
}

double CudnnNetwork::Forward() {
  for (size_t i = 1; i + 1 < model_.layers.size(); ++i) {
    const auto start = Clock::now();
    ForwardLayer(static_cast<int>(i));
    PSB_CUDA(cudaDeviceSynchronize());
    times_[i].forward_s = std::chrono::duration<double>(Clock::now() - start).count();
  }
  const auto start = Clock::now();
  const int in = model_.loss().inputs[0];
  PSB_CUDA(cudaMemcpy(logits_.data(), tensors_[in].value, logits_.size() * sizeof(float),
                      cudaMemcpyDeviceToHost));
  const double loss = SoftmaxCrossEntropy(logits_.data(), labels_.data(), batch_,
                                         model_.num_classes, logits_diff_.data());
  times_.back().forward_s = std::chrono::duration<double>(Clock::now() - start).count();
  return loss;
}

void CudnnNetwork::Backward(const std::function<void(int)>& ready) {
  for (Tensor& t : tensors_) t.diff_written = false;
  const int in = model_.loss().inputs[0];
  PSB_CUDA(cudaMemcpy(tensors_[in].diff, logits_diff_.data(), logits_diff_.size() * sizeof(float),
                      cudaMemcpyHostToDevice));
  for (size_t i = model_.layers.size() - 2; i >= 1; --i) {
    const auto start = Clock::now();
    BackwardLayer(static_cast<int>(i), ready);
    PSB_CUDA(cudaDeviceSynchronize());
    times_[i].backward_s = std::chrono::duration<double>(Clock::now() - start).count();
  }
}

}  // namespace

extern "C" Network* PsbenchMakeCudnnNetwork(const Model* model, int batch, int* code,
                                            std::string* error) {
  auto network = std::make_unique<CudnnNetwork>(*model, batch);
  if (absl::Status s = network->Build(); !s.ok()) {
    *code = static_cast<int>(s.code());
    *error = std::string(s.message());
    return nullptr;
  }
  return network.release();
}

}  // namespace psbench::trainer
