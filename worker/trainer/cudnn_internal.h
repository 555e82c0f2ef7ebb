// The cuDNN engine's network (cudnn_network.cc: building, binding, the step; cudnn_layers.cc:
// each layer's forward and backward). Only for those two files.
#ifndef PSBENCH_WORKER_TRAINER_CUDNN_INTERNAL_H_
#define PSBENCH_WORKER_TRAINER_CUDNN_INTERNAL_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/trainer/batch_norm.h"
#include "worker/trainer/elementwise.h"
#include "worker/trainer/model.h"
#include "worker/trainer/network.h"

namespace psbench::trainer::cudnn_engine {

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

[[noreturn]] inline void Fatal(const char* call, const char* what) {
  std::fprintf(stderr, "psbench trainer (gpu): %s failed: %s\n", call, what);
  std::abort();
}

// count floats on the device, zeroed.
inline float* DeviceFloats(size_t count) {
  void* p = nullptr;
  PSB_CUDA(cudaMalloc(&p, std::max<size_t>(count, 1) * sizeof(float)));
  PSB_CUDA(cudaMemset(p, 0, std::max<size_t>(count, 1) * sizeof(float)));
  // The engine's streams do not wait for the legacy stream this ran on.
  PSB_CUDA(cudaDeviceSynchronize());
  return static_cast<float*>(p);
}

struct Tensor {
  cudnnTensorDescriptor_t desc = nullptr;
  float* value = nullptr;
  float* diff = nullptr;
  size_t count = 0;
  bool diff_written = false;
};

// A convolution's three passes; each may run on a graph-API plan (cudnn_graph.cc).
enum ConvPass { kConvForward = 0, kConvBackwardData = 1, kConvBackwardFilter = 2 };

// A pass's execution plan and its variant pack (its buffers and the workspace, built once
// the workspace has its final size); no plan: the legacy call.
struct GraphConv {
  cudnnBackendDescriptor_t plan = nullptr;
  cudnnBackendDescriptor_t pack = nullptr;
  std::array<void*, 3> pointers{};
  std::vector<cudnnBackendDescriptor_t> keep;  // what the plan was made from, destroyed after it
  GraphConv() = default;
  GraphConv(GraphConv&& o) noexcept { *this = std::move(o); }
  GraphConv& operator=(GraphConv&& o) noexcept;
  ~GraphConv();
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
  float* bn_coeff = nullptr;   // batch norm's per-channel scratch (3 x C)
  // NHWC: the convolution's filter and its gradient in KRSC (the parameter stays KCRS, the
  // layout the host and the PS see), and 4-D views of one filter in both layouts.
  float* filter_value = nullptr;
  float* filter_grad = nullptr;
  cudnnTensorDescriptor_t kcrs = nullptr, krsc = nullptr;
  // NHWC: a fully connected layer's spatial input flattened as the parameters expect (C,H,W)
  // and the gradient it sends back, in NCHW.
  cudnnTensorDescriptor_t nchw = nullptr;
  float* nchw_in = nullptr;
  float* nchw_in_diff = nullptr;
  // NHWC: LRN runs on NCHW copies (cuDNN's cross-channel LRN is NCHW), output and its gradient.
  float* nchw_out = nullptr;
  float* nchw_out_diff = nullptr;
  // Concat: each input's place in the output, as a strided view of it.
  std::vector<cudnnTensorDescriptor_t> slices;
  std::vector<size_t> slice_offsets;
  // An add whose only consumer is a ReLU computes both, each way, in one pass (elementwise.h):
  // the add names the ReLU (fused_relu), the ReLU the add (fused_into) and does nothing itself.
  int fused_relu = -1;
  int fused_into = -1;
  std::array<GraphConv, 3> graph;  // by ConvPass
  std::vector<int> params;
  std::vector<float*> value, grad;  // device copies of this layer's parameters
};

class CudnnNetwork final : public Network {
 public:
  CudnnNetwork(const Model& model, int batch, Math math, Layout layout)
      : model_(model), batch_(batch), math_(math),
        nhwc_(layout == Layout::kNhwc || (layout == Layout::kAuto && math == Math::kTf32)) {}
  ~CudnnNetwork() override;

  absl::Status Build();
  std::optional<PeakEstimate> DevicePeak() const override { return peak_; }
  StagingTimes staging() const override { return staging_; }
  std::string layout() const override { return nhwc_ ? "nhwc" : "nchw"; }

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
  absl::Status ChooseConvolution(int index);
  void PinHostMemory();
  void StageGradient(int p);  // queue the copy of gradient p to the host once it is computed
  // Per-layer times from the events recorded around each layer of the last pass.
  void ReadLayerTimes(const std::vector<cudaEvent_t>& events, bool forward);
  void ForwardLayer(int index);
  void BackwardLayer(int index);
  // beta for writing the gradient of input tensor t: accumulate after the first writer.
  float Beta(int t) { return tensors_[t].diff_written ? 1.f : 0.f; }
  void Written(int t) { tensors_[t].diff_written = true; }
  // A descriptor of N x C x H x W in the engine's layout (strides from it unless given).
  cudnnTensorDescriptor_t Descriptor(int n, int c, int h, int w, bool nhwc);
  float* Alloc(size_t count);  // DeviceFloats, freed with the network
  void BuildConcat(int index);
  int FusableRelu(int add) const;  // the ReLU that is the add's only consumer, or -1
  // Input k of concatenation `index`, into its place in the output or back out of it.
  void CopySlice(int index, int k, const float* from, float* to, bool into_concat);
  absl::Status BuildLoss();
  double LossForward();
  // NHWC filters from the KCRS parameters (after parameters reach the device).
  void FiltersToDevice(int layer);
  void ReluForward(Tensor& t);
  float* ReluBackward(int index);  // returns the pre-activation gradient
  void* Workspace(size_t bytes);
  // Convolutions (cudnn_graph.cc): each pass on a graph-API plan where one beats the legacy
  // algorithm, timed on the layer's buffers; RunConvolution runs whichever was chosen.
  void TuneConvolutions();
  absl::StatusOr<std::pair<GraphConv, float>> FastestPlan(int index, ConvPass pass);
  std::array<void*, 3> ConvPointers(int index, ConvPass pass);
  cudnnStatus_t LegacyConvolution(int index, ConvPass pass, float beta);
  void RunConvolution(int index, ConvPass pass, float beta);
  cudnnBackendDescriptor_t VariantPack(const std::array<void*, 3>& pointers);
  float TimeOnStream(const std::function<bool()>& run);  // mean ms of a few runs; < 0: failed
  bool TryWorkspace(size_t bytes);
  bool InputGradientAccumulates(int index) const;

  Model model_;
  int batch_;
  Math math_;
  bool nhwc_;
  std::string description_;
  std::optional<PeakEstimate> peak_;
  StagingTimes staging_;
  // Kernels run in order on stream_; gradient copies to the host run on copy_stream_, each
  // after its gradient's kernel, so they overlap the rest of the backward pass.
  cudaStream_t stream_ = nullptr, copy_stream_ = nullptr;
  std::vector<cudaEvent_t> forward_events_, backward_events_;  // one before each layer, one after the last
  std::vector<cudaEvent_t> grad_done_, copy_start_, copied_;  // per parameter
  std::vector<int> staged_;  // parameters whose copies were queued this backward pass, in order
  std::vector<void*> pinned_;  // host ranges registered with CUDA (the bound buffers, merged)
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnActivationDescriptor_t relu_ = nullptr;
  cudnnOpTensorDescriptor_t add_ = nullptr;
  std::vector<Tensor> tensors_;
  std::vector<Node> nodes_;
  std::vector<ParamInfo> params_;
  std::vector<float*> host_values_, host_grads_;
  std::vector<float*> device_values_, device_grads_;
  std::vector<LayerTime> times_;
  float* ones_ = nullptr;  // batch_ ones, for FC bias sums
  // Batch norm by the engine's own kernels (fused with its ReLU) in NHWC; cuDNN's in NCHW.
  bool own_batch_norm() const { return nhwc_; }
  double* bn_partials_ = nullptr;
  gpu_kernels::BnShape BnShapeOf(int index) const {
    const Shape& s = model_.layers[index].out;
    return {batch_, s.c, int64_t(s.h) * s.w};
  }
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  // The loss on the device: log-softmax, its dot with the labels' one-hot rows, and the
  // gradient (softmax - one-hot) / N written into the logits' gradient.
  cudnnTensorDescriptor_t logits_desc_ = nullptr;  // N x classes x 1 x 1
  float* log_probs_ = nullptr;
  float* one_hot_ = nullptr;
  std::vector<float> one_hot_host_;
  // NHWC: the images arrive NCHW and are transposed on the device.
  cudnnTensorDescriptor_t images_desc_ = nullptr;
  float* images_ = nullptr;
  std::vector<int> labels_;
  std::vector<cudnnTensorDescriptor_t> descriptors_;  // every tensor descriptor, destroyed last
  std::vector<float*> allocations_;                   // every device buffer but the workspace
};

}  // namespace psbench::trainer::cudnn_engine

#endif  // PSBENCH_WORKER_TRAINER_CUDNN_INTERNAL_H_
