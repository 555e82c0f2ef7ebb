// Convolutions through cuDNN's graph API (backend descriptors), tuned as PyTorch's
// cudnn.benchmark tunes them through cudnn-frontend: cuDNN's heuristics list engine
// configurations for the layer, each one that builds is timed on the layer's own buffers,
// and the fastest runs the layer where it beats the legacy API's choice (cudnnFind*) timed
// the same way. The legacy API reaches only some of cuDNN's engines: in NHWC its backward
// kernels for VGG's 224x224 layers ran 7x slower than their forward ones on an H100.
// Anything the graph API refuses leaves the layer on the legacy API; nothing here fails the
// build. PSBENCH_GPU_CONV=legacy keeps every convolution on the legacy API (a diagnostic).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "worker/trainer/cudnn_internal.h"

namespace psbench::trainer::cudnn_engine {
namespace {

constexpr int kMaxPlans = 8;                        // engine configurations timed per pass
constexpr int64_t kMaxGraphWorkspace = int64_t{1} << 30;
constexpr int kTimedRuns = 3;                       // after one warm-up run
enum : int64_t { kUidX = 1, kUidW = 2, kUidY = 3 };  // the tensors of every pass's graph

void Destroy(cudnnBackendDescriptor_t d) {
  if (d) cudnnBackendDestroyDescriptor(d);
}

// One backend descriptor, destroyed with its owner.
struct Desc {
  cudnnBackendDescriptor_t d = nullptr;
  explicit Desc(cudnnBackendDescriptorType_t type) {
    if (cudnnBackendCreateDescriptor(type, &d) != CUDNN_STATUS_SUCCESS) d = nullptr;
  }
  explicit Desc(cudnnBackendDescriptor_t owned) : d(owned) {}
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  ~Desc() { Destroy(d); }
  cudnnBackendDescriptor_t release() { return std::exchange(d, nullptr); }
};

absl::Status Failed(const char* what, cudnnStatus_t s) {
  return absl::InternalError(absl::StrCat(what, ": ", cudnnGetErrorString(s)));
}

#define GRAPH_TRY(what, call)                            \
  do {                                                   \
    cudnnStatus_t s_ = (call);                           \
    if (s_ != CUDNN_STATUS_SUCCESS) return Failed(what, s_); \
  } while (0)

template <typename T>
cudnnStatus_t Set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                  int64_t count, const T* values) {
  return cudnnBackendSetAttribute(d, name, type, count, values);
}

// A packed 4-D tensor, dimensions in N, C, H, W order (filters: K, C, R, S), NCHW or NHWC
// (KRSC) strides. Every buffer is cudaMalloc'ed: 16-byte alignment holds.
absl::Status Tensor4d(Desc& t, int64_t uid, const int64_t dims[4], bool nhwc) {
  if (!t.d) return absl::InternalError("tensor descriptor not created");
  const int64_t c = dims[1], h = dims[2], w = dims[3];
  const int64_t nchw_strides[4] = {c * h * w, h * w, w, 1};
  const int64_t nhwc_strides[4] = {h * w * c, 1, w * c, c};
  const cudnnDataType_t type = CUDNN_DATA_FLOAT;
  const int64_t alignment = 16;
  GRAPH_TRY("tensor type", Set(t.d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
  GRAPH_TRY("tensor dimensions", Set(t.d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims));
  GRAPH_TRY("tensor strides",
            Set(t.d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, nhwc ? nhwc_strides : nchw_strides));
  GRAPH_TRY("tensor id", Set(t.d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
  GRAPH_TRY("tensor alignment", Set(t.d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment));
  GRAPH_TRY("tensor", cudnnBackendFinalize(t.d));
  return absl::OkStatus();
}

absl::Status Convolution(Desc& conv, const Layer& layer) {
  if (!conv.d) return absl::InternalError("convolution descriptor not created");
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dims = 2;
  const int64_t pads[2] = {layer.pad_top, layer.pad_left};  // symmetric (checked when built)
  const int64_t dilations[2] = {1, 1};
  const int64_t strides[2] = {layer.stride_h, layer.stride_w};
  GRAPH_TRY("convolution compute type", Set(conv.d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute));
  GRAPH_TRY("convolution mode", Set(conv.d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
  GRAPH_TRY("convolution dims", Set(conv.d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims));
  GRAPH_TRY("convolution padding", Set(conv.d, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pads));
  GRAPH_TRY("convolution padding", Set(conv.d, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pads));
  GRAPH_TRY("convolution dilations", Set(conv.d, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilations));
  GRAPH_TRY("convolution strides", Set(conv.d, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, strides));
  GRAPH_TRY("convolution", cudnnBackendFinalize(conv.d));
  return absl::OkStatus();
}

// The pass's operation: x, w and y are the data, filter and output tensors (or their
// gradients, as the pass reads and writes them); alpha 1, beta 0.
absl::Status Operation(Desc& op, ConvPass pass, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t w,
                       cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t conv) {
  if (!op.d) return absl::InternalError("operation descriptor not created");
  struct Names {
    cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
  };
  static constexpr Names kNames[] = {
      {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
      {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
      {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA},
  };
  const Names& n = kNames[pass];
  const float alpha = 1.f, beta = 0.f;
  GRAPH_TRY("operation x", Set(op.d, n.x, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
  GRAPH_TRY("operation w", Set(op.d, n.w, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w));
  GRAPH_TRY("operation y", Set(op.d, n.y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
  GRAPH_TRY("operation convolution", Set(op.d, n.conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv));
  GRAPH_TRY("operation alpha", Set(op.d, n.alpha, CUDNN_TYPE_FLOAT, 1, &alpha));
  GRAPH_TRY("operation beta", Set(op.d, n.beta, CUDNN_TYPE_FLOAT, 1, &beta));
  GRAPH_TRY("operation", cudnnBackendFinalize(op.d));
  return absl::OkStatus();
}

// fp32 takes no tensor-core engine (TF32 inputs): the same rule as the legacy API's math
// type. Neither math takes engines that convert inputs down or reduce in lower precision.
bool Allowed(cudnnBackendDescriptor_t config, Math math) {
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  if (!engine.d) return false;
  int64_t n = 0;
  if (cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                               &engine.d) != CUDNN_STATUS_SUCCESS)
    return false;
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  if (cudnnBackendGetAttribute(engine.d, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes) != CUDNN_STATUS_SUCCESS)
    return false;
  for (int64_t i = 0; i < n; ++i) {
    if (notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
        notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)
      return false;
    if (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE && math != Math::kTf32) return false;
  }
  return true;
}

// Appends the engine configurations cuDNN's heuristics of this mode give for the graph.
absl::Status HeuristicConfigs(cudnnBackendDescriptor_t graph, cudnnBackendHeurMode_t mode,
                              std::vector<std::unique_ptr<Desc>>& configs) {
  Desc heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  if (!heuristics.d) return absl::InternalError("heuristics descriptor not created");
  GRAPH_TRY("heuristics graph",
            Set(heuristics.d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph));
  GRAPH_TRY("heuristics mode", Set(heuristics.d, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
  GRAPH_TRY("heuristics", cudnnBackendFinalize(heuristics.d));
  int64_t count = 0;
  GRAPH_TRY("heuristics count", cudnnBackendGetAttribute(heuristics.d, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                         CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr));
  std::vector<std::unique_ptr<Desc>> found;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    found.push_back(std::make_unique<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    if (!found.back()->d) return absl::InternalError("engine configuration descriptor not created");
    raw.push_back(found.back()->d);
  }
  GRAPH_TRY("heuristics results", cudnnBackendGetAttribute(heuristics.d, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count, raw.data()));
  for (int64_t i = 0; i < std::min<int64_t>(count, static_cast<int64_t>(found.size())); ++i)
    configs.push_back(std::move(found[i]));
  return absl::OkStatus();
}

}  // namespace

GraphConv::~GraphConv() {
  Destroy(pack);
  Destroy(plan);
  for (auto d = keep.rbegin(); d != keep.rend(); ++d) Destroy(*d);
}

GraphConv& GraphConv::operator=(GraphConv&& o) noexcept {
  if (this != &o) {
    Destroy(pack);
    Destroy(plan);
    for (auto d = keep.rbegin(); d != keep.rend(); ++d) Destroy(*d);
    plan = std::exchange(o.plan, nullptr);
    pack = std::exchange(o.pack, nullptr);
    keep = std::exchange(o.keep, {});
    pointers = o.pointers;
  }
  return *this;
}

// The pass's three buffers, in uid order: x (or dx), w (or dw), y (or dy), as the legacy
// calls in cudnn_layers.cc pass them.
std::array<void*, 3> CudnnNetwork::ConvPointers(int index, ConvPass pass) {
  const Layer& layer = model_.layers[index];
  Node& node = nodes_[index];
  Tensor& src = tensors_[layer.inputs[0]];
  Tensor& out = tensors_[index];
  float* w = node.filter_value ? node.filter_value : node.value[0];
  float* dw = node.filter_grad ? node.filter_grad : node.grad[0];
  float* dy = layer.relu ? node.relu_diff : out.diff;
  switch (pass) {
    case kConvForward: return {src.value, w, out.value};
    case kConvBackwardData: return {src.diff, w, dy};
    case kConvBackwardFilter: return {src.value, dw, dy};
  }
  return {};
}

// Whether layer `index`'s input also feeds a later layer, whose backward pass (which runs
// first) writes the input's gradient before this layer adds its own.
bool CudnnNetwork::InputGradientAccumulates(int index) const {
  const int in = model_.layers[index].inputs[0];
  for (size_t j = index + 1; j < model_.layers.size(); ++j)
    for (int k : model_.layers[j].inputs)
      if (k == in) return true;
  return false;
}

// Grows the workspace for a candidate plan; false, and the workspace as it was, where the
// device has no room (a candidate must not end the build).
bool CudnnNetwork::TryWorkspace(size_t bytes) {
  if (bytes <= workspace_bytes_) return true;
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it
    return false;
  }
  PSB_CUDA(cudaStreamSynchronize(stream_));
  cudaFree(workspace_);
  workspace_ = p;
  workspace_bytes_ = bytes;
  return true;
}

// The legacy API's pass with the algorithm cudnnFind* chose (beta: accumulate into dx).
cudnnStatus_t CudnnNetwork::LegacyConvolution(int index, ConvPass pass, float beta) {
  Node& node = nodes_[index];
  Tensor& src = tensors_[model_.layers[index].inputs[0]];
  Tensor& out = tensors_[index];
  const std::array<void*, 3> p = ConvPointers(index, pass);
  const float one = 1.f, zero = 0.f;
  switch (pass) {
    case kConvForward:
      return cudnnConvolutionForward(cudnn_, &one, src.desc, p[0], node.filter, p[1], node.conv, node.fwd_algo,
                                     workspace_, workspace_bytes_, &zero, out.desc, p[2]);
    case kConvBackwardData:
      return cudnnConvolutionBackwardData(cudnn_, &one, node.filter, p[1], out.desc, p[2], node.conv,
                                          node.bwd_data_algo, workspace_, workspace_bytes_, &beta, src.desc, p[0]);
    case kConvBackwardFilter:
      return cudnnConvolutionBackwardFilter(cudnn_, &one, src.desc, p[0], out.desc, p[2], node.conv,
                                            node.bwd_filter_algo, workspace_, workspace_bytes_, &zero, node.filter,
                                            p[1]);
  }
  return CUDNN_STATUS_BAD_PARAM;
}

void CudnnNetwork::RunConvolution(int index, ConvPass pass, float beta) {
  GraphConv& g = nodes_[index].graph[pass];
  // Graph plans are built with beta 0: a gradient that accumulates takes the legacy call.
  if (g.pack && beta == 0.f) {
    PSB_CUDNN(cudnnBackendExecute(cudnn_, g.plan, g.pack));
    return;
  }
  PSB_CUDNN(LegacyConvolution(index, pass, beta));
}

float CudnnNetwork::TimeOnStream(const std::function<bool()>& run) {
  if (!run()) return -1.f;
  cudaEvent_t start = nullptr, stop = nullptr;
  PSB_CUDA(cudaEventCreate(&start));
  PSB_CUDA(cudaEventCreate(&stop));
  PSB_CUDA(cudaEventRecord(start, stream_));
  bool ok = true;
  for (int i = 0; i < kTimedRuns && ok; ++i) ok = run();
  PSB_CUDA(cudaEventRecord(stop, stream_));
  PSB_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  PSB_CUDA(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ok ? ms / kTimedRuns : -1.f;
}

// A variant pack of the pass's buffers and the engine's workspace as it is now.
cudnnBackendDescriptor_t CudnnNetwork::VariantPack(const std::array<void*, 3>& pointers) {
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  if (!pack.d) return nullptr;
  const int64_t uids[3] = {kUidX, kUidW, kUidY};
  void* data[3] = {pointers[0], pointers[1], pointers[2]};
  void* workspace = workspace_;
  if (Set(pack.d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, data) != CUDNN_STATUS_SUCCESS ||
      Set(pack.d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids) != CUDNN_STATUS_SUCCESS ||
      Set(pack.d, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendFinalize(pack.d) != CUDNN_STATUS_SUCCESS)
    return nullptr;
  return pack.release();
}

// The fastest of cuDNN's heuristic engine configurations for this pass, with its time, or
// an error where the graph API cannot describe or plan it at all.
absl::StatusOr<std::pair<GraphConv, float>> CudnnNetwork::FastestPlan(int index, ConvPass pass) {
  const Layer& layer = model_.layers[index];
  const Shape& in = model_.layers[layer.inputs[0]].out;
  const int64_t x_dims[4] = {batch_, in.c, in.h, in.w};
  const int64_t w_dims[4] = {layer.outputs, in.c, layer.kernel_h, layer.kernel_w};
  const int64_t y_dims[4] = {batch_, layer.out.c, layer.out.h, layer.out.w};
  Desc x(CUDNN_BACKEND_TENSOR_DESCRIPTOR), w(CUDNN_BACKEND_TENSOR_DESCRIPTOR), y(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  Desc conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  for (absl::Status s : {Tensor4d(x, kUidX, x_dims, nhwc_), Tensor4d(w, kUidW, w_dims, nhwc_),
                         Tensor4d(y, kUidY, y_dims, nhwc_), Convolution(conv, layer)})
    if (!s.ok()) return s;
  static constexpr cudnnBackendDescriptorType_t kOps[] = {
      CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
      CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
      CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR};
  Desc op(kOps[pass]);
  if (absl::Status s = Operation(op, pass, x.d, w.d, y.d, conv.d); !s.ok()) return s;
  Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  if (!graph.d) return absl::InternalError("operation graph descriptor not created");
  GRAPH_TRY("graph ops", Set(graph.d, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op.d));
  GRAPH_TRY("graph handle", Set(graph.d, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &cudnn_));
  GRAPH_TRY("graph", cudnnBackendFinalize(graph.d));
  // The configurations cuDNN's heuristics rank first. Trying every one it lists and its
  // fallback list too, as PyTorch's autotuner does, doubled the GPU tests' time and, on an
  // H200, chose a tf32 NCHW plan whose filter gradients missed the CPU engine's by up to 0.05
  // absolute where TF32 rounding explains 1e-3.
  std::vector<std::unique_ptr<Desc>> configs;
  if (absl::Status s = HeuristicConfigs(graph.d, CUDNN_HEUR_MODE_A, configs); !s.ok()) return s;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const auto& c : configs) raw.push_back(c->d);
  const int64_t count = static_cast<int64_t>(raw.size());
  const std::array<void*, 3> pointers = ConvPointers(index, pass);
  GraphConv best;
  float best_ms = -1.f;
  int64_t best_config = 0;
  int timed = 0;
  for (int64_t i = 0; i < count && timed < kMaxPlans; ++i) {
    if (!Allowed(raw[i], math_)) continue;
    Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    int64_t workspace = 0, n = 0;
    if (!plan.d ||
        Set(plan.d, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &cudnn_) != CUDNN_STATUS_SUCCESS ||
        Set(plan.d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw[i]) !=
            CUDNN_STATUS_SUCCESS ||
        cudnnBackendFinalize(plan.d) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendGetAttribute(plan.d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                 &workspace) != CUDNN_STATUS_SUCCESS ||
        workspace > kMaxGraphWorkspace || !TryWorkspace(static_cast<size_t>(workspace)))
      continue;
    Desc pack(VariantPack(pointers));
    if (!pack.d) continue;
    ++timed;
    const float ms = TimeOnStream(
        [&] { return cudnnBackendExecute(cudnn_, plan.d, pack.d) == CUDNN_STATUS_SUCCESS; });
    if (ms < 0 || (best_ms >= 0 && ms >= best_ms)) continue;
    best = GraphConv();
    best.plan = plan.release();
    best.pointers = pointers;
    best_ms = ms;
    best_config = i;
  }
  if (!best.plan) return absl::NotFoundError("no engine configuration built and ran");
  // What the plan was made from lives as long as it does, as cudnn-frontend keeps it.
  best.keep = {x.release(), w.release(), y.release(), conv.release(), op.release(), graph.release(),
               configs[best_config]->release()};
  return std::make_pair(std::move(best), best_ms);
}

// Each pass of each convolution on whichever API's choice ran faster here; the variant
// packs are built once the workspace has its final size.
void CudnnNetwork::TuneConvolutions() {
  const char* api = std::getenv("PSBENCH_GPU_CONV");
  if (api && std::strcmp(api, "legacy") == 0) {
    description_ += ", convolutions: legacy API (PSBENCH_GPU_CONV)";
    return;
  }
  int passes = 0, on_graph = 0, accumulating = 0;
  std::string refused;
  for (size_t i = 0; i < model_.layers.size(); ++i) {
    const Layer& layer = model_.layers[i];
    if (layer.kind != LayerKind::kConvolution) continue;
    for (ConvPass pass : {kConvForward, kConvBackwardData, kConvBackwardFilter}) {
      if (pass == kConvBackwardData && layer.inputs[0] == 0) continue;  // the images take no gradient
      // Plans are built with beta 0: a data gradient that always adds to one already written
      // (its input also feeds a later layer) always takes the legacy call.
      if (pass == kConvBackwardData && InputGradientAccumulates(static_cast<int>(i))) {
        ++accumulating;
        continue;
      }
      ++passes;
      const int index = static_cast<int>(i);
      const float legacy = TimeOnStream([&] { return LegacyConvolution(index, pass, 0.f) == CUDNN_STATUS_SUCCESS; });
      auto fastest = FastestPlan(index, pass);
      if (!fastest.ok()) {
        if (refused.empty()) refused = absl::StrCat(layer.name, ": ", fastest.status().message());
        continue;
      }
      if (legacy >= 0 && fastest->second >= legacy) continue;
      nodes_[i].graph[pass] = std::move(fastest->first);
      ++on_graph;
    }
  }
  PSB_CUDA(cudaStreamSynchronize(stream_));
  for (Node& node : nodes_) {
    for (GraphConv& g : node.graph) {
      if (!g.plan) continue;
      g.pack = VariantPack(g.pointers);
      if (g.pack) continue;
      g = GraphConv();  // the legacy call, then
      --on_graph;
    }
  }
  description_ += absl::StrCat(", convolutions: ", on_graph, " of ", passes, " passes on graph-API plans");
  if (accumulating != 0) description_ += absl::StrCat(" (", accumulating, " accumulating data gradients on the legacy API)");
  if (!refused.empty()) description_ += absl::StrCat(" (first without a plan: ", refused, ")");
}

}  // namespace psbench::trainer::cudnn_engine
