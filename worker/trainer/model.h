// A network as an engine-independent graph: the layers of the seeds' models (AlexNet,
// OverFeat, VGG, Inception-v3, ResNet-50) with their shapes, parameter counts and FLOPs.
// Engines (oneDNN, cuDNN) build their primitives from this description.
#ifndef PSBENCH_WORKER_TRAINER_MODEL_H_
#define PSBENCH_WORKER_TRAINER_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psbench::trainer {

// Per-image shape of an activation (NCHW without N); fully connected outputs are c x 1 x 1.
struct Shape {
  int c = 0, h = 0, w = 0;
  int64_t elements() const { return int64_t{c} * h * w; }
  bool operator==(const Shape&) const = default;
};

enum class LayerKind {
  kInput,
  kConvolution,     // optional bias, optional fused ReLU
  kBatchNorm,       // trainable scale and shift, batch statistics, optional fused ReLU
  kRelu,
  kMaxPool,
  kAvgPool,         // padding excluded from the average (TensorFlow's SAME)
  kLrn,             // across channels
  kFullyConnected,  // optional fused ReLU; flattens a c x h x w input
  kConcat,          // along channels
  kAdd,             // residual sum of two equally shaped inputs
  kSoftmaxCrossEntropy,  // the loss over the class scores of its input
};
const char* LayerKindName(LayerKind kind);

struct Layer {
  LayerKind kind = LayerKind::kInput;
  std::string name;
  std::vector<int> inputs;  // indices of earlier layers
  Shape out;                // filled by the builder

  // Convolution, pooling.
  int kernel_h = 0, kernel_w = 0;
  int stride_h = 1, stride_w = 1;
  int pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  // Convolution, fully connected: output channels / features; bias; fused ReLU (also BN).
  int outputs = 0;
  bool bias = true;
  bool relu = false;
  // LRN.
  int lrn_size = 5;
  float lrn_alpha = 1e-4f, lrn_beta = 0.75f, lrn_k = 1.0f;
  // Batch normalization.
  float epsilon = 1e-3f;

  // Trainable parameters of this layer, in the order engines expose them.
  struct Param {
    std::string name;   // "<layer>/weights", "<layer>/bias", "<layer>/gamma", "<layer>/beta"
    int64_t count = 0;  // logical number of floats
    // How it starts: fan-in scaled uniform (weights), zeros or ones.
    enum class Init { kFanIn, kZero, kOne } init = Init::kZero;
    int64_t fan_in = 0;
  };
  std::vector<Param> params;
  // Forward multiply-adds x 2 per image (backward is about twice this).
  double forward_flops = 0;
};

struct Model {
  std::string name;
  std::vector<Layer> layers;  // topologically ordered; layer 0 is the input
  int num_classes = 0;

  int64_t parameter_count() const;
  double forward_flops_per_image() const;
  // The layer holding the loss (the last one).
  const Layer& loss() const { return layers.back(); }
};

// Names accepted by BuildModel, e.g. for --model: alexnet, overfeat, vgg11, vgg16,
// inception3, resnet50.
std::vector<std::string> ModelNames();
absl::StatusOr<Model> BuildModel(absl::string_view name);

// Builds models layer by layer, inferring shapes (and refusing impossible ones).
class ModelBuilder {
 public:
  ModelBuilder(std::string name, Shape input);

  // Explicit symmetric padding (PyTorch's layout); kSame pads like TensorFlow's SAME.
  static constexpr int kSame = -1;

  int Conv(int in, const std::string& name, int outputs, int kh, int kw, int stride = 1,
           int pad = 0, bool bias = true, bool relu = true);
  // Convolution without bias, then batch normalization with fused ReLU (Inception, ResNet).
  int ConvBn(int in, const std::string& name, int outputs, int kh, int kw, int stride = 1,
             int pad = 0, bool relu = true);
  int BatchNorm(int in, const std::string& name, bool relu);
  int Relu(int in, const std::string& name);
  int MaxPool(int in, const std::string& name, int kernel, int stride, int pad = 0);
  int AvgPool(int in, const std::string& name, int kernel, int stride, int pad = 0);
  int GlobalAvgPool(int in, const std::string& name);
  int Lrn(int in, const std::string& name, int size, float alpha, float beta, float k);
  int FullyConnected(int in, const std::string& name, int outputs, bool relu);
  int Concat(const std::vector<int>& ins, const std::string& name);
  int Add(int a, int b, const std::string& name);
  // Adds the loss over `in` (which must have num_classes channels) and returns the model.
  absl::StatusOr<Model> Finish(int in);

 private:
  int Append(Layer layer);
  void SetWindow(Layer* layer, int in, int kh, int kw, int stride, int pad);

  Model model_;
  std::string error_;  // first shape error; Finish reports it
};

}  // namespace psbench::trainer

#endif  // PSBENCH_WORKER_TRAINER_MODEL_H_
