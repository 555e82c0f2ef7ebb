// The GPU engine on cuDNN (convolution, pooling, LRN, batch norm, activations) and cuBLAS
// (fully connected layers, gradient sums). Activations are NCHW on the device; parameters
// live on the device in the canonical layout (OIHW, OI, C), so host and device copies are
// plain memcpys: the trainer's host buffers (what goes to the PS) are copied in after a pull
// (ParamsChanged) and each layer's gradients are copied out as soon as backward produced
// them, on a second stream into pinned host memory, overlapping the rest of the backward
// pass. Gradients of tensors read by several layers accumulate through cuDNN's and cuBLAS's
// beta = 1. The loss (softmax cross-entropy over N x classes) is computed on the host.
// Layers are timed with CUDA events, so timing does not serialize the device.
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
  for (auto* list : {&forward_events_, &backward_events_, &grad_done_, &copy_start_, &copied_})
    for (cudaEvent_t e : *list) cudaEventDestroy(e);
  for (void* p : pinned_) cudaHostUnregister(p);
  for (float* p : device_values_) cudaFree(p);
  for (float* p : device_grads_) cudaFree(p);
  cudaFree(ones_);
  cudaFree(workspace_);
  if (relu_) cudnnDestroyActivationDescriptor(relu_);
  if (cublas_) cublasDestroy(cublas_);
  if (cudnn_) cudnnDestroy(cudnn_);
  // After the handles that use them.
  if (copy_stream_) cudaStreamDestroy(copy_stream_);
  if (stream_) cudaStreamDestroy(stream_);
}

void* CudnnNetwork::Workspace(size_t bytes) {
  if (bytes > workspace_bytes_) {
    cudaFree(workspace_);
    PSB_CUDA(cudaMalloc(&workspace_, bytes));
    workspace_bytes_ = bytes;
  }
  return workspace_;
}

namespace {

// Dense FLOP per clock per SM, by compute capability, from NVIDIA's architecture papers
// (A100: 19.5 TFLOP/s FP32, 156 TF32; H100 SXM: 67 FP32, 495 TF32 at its tensor clock).
struct PerSm {
  int major, minor;
  double fp32, tf32;
};
constexpr PerSm kPerSm[] = {{7, 0, 128, 0},   {7, 5, 128, 0},    {8, 0, 128, 1024}, {8, 6, 256, 256},
                            {8, 7, 256, 256}, {8, 9, 256, 256},  {9, 0, 256, 2048}};

std::optional<PeakEstimate> GpuPeak(const cudaDeviceProp& prop, Math math) {
  int khz = 0;
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
  for (const PerSm& r : kPerSm) {
    if (r.major != prop.major || r.minor != prop.minor) continue;
    const double per_clock = math == Math::kTf32 ? r.tf32 : r.fp32;
    if (per_clock == 0) return std::nullopt;
    PeakEstimate peak;
    peak.gflops = prop.multiProcessorCount * (khz * 1e-6) * per_clock;
    peak.basis = absl::StrCat(prop.multiProcessorCount, " SMs x ", khz / 1000, " MHz (the device's maximum clock) x ",
                              per_clock, math == Math::kTf32 ? " dense TF32 tensor-core" : " FP32 FMA",
                              " FLOP/cycle/SM (sm_", prop.major, prop.minor, ")");
    return peak;
  }
  return std::nullopt;
}

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

absl::Status CudnnNetwork::Build() {
  if (batch_ < 1) return absl::InvalidArgumentError("batch must be >= 1");
  int devices = 0;
  if (cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--engine=gpu: no CUDA device (", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices", ")"));
  }
  if (math_ == Math::kBf16) {
    return absl::InvalidArgumentError(
        "--math=bf16: the GPU engine keeps activations and parameters in FP32, and cuDNN's "
        "convolutions take no bf16 arithmetic on FP32 tensors; use --math=tf32 or fp32");
  }
  cudaDeviceProp prop{};
  PSB_CUDA(cudaGetDeviceProperties(&prop, 0));
  if (cudnnCreate(&cudnn_) != CUDNN_STATUS_SUCCESS)
    return absl::FailedPreconditionError("--engine=gpu: cudnnCreate failed");
  if (cublasCreate(&cublas_) != CUBLAS_STATUS_SUCCESS)
    return absl::FailedPreconditionError("--engine=gpu: cublasCreate failed");
  PSB_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  PSB_CUDA(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
  PSB_CUDNN(cudnnSetStream(cudnn_, stream_));
  PSB_CUBLAS(cublasSetStream(cublas_, stream_));
  // fp32 is plain FP32 FMA everywhere (no TF32, whatever the library's default); tf32 lets
  // convolutions and matrix products use tensor cores with TF32 inputs and FP32 accumulation.
  PSB_CUBLAS(cublasSetMathMode(cublas_, math_ == Math::kTf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH));
  PSB_CUDNN(cudnnCreateActivationDescriptor(&relu_));
  PSB_CUDNN(cudnnSetActivationDescriptor(relu_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  description_ = absl::StrCat("cuDNN ", cudnnGetVersion(), ", cuBLAS, CUDA runtime ", runtime,
                              " driver ", driver, " (gpu: ", prop.name, ", ", MathName(math_), ")");
  peak_ = GpuPeak(prop, math_);
  const size_t events = model_.layers.size() + 1;
  for (auto* list : {&forward_events_, &backward_events_}) {
    list->resize(events);
    for (cudaEvent_t& e : *list) PSB_CUDA(cudaEventCreate(&e));
  }
  tensors_.resize(model_.layers.size());
  nodes_.resize(model_.layers.size());
  times_.assign(model_.layers.size(), {});
  std::vector<float> ones(batch_, 1.f);
  ones_ = DeviceFloats(batch_);
  PSB_CUDA(cudaMemcpyAsync(ones_, ones.data(), batch_ * sizeof(float), cudaMemcpyHostToDevice, stream_));
  PSB_CUDA(cudaStreamSynchronize(stream_));
  for (size_t i = 0; i < model_.layers.size(); ++i) {
    if (absl::Status s = BuildLayer(static_cast<int>(i)); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat(model_.name, " layer ", model_.layers[i].name,
                                                     ": ", s.message()));
  }
  for (auto* list : {&grad_done_, &copy_start_, &copied_}) {
    list->resize(params_.size());
    for (cudaEvent_t& e : *list) PSB_CUDA(cudaEventCreate(&e));
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
      PSB_CUDNN(cudnnCreateFilterDescriptor(&node.filter));
      PSB_CUDNN(cudnnSetFilter4dDescriptor(node.filter, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                           layer.outputs, in.c, layer.kernel_h, layer.kernel_w));
      PSB_CUDNN(cudnnCreateConvolutionDescriptor(&node.conv));
      PSB_CUDNN(cudnnSetConvolution2dDescriptor(node.conv, layer.pad_top, layer.pad_left,
                                                layer.stride_h, layer.stride_w, 1, 1,
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
      if (absl::Status s = ChooseConvolution(index); !s.ok()) return s;
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
  PinHostMemory();
  return absl::OkStatus();
}

// Copies between the device and pinned memory run at the bus's speed and asynchronously;
// from pageable memory they are staged through a driver buffer. Exactly the bound bytes are
// registered (adjacent or overlapping buffers merged into one range): rounding out to whole
// pages would take in neighbouring allocations, and a copy from a buffer that is registered
// in part fails.
void CudnnNetwork::PinHostMemory() {
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
  for (size_t p = 0; p < params_.size(); ++p) {
    for (float* ptr : {host_values_[p], host_grads_[p]}) {
      const auto begin = reinterpret_cast<uintptr_t>(ptr);
      ranges.push_back({begin, begin + params_[p].bytes});
    }
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<uintptr_t, uintptr_t>> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  size_t pinned_bytes = 0;
  for (const auto& [begin, end] : merged) {
    void* ptr = reinterpret_cast<void*>(begin);
    if (cudaHostRegister(ptr, end - begin, cudaHostRegisterPortable) == cudaSuccess) {
      pinned_.push_back(ptr);
      pinned_bytes += end - begin;
    } else {
      cudaGetLastError();  // pageable then: slower copies, same results
    }
  }
  description_ += absl::StrCat(", host buffers ", pinned_bytes == 0 ? "pageable" : "pinned");
  if (pinned_bytes != 0 && pinned_.size() != merged.size()) description_ += " (in part)";
}

void CudnnNetwork::WriteParam(int p, std::span<const float> values) {
  std::memcpy(host_values_[p], values.data(), params_[p].bytes);
  PSB_CUDA(cudaMemcpyAsync(device_values_[p], values.data(), params_[p].bytes, cudaMemcpyHostToDevice, stream_));
  PSB_CUDA(cudaStreamSynchronize(stream_));
}

std::vector<float> CudnnNetwork::ReadParam(int p) {
  std::vector<float> out(params_[p].count);
  PSB_CUDA(cudaStreamSynchronize(stream_));
  PSB_CUDA(cudaMemcpy(out.data(), device_values_[p], params_[p].bytes, cudaMemcpyDeviceToHost));
  return out;
}

std::vector<float> CudnnNetwork::ReadGrad(int p) {
  std::vector<float> out(params_[p].count);
  PSB_CUDA(cudaStreamSynchronize(stream_));
  PSB_CUDA(cudaMemcpy(out.data(), device_grads_[p], params_[p].bytes, cudaMemcpyDeviceToHost));
  return out;
}

void CudnnNetwork::ParamsChanged() {
  // Synchronous: the host buffers may be rewritten (the next pull) once this returns.
  for (size_t p = 0; p < params_.size(); ++p) {
    PSB_CUDA(cudaMemcpyAsync(device_values_[p], host_values_[p], params_[p].bytes,
                             cudaMemcpyHostToDevice, stream_));
  }
  PSB_CUDA(cudaStreamSynchronize(stream_));
}

void CudnnNetwork::SetBatch(std::span<const float> images, std::span<const int> labels) {
  Tensor& input = tensors_[0];
  PSB_CUDA(cudaMemcpyAsync(input.value, images.data(), std::min(images.size(), input.count) * sizeof(float),
                           cudaMemcpyHostToDevice, stream_));
  PSB_CUDA(cudaStreamSynchronize(stream_));  // `images` is the caller's, pageable
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

void CudnnNetwork::ReadLayerTimes(const std::vector<cudaEvent_t>& events, bool forward) {
  for (size_t i = 1; i + 1 < model_.layers.size(); ++i) {
    float ms = 0;
    // Backward runs the layers last to first: layer i's time is from event i+1 to event i.
    PSB_CUDA(forward ? cudaEventElapsedTime(&ms, events[i], events[i + 1])
                     : cudaEventElapsedTime(&ms, events[i + 1], events[i]));
    (forward ? times_[i].forward_s : times_[i].backward_s) = ms * 1e-3;
  }
}

double CudnnNetwork::Forward() {
  const size_t last = model_.layers.size() - 1;  // the loss, on the host
  for (size_t i = 1; i < last; ++i) {
    PSB_CUDA(cudaEventRecord(forward_events_[i], stream_));
    ForwardLayer(static_cast<int>(i));
  }
  PSB_CUDA(cudaEventRecord(forward_events_[last], stream_));
  const int in = model_.loss().inputs[0];
  PSB_CUDA(cudaMemcpyAsync(logits_.data(), tensors_[in].value, logits_.size() * sizeof(float),
                           cudaMemcpyDeviceToHost, stream_));
  PSB_CUDA(cudaStreamSynchronize(stream_));
  ReadLayerTimes(forward_events_, true);
  const auto start = Clock::now();
  const double loss = SoftmaxCrossEntropy(logits_.data(), labels_.data(), batch_,
                                         model_.num_classes, logits_diff_.data());
  times_.back().forward_s = std::chrono::duration<double>(Clock::now() - start).count();
  return loss;
}

void CudnnNetwork::StageGradient(int p) {
  PSB_CUDA(cudaEventRecord(grad_done_[p], stream_));
  PSB_CUDA(cudaStreamWaitEvent(copy_stream_, grad_done_[p], 0));
  PSB_CUDA(cudaEventRecord(copy_start_[p], copy_stream_));
  PSB_CUDA(cudaMemcpyAsync(host_grads_[p], device_grads_[p], params_[p].bytes, cudaMemcpyDeviceToHost,
                           copy_stream_));
  PSB_CUDA(cudaEventRecord(copied_[p], copy_stream_));
  staged_.push_back(p);
}

void CudnnNetwork::Backward(const std::function<void(int)>& ready) {
  for (Tensor& t : tensors_) t.diff_written = false;
  staged_.clear();
  const int in = model_.loss().inputs[0];
  PSB_CUDA(cudaMemcpyAsync(tensors_[in].diff, logits_diff_.data(), logits_diff_.size() * sizeof(float),
                           cudaMemcpyHostToDevice, stream_));
  const size_t last = model_.layers.size() - 1;
  PSB_CUDA(cudaEventRecord(backward_events_[last], stream_));
  for (size_t i = last - 1; i >= 1; --i) {
    BackwardLayer(static_cast<int>(i));
    PSB_CUDA(cudaEventRecord(backward_events_[i], stream_));
  }
  // The host learns of each gradient once its copy landed, in the order they were produced.
  for (int p : staged_) {
    PSB_CUDA(cudaEventSynchronize(copied_[p]));
    ready(p);
  }
  PSB_CUDA(cudaStreamSynchronize(stream_));
  ReadLayerTimes(backward_events_, false);
  staging_.device_to_host_s = 0;
  for (int p : staged_) {
    float ms = 0;
    PSB_CUDA(cudaEventElapsedTime(&ms, copy_start_[p], copied_[p]));
    staging_.device_to_host_s += ms * 1e-3;
  }
  float exposed_ms = 0;
  if (!staged_.empty()) PSB_CUDA(cudaEventElapsedTime(&exposed_ms, backward_events_[1], copied_[staged_.back()]));
  staging_.exposed_s = std::max(0.f, exposed_ms) * 1e-3;
}

}  // namespace cudnn_engine

extern "C" Network* PsbenchMakeCudnnNetwork(const Model* model, int batch, int math, int* code,
                                            std::string* error) {
  auto network = std::make_unique<cudnn_engine::CudnnNetwork>(*model, batch, static_cast<Math>(math));
  if (absl::Status s = network->Build(); !s.ok()) {
    *code = static_cast<int>(s.code());
    *error = std::string(s.message());
    return nullptr;
  }
  return network.release();
}

}  // namespace psbench::trainer
