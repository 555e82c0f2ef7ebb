// The GPU engine on cuDNN (convolution, pooling, LRN, batch norm, activations, softmax) and
// cuBLAS (fully connected layers, gradient sums). Activations are NCHW or NHWC on the device
// (--layout; NHWC convolutions read KRSC copies of their filters); parameters live on the
// device in the canonical layout (OIHW, OI, C), so host and device copies are
// plain memcpys: the trainer's host buffers (what goes to the PS) are copied in after a pull
// (ParamsChanged) and each layer's gradients are copied out as soon as backward produced
// them, on a second stream into pinned host memory, overlapping the rest of the backward
// pass. Gradients of tensors read by several layers accumulate through cuDNN's and cuBLAS's
// beta = 1. The loss (softmax cross-entropy over N x classes) is computed on the device.
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

namespace psbench::trainer {
namespace cudnn_engine {

CudnnNetwork::~CudnnNetwork() {
  // Plans before the handle they were made with.
  for (Node& n : nodes_)
    for (GraphConv& g : n.graph) g = GraphConv();
  for (Node& n : nodes_) {
    if (n.filter) cudnnDestroyFilterDescriptor(n.filter);
    if (n.conv) cudnnDestroyConvolutionDescriptor(n.conv);
    if (n.pool) cudnnDestroyPoolingDescriptor(n.pool);
    if (n.lrn) cudnnDestroyLRNDescriptor(n.lrn);
  }
  for (cudnnTensorDescriptor_t d : descriptors_) cudnnDestroyTensorDescriptor(d);
  for (auto* list : {&forward_events_, &backward_events_, &grad_done_, &copy_start_, &copied_})
    for (cudaEvent_t e : *list) cudaEventDestroy(e);
  for (void* p : pinned_) cudaHostUnregister(p);
  for (float* p : allocations_) cudaFree(p);
  cudaFree(workspace_);
  cudaFree(bn_partials_);
  if (add_) cudnnDestroyOpTensorDescriptor(add_);
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

}  // namespace

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
  PSB_CUDNN(cudnnCreateOpTensorDescriptor(&add_));
  PSB_CUDNN(cudnnSetOpTensorDescriptor(add_, CUDNN_OP_TENSOR_ADD, CUDNN_DATA_FLOAT, CUDNN_NOT_PROPAGATE_NAN));
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  description_ = absl::StrCat("cuDNN ", cudnnGetVersion(), ", cuBLAS, CUDA runtime ", runtime,
                              " driver ", driver, " (gpu: ", prop.name, ", ", MathName(math_), ", ", layout(), ")");
  peak_ = GpuPeak(prop, math_);
  description_ += own_batch_norm() ? ", batch norm: psbench kernels" : ", batch norm: cuDNN";
  const size_t events = model_.layers.size() + 1;
  for (auto* list : {&forward_events_, &backward_events_}) {
    list->resize(events);
    for (cudaEvent_t& e : *list) PSB_CUDA(cudaEventCreate(&e));
  }
  tensors_.resize(model_.layers.size());
  nodes_.resize(model_.layers.size());
  times_.assign(model_.layers.size(), {});
  std::vector<float> ones(batch_, 1.f);
  ones_ = Alloc(batch_);
  PSB_CUDA(cudaMemcpyAsync(ones_, ones.data(), batch_ * sizeof(float), cudaMemcpyHostToDevice, stream_));
  PSB_CUDA(cudaStreamSynchronize(stream_));
  for (size_t i = 0; i < model_.layers.size(); ++i) {
    if (absl::Status s = BuildLayer(static_cast<int>(i)); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat(model_.name, " layer ", model_.layers[i].name,
                                                     ": ", s.message()));
  }
  TuneConvolutions();
  const auto fused = std::count_if(nodes_.begin(), nodes_.end(), [](const Node& n) { return n.fused_relu >= 0; });
  if (fused != 0) description_ += absl::StrCat(", ", fused, " add+ReLU fused");
  size_t partials = 0;
  for (size_t i = 0; i < model_.layers.size(); ++i) {
    if (model_.layers[i].kind == LayerKind::kBatchNorm && own_batch_norm())
      partials = std::max(partials, gpu_kernels::BnPartials(BnShapeOf(static_cast<int>(i))));
  }
  if (partials != 0) {
    void* p = nullptr;
    PSB_CUDA(cudaMalloc(&p, 2 * partials * sizeof(double)));
    bn_partials_ = static_cast<double*>(p);
  }
  for (auto* list : {&grad_done_, &copy_start_, &copied_}) {
    list->resize(params_.size());
    for (cudaEvent_t& e : *list) PSB_CUDA(cudaEventCreate(&e));
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
  FiltersToDevice(params_[p].layer);
  PSB_CUDA(cudaStreamSynchronize(stream_));
}

void CudnnNetwork::FiltersToDevice(int layer) {
  Node& node = nodes_[layer];
  if (node.filter_value == nullptr) return;
  const float one = 1.f, zero = 0.f;
  PSB_CUDNN(cudnnTransformTensor(cudnn_, &one, node.kcrs, node.value[0], &zero, node.krsc, node.filter_value));
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
  for (size_t i = 0; i < nodes_.size(); ++i) FiltersToDevice(static_cast<int>(i));
  PSB_CUDA(cudaStreamSynchronize(stream_));
}

void CudnnNetwork::SetBatch(std::span<const float> images, std::span<const int> labels) {
  Tensor& input = tensors_[0];
  PSB_CUDA(cudaMemcpyAsync(nhwc_ ? images_ : input.value, images.data(),
                           std::min(images.size(), input.count) * sizeof(float), cudaMemcpyHostToDevice, stream_));
  const float one = 1.f, zero = 0.f;
  if (nhwc_) PSB_CUDNN(cudnnTransformTensor(cudnn_, &one, images_desc_, images_, &zero, input.desc, input.value));
  std::copy_n(labels.begin(), std::min<size_t>(labels.size(), labels_.size()), labels_.begin());
  const int classes = model_.num_classes;
  std::fill(one_hot_host_.begin(), one_hot_host_.end(), 0.f);
  for (int n = 0; n < batch_; ++n)
    if (labels_[n] >= 0 && labels_[n] < classes) one_hot_host_[size_t(n) * classes + labels_[n]] = 1.f;
  PSB_CUDA(cudaMemcpyAsync(one_hot_, one_hot_host_.data(), one_hot_host_.size() * sizeof(float),
                           cudaMemcpyHostToDevice, stream_));
  PSB_CUDA(cudaStreamSynchronize(stream_));  // `images` is the caller's, pageable
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
  // The loss (the last layer) has a forward time only: its gradient is computed with it.
  const size_t end = forward ? model_.layers.size() : model_.layers.size() - 1;
  for (size_t i = 1; i < end; ++i) {
    float ms = 0;
    // Backward runs the layers last to first: layer i's time is from event i+1 to event i.
    PSB_CUDA(forward ? cudaEventElapsedTime(&ms, events[i], events[i + 1])
                     : cudaEventElapsedTime(&ms, events[i + 1], events[i]));
    (forward ? times_[i].forward_s : times_[i].backward_s) = ms * 1e-3;
  }
}

double CudnnNetwork::Forward() {
  const size_t last = model_.layers.size() - 1;  // the loss
  for (size_t i = 1; i < last; ++i) {
    PSB_CUDA(cudaEventRecord(forward_events_[i], stream_));
    ForwardLayer(static_cast<int>(i));
  }
  PSB_CUDA(cudaEventRecord(forward_events_[last], stream_));
  const double loss = LossForward();
  PSB_CUDA(cudaEventRecord(forward_events_[last + 1], stream_));
  PSB_CUDA(cudaStreamSynchronize(stream_));
  ReadLayerTimes(forward_events_, true);
  return loss;
}

// Softmax cross-entropy on the device (the host would leave the GPU idle for a round trip
// and a core's worth of exponentials): the mean of -log softmax at each label, and the
// gradient (softmax - one-hot) / N, which Backward starts from.
double CudnnNetwork::LossForward() {
  const float one = 1.f, zero = 0.f;
  const float scale = 1.f / static_cast<float>(batch_), minus = -scale;
  Tensor& logits = tensors_[model_.loss().inputs[0]];
  PSB_CUDNN(cudnnSoftmaxForward(cudnn_, CUDNN_SOFTMAX_LOG, CUDNN_SOFTMAX_MODE_INSTANCE, &one, logits_desc_,
                                logits.value, &zero, logits_desc_, log_probs_));
  PSB_CUDNN(cudnnSoftmaxForward(cudnn_, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, &one, logits_desc_,
                                logits.value, &zero, logits_desc_, logits.diff));
  PSB_CUDNN(cudnnAddTensor(cudnn_, &minus, logits_desc_, one_hot_, &scale, logits_desc_, logits.diff));
  float dot = 0;  // with the host pointer mode, cuBLAS returns once the result is in
  PSB_CUBLAS(cublasSdot(cublas_, batch_ * model_.num_classes, log_probs_, 1, one_hot_, 1, &dot));
  return -static_cast<double>(dot) / batch_;
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

extern "C" Network* PsbenchMakeCudnnNetwork(const Model* model, int batch, int math, int layout, int* code,
                                            std::string* error) {
  auto network = std::make_unique<cudnn_engine::CudnnNetwork>(*model, batch, static_cast<Math>(math),
                                                              static_cast<Layout>(layout));
  if (absl::Status s = network->Build(); !s.ok()) {
    *code = static_cast<int>(s.code());
    *error = std::string(s.message());
    return nullptr;
  }
  return network.release();
}

}  // namespace psbench::trainer
