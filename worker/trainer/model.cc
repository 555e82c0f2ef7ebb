#include "worker/trainer/model.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psbench::trainer {

const char* LayerKindName(LayerKind kind) {
  switch (kind) {
    case LayerKind::kInput: return "input";
    case LayerKind::kConvolution: return "conv";
    case LayerKind::kBatchNorm: return "batchnorm";
    case LayerKind::kRelu: return "relu";
    case LayerKind::kMaxPool: return "maxpool";
    case LayerKind::kAvgPool: return "avgpool";
    case LayerKind::kLrn: return "lrn";
    case LayerKind::kFullyConnected: return "fc";
    case LayerKind::kConcat: return "concat";
    case LayerKind::kAdd: return "add";
    case LayerKind::kSoftmaxCrossEntropy: return "softmax_xent";
  }
  return "?";
}

int64_t Model::parameter_count() const {
  int64_t total = 0;
  for (const Layer& layer : layers)
    for (const Layer::Param& p : layer.params) total += p.count;
  return total;
}

double Model::forward_flops_per_image() const {
  double total = 0;
  for (const Layer& layer : layers) total += layer.forward_flops;
  return total;
}

ModelBuilder::ModelBuilder(std::string name, Shape input) {
  model_.name = std::move(name);
  Layer layer;
  layer.kind = LayerKind::kInput;
  layer.name = "data";
  layer.out = input;
  model_.layers.push_back(std::move(layer));
}

int ModelBuilder::Append(Layer layer) {
  for (int in : layer.inputs) {
    if ((in < 0 || in >= static_cast<int>(model_.layers.size())) && error_.empty())
      error_ = absl::StrCat(layer.name, ": input ", in, " does not exist");
  }
  if (error_.empty() && (layer.out.c <= 0 || layer.out.h <= 0 || layer.out.w <= 0)) {
    error_ = absl::StrCat(layer.name, ": output shape ", layer.out.c, "x", layer.out.h, "x",
                          layer.out.w, " is empty (input too small for the window)");
  }
  model_.layers.push_back(std::move(layer));
  return static_cast<int>(model_.layers.size()) - 1;
}

void ModelBuilder::SetWindow(Layer* layer, int in, int kh, int kw, int stride, int pad) {
  const Shape& s = model_.layers[in].out;
  layer->kernel_h = kh;
  layer->kernel_w = kw;
  layer->stride_h = layer->stride_w = stride;
  auto same = [stride](int size, int k, int* lo, int* hi) {
    // TensorFlow SAME: output ceil(size / stride); the odd pixel of padding goes at the end.
    int out = (size + stride - 1) / stride;
    int total = std::max((out - 1) * stride + k - size, 0);
    *lo = total / 2;
    *hi = total - *lo;
  };
  if (pad == kSame) {
    same(s.h, kh, &layer->pad_top, &layer->pad_bottom);
    same(s.w, kw, &layer->pad_left, &layer->pad_right);
  } else {
    layer->pad_top = layer->pad_bottom = layer->pad_left = layer->pad_right = pad;
  }
  layer->out.h = (s.h + layer->pad_top + layer->pad_bottom - kh) / stride + 1;
  layer->out.w = (s.w + layer->pad_left + layer->pad_right - kw) / stride + 1;
  if (s.h + layer->pad_top + layer->pad_bottom < kh || s.w + layer->pad_left + layer->pad_right < kw)
    layer->out.h = 0;
}

int ModelBuilder::Conv(int in, const std::string& name, int outputs, int kh, int kw, int stride,
                       int pad, bool bias, bool relu) {
  Layer layer;
  layer.kind = LayerKind::kConvolution;
  layer.name = name;
  layer.inputs = {in};
  layer.outputs = outputs;
  layer.bias = bias;
  layer.relu = relu;
  SetWindow(&layer, in, kh, kw, stride, pad);
  layer.out.c = outputs;
  const int64_t fan_in = int64_t{model_.layers[in].out.c} * kh * kw;
  layer.params.push_back({name + "/weights", fan_in * outputs, Layer::Param::Init::kFanIn, fan_in});
  if (bias) layer.params.push_back({name + "/bias", outputs, Layer::Param::Init::kZero, 0});
  layer.forward_flops = 2.0 * fan_in * layer.out.elements();
  return Append(std::move(layer));
}

int ModelBuilder::BatchNorm(int in, const std::string& name, bool relu) {
  Layer layer;
  layer.kind = LayerKind::kBatchNorm;
  layer.name = name;
  layer.inputs = {in};
  layer.relu = relu;
  layer.out = model_.layers[in].out;
  layer.params.push_back({name + "/gamma", layer.out.c, Layer::Param::Init::kOne, 0});
  layer.params.push_back({name + "/beta", layer.out.c, Layer::Param::Init::kZero, 0});
  layer.forward_flops = 4.0 * layer.out.elements();
  return Append(std::move(layer));
}

int ModelBuilder::ConvBn(int in, const std::string& name, int outputs, int kh, int kw,
                         int stride, int pad, bool relu) {
  int conv = Conv(in, name, outputs, kh, kw, stride, pad, /*bias=*/false, /*relu=*/false);
  return BatchNorm(conv, name + "/bn", relu);
}

int ModelBuilder::Relu(int in, const std::string& name) {
  Layer layer;
  layer.kind = LayerKind::kRelu;
  layer.name = name;
  layer.inputs = {in};
  layer.out = model_.layers[in].out;
  layer.forward_flops = layer.out.elements();
  return Append(std::move(layer));
}

int ModelBuilder::MaxPool(int in, const std::string& name, int kernel, int stride, int pad) {
  Layer layer;
  layer.kind = LayerKind::kMaxPool;
  layer.name = name;
  layer.inputs = {in};
  SetWindow(&layer, in, kernel, kernel, stride, pad);
  layer.out.c = model_.layers[in].out.c;
  layer.forward_flops = double(kernel) * kernel * layer.out.elements();
  return Append(std::move(layer));
}

int ModelBuilder::AvgPool(int in, const std::string& name, int kernel, int stride, int pad) {
  int index = MaxPool(in, name, kernel, stride, pad);
  model_.layers[index].kind = LayerKind::kAvgPool;
  return index;
}

int ModelBuilder::GlobalAvgPool(int in, const std::string& name) {
  const Shape& s = model_.layers[in].out;
  Layer layer;
  layer.kind = LayerKind::kAvgPool;
  layer.name = name;
  layer.inputs = {in};
  layer.kernel_h = s.h;
  layer.kernel_w = s.w;
  layer.out = {s.c, 1, 1};
  layer.forward_flops = double(s.elements());
  return Append(std::move(layer));
}

int ModelBuilder::Lrn(int in, const std::string& name, int size, float alpha, float beta,
                      float k) {
  Layer layer;
  layer.kind = LayerKind::kLrn;
  layer.name = name;
  layer.inputs = {in};
  layer.out = model_.layers[in].out;
  layer.lrn_size = size;
  layer.lrn_alpha = alpha;
  layer.lrn_beta = beta;
  layer.lrn_k = k;
  layer.forward_flops = double(size) * 2 * layer.out.elements();
  return Append(std::move(layer));
}

int ModelBuilder::FullyConnected(int in, const std::string& name, int outputs, bool relu) {
  Layer layer;
  layer.kind = LayerKind::kFullyConnected;
  layer.name = name;
  layer.inputs = {in};
  layer.outputs = outputs;
  layer.relu = relu;
  layer.out = {outputs, 1, 1};
  const int64_t fan_in = model_.layers[in].out.elements();
  layer.params.push_back({name + "/weights", fan_in * outputs, Layer::Param::Init::kFanIn, fan_in});
  layer.params.push_back({name + "/bias", outputs, Layer::Param::Init::kZero, 0});
  layer.forward_flops = 2.0 * fan_in * outputs;
  return Append(std::move(layer));
}

int ModelBuilder::Concat(const std::vector<int>& ins, const std::string& name) {
  Layer layer;
  layer.kind = LayerKind::kConcat;
  layer.name = name;
  layer.inputs = ins;
  if (ins.empty()) {
    if (error_.empty()) error_ = name + ": concatenation of nothing";
    return Append(std::move(layer));
  }
  layer.out = model_.layers[ins[0]].out;
  layer.out.c = 0;
  for (int in : ins) {
    const Shape& s = model_.layers[in].out;
    if ((s.h != layer.out.h || s.w != layer.out.w) && error_.empty())
      error_ = absl::StrCat(name, ": inputs differ in height or width");
    layer.out.c += s.c;
  }
  return Append(std::move(layer));
}

int ModelBuilder::Add(int a, int b, const std::string& name) {
  Layer layer;
  layer.kind = LayerKind::kAdd;
  layer.name = name;
  layer.inputs = {a, b};
  layer.out = model_.layers[a].out;
  if (!(model_.layers[a].out == model_.layers[b].out) && error_.empty())
    error_ = absl::StrCat(name, ": summands differ in shape");
  layer.forward_flops = double(layer.out.elements());
  return Append(std::move(layer));
}

absl::StatusOr<Model> ModelBuilder::Finish(int in) {
  Layer layer;
  layer.kind = LayerKind::kSoftmaxCrossEntropy;
  layer.name = "loss";
  layer.inputs = {in};
  layer.out = {1, 1, 1};
  model_.num_classes = static_cast<int>(model_.layers[in].out.elements());
  Append(std::move(layer));
  if (!error_.empty()) return absl::InvalidArgumentError(model_.name + ": " + error_);
  return std::move(model_);
}

namespace {

// torchvision's AlexNet, which is the one-GPU "AlexNet v2" of the seed's benchmarks (64, 192,
// 384, 256, 256 channels, no LRN, no grouping).
absl::StatusOr<Model> AlexNet() {
  ModelBuilder b("alexnet", {3, 224, 224});
  int x = b.Conv(0, "conv1", 64, 11, 11, 4, 2);
  x = b.MaxPool(x, "pool1", 3, 2);
  x = b.Conv(x, "conv2", 192, 5, 5, 1, 2);
  x = b.MaxPool(x, "pool2", 3, 2);
  x = b.Conv(x, "conv3", 384, 3, 3, 1, 1);
  x = b.Conv(x, "conv4", 256, 3, 3, 1, 1);
  x = b.Conv(x, "conv5", 256, 3, 3, 1, 1);
  x = b.MaxPool(x, "pool5", 3, 2);
  x = b.FullyConnected(x, "fc6", 4096, true);
  x = b.FullyConnected(x, "fc7", 4096, true);
  x = b.FullyConnected(x, "fc8", 1000, false);
  return b.Finish(x);
}

// OverFeat "fast" as in convnet-benchmarks (231x231 input, non-overlapping pools).
absl::StatusOr<Model> OverFeat() {
  ModelBuilder b("overfeat", {3, 231, 231});
  int x = b.Conv(0, "conv1", 96, 11, 11, 4, 0);
  x = b.MaxPool(x, "pool1", 2, 2);
  x = b.Conv(x, "conv2", 256, 5, 5, 1, 0);
  x = b.MaxPool(x, "pool2", 2, 2);
  x = b.Conv(x, "conv3", 512, 3, 3, 1, 1);
  x = b.Conv(x, "conv4", 1024, 3, 3, 1, 1);
  x = b.Conv(x, "conv5", 1024, 3, 3, 1, 1);
  x = b.MaxPool(x, "pool5", 2, 2);
  x = b.FullyConnected(x, "fc6", 3072, true);
  x = b.FullyConnected(x, "fc7", 4096, true);
  x = b.FullyConnected(x, "fc8", 1000, false);
  return b.Finish(x);
}

// VGG (torchvision layout): 3x3 convolutions with bias and ReLU, 2x2 pools, three FC.
absl::StatusOr<Model> Vgg(const std::string& name, const std::vector<int>& blocks) {
  ModelBuilder b(name, {3, 224, 224});
  static constexpr int kChannels[] = {64, 128, 256, 512, 512};
  int x = 0;
  for (size_t block = 0; block < blocks.size(); ++block) {
    for (int i = 0; i < blocks[block]; ++i)
      x = b.Conv(x, absl::StrCat("conv", block + 1, "_", i + 1), kChannels[block], 3, 3, 1, 1);
    x = b.MaxPool(x, absl::StrCat("pool", block + 1), 2, 2);
  }
  x = b.FullyConnected(x, "fc6", 4096, true);
  x = b.FullyConnected(x, "fc7", 4096, true);
  x = b.FullyConnected(x, "fc8", 1000, false);
  return b.Finish(x);
}

// Inception-v3 in the Keras layout (299x299; convolutions without bias, each followed by
// batch normalization with trainable scale and shift and a ReLU; no auxiliary head).
absl::StatusOr<Model> InceptionV3() {
  ModelBuilder b("inception3", {3, 299, 299});
  constexpr int S = ModelBuilder::kSame;
  auto cbn = [&b](int in, const std::string& name, int outputs, int kh, int kw, int stride = 1,
                  int pad = ModelBuilder::kSame) { return b.ConvBn(in, name, outputs, kh, kw, stride, pad); };
  int x = cbn(0, "conv1", 32, 3, 3, 2, 0);
  x = cbn(x, "conv2", 32, 3, 3, 1, 0);
  x = cbn(x, "conv3", 64, 3, 3);
  x = b.MaxPool(x, "pool1", 3, 2);
  x = cbn(x, "conv4", 80, 1, 1, 1, 0);
  x = cbn(x, "conv5", 192, 3, 3, 1, 0);
  x = b.MaxPool(x, "pool2", 3, 2);
  // 35x35: mixed0..2.
  for (int m = 0; m < 3; ++m) {
    std::string p = absl::StrCat("mixed", m, "/");
    int b1 = cbn(x, p + "1x1", 64, 1, 1);
    int b5 = cbn(cbn(x, p + "5x5_1", 48, 1, 1), p + "5x5_2", 64, 5, 5);
    int b3 = cbn(cbn(cbn(x, p + "3x3dbl_1", 64, 1, 1), p + "3x3dbl_2", 96, 3, 3), p + "3x3dbl_3",
                 96, 3, 3);
    int bp = cbn(b.AvgPool(x, p + "pool", 3, 1, S), p + "pool_1x1", m == 0 ? 32 : 64, 1, 1);
    x = b.Concat({b1, b5, b3, bp}, p + "concat");
  }
  {  // mixed3: 35x35 -> 17x17.
    std::string p = "mixed3/";
    int b3 = cbn(x, p + "3x3", 384, 3, 3, 2, 0);
    int bd = cbn(cbn(cbn(x, p + "3x3dbl_1", 64, 1, 1), p + "3x3dbl_2", 96, 3, 3), p + "3x3dbl_3",
                 96, 3, 3, 2, 0);
    int bp = b.MaxPool(x, p + "pool", 3, 2);
    x = b.Concat({b3, bd, bp}, p + "concat");
  }
  // 17x17: mixed4..7.
  for (int m = 4; m < 8; ++m) {
    std::string p = absl::StrCat("mixed", m, "/");
    int c = m == 4 ? 128 : m == 7 ? 192 : 160;
    int b1 = cbn(x, p + "1x1", 192, 1, 1);
    int b7 = cbn(cbn(cbn(x, p + "7x7_1", c, 1, 1), p + "7x7_2", c, 1, 7), p + "7x7_3", 192, 7, 1);
    int bd = cbn(x, p + "7x7dbl_1", c, 1, 1);
    bd = cbn(bd, p + "7x7dbl_2", c, 7, 1);
    bd = cbn(bd, p + "7x7dbl_3", c, 1, 7);
    bd = cbn(bd, p + "7x7dbl_4", c, 7, 1);
    bd = cbn(bd, p + "7x7dbl_5", 192, 1, 7);
    int bp = cbn(b.AvgPool(x, p + "pool", 3, 1, S), p + "pool_1x1", 192, 1, 1);
    x = b.Concat({b1, b7, bd, bp}, p + "concat");
  }
  {  // mixed8: 17x17 -> 8x8.
    std::string p = "mixed8/";
    int b3 = cbn(cbn(x, p + "3x3_1", 192, 1, 1), p + "3x3_2", 320, 3, 3, 2, 0);
    int b7 = cbn(x, p + "7x7x3_1", 192, 1, 1);
    b7 = cbn(b7, p + "7x7x3_2", 192, 1, 7);
    b7 = cbn(b7, p + "7x7x3_3", 192, 7, 1);
    b7 = cbn(b7, p + "7x7x3_4", 192, 3, 3, 2, 0);
    int bp = b.MaxPool(x, p + "pool", 3, 2);
    x = b.Concat({b3, b7, bp}, p + "concat");
  }
  // 8x8: mixed9, mixed10.
  for (int m = 9; m < 11; ++m) {
    std::string p = absl::StrCat("mixed", m, "/");
    int b1 = cbn(x, p + "1x1", 320, 1, 1);
    int b3 = cbn(x, p + "3x3_1", 384, 1, 1);
    b3 = b.Concat({cbn(b3, p + "3x3_2a", 384, 1, 3), cbn(b3, p + "3x3_2b", 384, 3, 1)},
                  p + "3x3_concat");
    int bd = cbn(cbn(x, p + "3x3dbl_1", 448, 1, 1), p + "3x3dbl_2", 384, 3, 3);
    bd = b.Concat({cbn(bd, p + "3x3dbl_3a", 384, 1, 3), cbn(bd, p + "3x3dbl_3b", 384, 3, 1)},
                  p + "3x3dbl_concat");
    int bp = cbn(b.AvgPool(x, p + "pool", 3, 1, S), p + "pool_1x1", 192, 1, 1);
    x = b.Concat({b1, b3, bd, bp}, p + "concat");
  }
  x = b.GlobalAvgPool(x, "avgpool");
  x = b.FullyConnected(x, "fc", 1000, false);
  return b.Finish(x);
}

// ResNet-50 v1.5 (torchvision: the stride sits on the 3x3 convolution of a bottleneck).
absl::StatusOr<Model> ResNet50() {
  ModelBuilder b("resnet50", {3, 224, 224});
  int x = b.ConvBn(0, "conv1", 64, 7, 7, 2, 3);
  x = b.MaxPool(x, "pool1", 3, 2, 1);
  static constexpr int kBlocks[] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    const int width = 64 << stage;
    for (int block = 0; block < kBlocks[stage]; ++block) {
      std::string p = absl::StrCat("layer", stage + 1, ".", block, "/");
      const int stride = (block == 0 && stage > 0) ? 2 : 1;
      int y = b.ConvBn(x, p + "conv1", width, 1, 1);
      y = b.ConvBn(y, p + "conv2", width, 3, 3, stride, 1);
      y = b.ConvBn(y, p + "conv3", width * 4, 1, 1, 1, 0, /*relu=*/false);
      int shortcut = x;
      if (block == 0)
        shortcut = b.ConvBn(x, p + "downsample", width * 4, 1, 1, stride, 0, /*relu=*/false);
      x = b.Relu(b.Add(y, shortcut, p + "add"), p + "relu");
    }
  }
  x = b.GlobalAvgPool(x, "avgpool");
  x = b.FullyConnected(x, "fc", 1000, false);
  return b.Finish(x);
}

// A CIFAR-sized network for quick end-to-end runs and tests (seconds, not minutes).
absl::StatusOr<Model> Tiny() {
  ModelBuilder b("tiny", {3, 32, 32});
  int x = b.Conv(0, "conv1", 16, 3, 3, 1, 1);
  x = b.MaxPool(x, "pool1", 2, 2);
  x = b.Conv(x, "conv2", 32, 3, 3, 1, 1);
  x = b.MaxPool(x, "pool2", 2, 2);
  x = b.FullyConnected(x, "fc3", 64, true);
  x = b.FullyConnected(x, "fc4", 10, false);
  return b.Finish(x);
}

}  // namespace

std::vector<std::string> ModelNames() {
  return {"alexnet", "overfeat", "vgg11", "vgg16", "inception3", "resnet50", "tiny"};
}

absl::StatusOr<Model> BuildModel(absl::string_view name) {
  if (name == "alexnet") return AlexNet();
  if (name == "overfeat") return OverFeat();
  if (name == "vgg11" || name == "vgg_a") return Vgg("vgg11", {1, 1, 2, 2, 2});
  if (name == "vgg16") return Vgg("vgg16", {2, 2, 3, 3, 3});
  if (name == "inception3" || name == "inception_v3") return InceptionV3();
  if (name == "resnet50") return ResNet50();
  if (name == "tiny") return Tiny();
  return absl::InvalidArgumentError(absl::StrCat("unknown model '", name, "'; known: ",
                                                 absl::StrJoin(ModelNames(), ", ")));
}

}  // namespace psbench::trainer
