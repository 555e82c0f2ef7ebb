// Every parameter tensor of the real models, in order, has the shape an independent source
// gives it: torchvision's own parameter list for AlexNet, VGG-11, VGG-16 and Inception-v3 (as
// PyTorch wrote it out: payloads/traces/*.json, `params[].shape`), torchvision's ResNet-50
// definition (its Bottleneck's registration order, written out below), and the OverFeat
// paper's fast model. The published totals (model_test) could hide two wrong layers that
// cancel; shapes in order cannot.
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "worker/trainer/model.h"

namespace psbench::trainer {
namespace {

using Shapes = std::vector<std::vector<int64_t>>;

struct Named {
  std::string name;
  std::vector<int64_t> shape;
};

// The shapes psbench's model gives its parameters, in the order engines expose them (OIHW
// weights, OI fully connected weights over the flattened C x H x W input, C-vectors), each
// checked against the parameter's count.
std::vector<Named> PsbenchShapes(const Model& model) {
  std::vector<Named> out;
  for (const Layer& layer : model.layers) {
    for (const Layer::Param& p : layer.params) {
      const Shape in = layer.inputs.empty() ? Shape{} : model.layers[layer.inputs[0]].out;
      const bool weights = p.name.ends_with("/weights");
      std::vector<int64_t> shape;
      switch (layer.kind) {
        case LayerKind::kConvolution:
          shape = weights ? std::vector<int64_t>{layer.outputs, in.c, layer.kernel_h, layer.kernel_w}
                          : std::vector<int64_t>{layer.outputs};
          break;
        case LayerKind::kFullyConnected:
          shape = weights ? std::vector<int64_t>{layer.outputs, in.elements()} : std::vector<int64_t>{layer.outputs};
          break;
        case LayerKind::kBatchNorm:
          shape = {layer.out.c};
          break;
        default:
          ADD_FAILURE() << p.name << ": a parameter of a " << LayerKindName(layer.kind) << " layer";
      }
      int64_t count = 1;
      for (int64_t d : shape) count *= d;
      EXPECT_EQ(count, p.count) << p.name << ": the shape derived from the layer does not hold its count";
      out.push_back({p.name, shape});
    }
  }
  return out;
}

// torchvision's parameter list as PyTorch wrote it (payloads/traces/MODEL.json).
std::vector<Named> TorchvisionTrace(const std::string& file) {
  std::ifstream in(std::string(PSBENCH_SOURCE_DIR) + "/payloads/traces/" + file);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::vector<Named> out;
  if (j.is_discarded() || !j.contains("params")) {
    ADD_FAILURE() << file << ": not a reference trace";
    return out;
  }
  for (const nlohmann::json& p : j["params"]) out.push_back({p["name"], p["shape"].get<std::vector<int64_t>>()});
  return out;
}

// torchvision.models.resnet50: conv1, bn1, then per Bottleneck conv1, bn1, conv2, bn2, conv3,
// bn3 and, in the first block of a stage, downsample (1x1 conv, bn); fc. BN: weight, bias.
std::vector<Named> TorchvisionResnet50() {
  std::vector<Named> out;
  auto conv = [&](const std::string& name, int64_t o, int64_t i, int64_t k) {
    out.push_back({name + ".weight", {o, i, k, k}});
  };
  auto bn = [&](const std::string& name, int64_t c) {
    out.push_back({name + ".weight", {c}});
    out.push_back({name + ".bias", {c}});
  };
  conv("conv1", 64, 3, 7);
  bn("bn1", 64);
  int64_t in = 64;
  const int blocks[] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t width = int64_t{64} << stage;
    for (int b = 0; b < blocks[stage]; ++b) {
      const std::string at = "layer" + std::to_string(stage + 1) + "." + std::to_string(b);
      conv(at + ".conv1", width, in, 1);
      bn(at + ".bn1", width);
      conv(at + ".conv2", width, width, 3);
      bn(at + ".bn2", width);
      conv(at + ".conv3", 4 * width, width, 1);
      bn(at + ".bn3", 4 * width);
      if (b == 0) {
        conv(at + ".downsample.0", 4 * width, in, 1);
        bn(at + ".downsample.1", 4 * width);
      }
      in = 4 * width;
    }
  }
  out.push_back({"fc.weight", {1000, 2048}});
  out.push_back({"fc.bias", {1000}});
  return out;
}

// OverFeat's fast model (Sermanet et al. 2014, table 1) on 231 x 231 images: five
// convolutions, then 3072, 4096 and 1000 features over the 1024 x 6 x 6 maps.
std::vector<Named> OverfeatPaper() {
  std::vector<Named> out;
  auto layer = [&](const std::string& name, std::vector<int64_t> weights) {
    const int64_t outputs = weights[0];
    out.push_back({name + ".weight", std::move(weights)});
    out.push_back({name + ".bias", {outputs}});
  };
  layer("conv1", {96, 3, 11, 11});
  layer("conv2", {256, 96, 5, 5});
  layer("conv3", {512, 256, 3, 3});
  layer("conv4", {1024, 512, 3, 3});
  layer("conv5", {1024, 1024, 3, 3});
  layer("fc6", {3072, 1024 * 6 * 6});
  layer("fc7", {4096, 3072});
  layer("fc8", {1000, 4096});
  return out;
}

struct Case {
  const char* model;
  std::vector<Named> (*expected)();
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.model; }

class ModelShapesTest : public ::testing::TestWithParam<Case> {};

TEST_P(ModelShapesTest, EveryTensorInOrder) {
  absl::StatusOr<Model> model = BuildModel(GetParam().model);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<Named> ours = PsbenchShapes(*model);
  const std::vector<Named> theirs = GetParam().expected();
  ASSERT_FALSE(theirs.empty());
  EXPECT_EQ(ours.size(), theirs.size()) << "parameter tensors";
  for (size_t i = 0; i < ours.size() && i < theirs.size(); ++i) {
    EXPECT_EQ(ours[i].shape, theirs[i].shape) << "tensor " << i << ": psbench's " << ours[i].name << " against "
                                              << theirs[i].name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, ModelShapesTest,
    ::testing::Values(Case{"alexnet", [] { return TorchvisionTrace("alexnet.json"); }},
                      Case{"vgg11", [] { return TorchvisionTrace("vgg11.json"); }},
                      Case{"vgg16", [] { return TorchvisionTrace("vgg16.json"); }},
                      Case{"inception3", [] { return TorchvisionTrace("inception_v3.json"); }},
                      Case{"resnet50", TorchvisionResnet50}, Case{"overfeat", OverfeatPaper}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.model); });

}  // namespace
}  // namespace psbench::trainer
