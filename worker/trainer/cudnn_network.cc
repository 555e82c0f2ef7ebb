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
#include "worker/trainer/cudnn_internal.h"
#include "worker/trainer/loss.h"

namespace psbench::trainer {
namespace cudnn_engine {

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

}  // namespace cudnn_engine

extern "C" Network* PsbenchMakeCudnnNetwork(const Model* model, int batch, int* code,
                                            std::string* error) {
  auto network = std::make_unique<cudnn_engine::CudnnNetwork>(*model, batch);
  if (absl::Status s = network->Build(); !s.ok()) {
    *code = static_cast<int>(s.code());
    *error = std::string(s.message());
    return nullptr;
  }
  return network.release();
}

}  // namespace psbench::trainer
