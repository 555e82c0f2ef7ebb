// Every layer's backward pass on the CPU engine against finite differences of its forward
// pass. Each test builds a tiny model around one layer kind (a small convolution before it, so
// the layer's input gradient is exercised through that convolution's weight gradient; a
// classifier and the loss after it) and compares the gradient of EVERY parameter of the model,
// read back in the canonical layout, with central differences of Forward().
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"
#include "tests/trainer/trainer_test_util.h"
#include "worker/trainer/model.h"
#include "worker/trainer/network.h"

namespace psbench::trainer {
namespace {

using testing::BoundNetwork;
using testing::MakeBound;
using testing::SyntheticBatch;

constexpr int kClasses = 5;
constexpr int kBatch = 3;

// How a coordinate x of a parameter is checked: the central difference
//   fd = (L(x + h) - L(x - h)) / 2h  against the backward pass's gradient g(x), with
//   |fd - g(x)| <= kRelTol * max(|fd|, |g(x)|) + kAbsTol + kLossNoise / h  (+ a kink's jump).
// - kRelTol (2 %) and kAbsTol (2e-4): on a smooth stretch a central difference is exact up
//   to O(h^2) (third derivative), far below 2 %; a wrong backward (a scaled gradient, a lost
//   accumulation, a misrouted slice) is off by much more. Every parameter must show a sampled
//   |fd| above kNontrivial = 2e-3 (10 x kAbsTol), so no parameter's check is vacuous.
// - kLossNoise: the loss is summed in double, but the network is float32; moving x changes
//   its roundings, which jitters L around its smooth course. Measured on these models at
//   every sampled coordinate: L(x + k * 1e-6) for k = -20..20, minus its linear part, spans
//   at most 2.6e-6 (99 % of them under 1.7e-6). A difference over 2h carries at most
//   2.6e-6 / 2h = 1.3e-6 / h of it; kLossNoise / h with some margin.
// - ReLU kinks and max-pool switches: a difference across one measures the average of two
//   slopes, not g(x). The backward pass at x - h and x + h shows it: on a smooth stretch
//   (g(x - h) + g(x + h)) / 2 = g(x) + O(h^2); a switch in between moves it by half the jump.
//   So the step starts at kStep and is quartered while that happens, down to kMinStep. A
//   switch closer to x than kMinStep (a few coordinates in these models) leaves fd off by at
//   most about the same amount, which then joins the tolerance; at most kMaxKinked of a
//   parameter's coordinates may need that. Everything (data, initial values, coordinates,
//   one thread) is deterministic, so each check passes or fails the same way every run.
constexpr double kStep = 4e-3;
constexpr double kMinStep = 2.5e-4;
constexpr double kLossNoise = 1.5e-6;
constexpr double kRelTol = 2e-2;
constexpr double kAbsTol = 2e-4;
constexpr double kNontrivial = 2e-3;
constexpr int kMaxKinked = 3;
constexpr int kSamples = 10;  // coordinates per parameter (all of them for smaller ones)

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer: deterministic on every platform
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
double Unit(uint64_t a, uint64_t b) {  // uniform in [-1, 1)
  return static_cast<double>(Mix(a ^ Mix(b)) >> 11) * 0x1.0p-52 - 1.0;
}

// The coordinates checked: the largest analytic gradients (where a wrong scale shows most)
// and a deterministic spread over the rest (where a wrong routing shows).
std::vector<int64_t> SampleCoordinates(const std::vector<float>& analytic, uint64_t salt) {
  const int64_t n = static_cast<int64_t>(analytic.size());
  std::vector<int64_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  if (n <= kSamples) return all;
  const int top = kSamples / 2;
  std::partial_sort(all.begin(), all.begin() + top, all.end(), [&](int64_t a, int64_t b) {
    return std::fabs(analytic[a]) > std::fabs(analytic[b]);
  });
  std::vector<int64_t> picked(all.begin(), all.begin() + top);
  for (uint64_t k = 0; static_cast<int>(picked.size()) < kSamples; ++k) {
    const int64_t c = static_cast<int64_t>(Mix(salt * 1000003 + k) % uint64_t(n));
    if (std::find(picked.begin(), picked.end(), c) == picked.end()) picked.push_back(c);
  }
  return picked;
}

// Moves zero-initialized biases and betas and one-initialized gammas to a generic point, so
// that, e.g., swapped scale and shift gradients cannot agree by accident.
void Perturb(Network& net) {
  for (int p = 0; p < static_cast<int>(net.params().size()); ++p) {
    const Layer& layer = net.model().layers[net.params()[p].layer];
    for (const Layer::Param& spec : layer.params) {
      if (spec.name != net.params()[p].name || spec.init == Layer::Param::Init::kFanIn) continue;
      std::vector<float> v = net.ReadParam(p);
      const double base = spec.init == Layer::Param::Init::kOne ? 1.0 : 0.0;
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = static_cast<float>(base + 0.2 * Unit(uint64_t(p) + 77, i));
      net.WriteParam(p, v);
    }
  }
}

void CheckGradients(const absl::StatusOr<Model>& built, int batch = kBatch) {
  ASSERT_TRUE(built.ok()) << built.status();
  const Model& model = *built;
  ASSERT_EQ(model.num_classes, kClasses);
  // One thread: every Forward() of the same parameters is bit-identical.
  BoundNetwork b = MakeBound(model, batch, /*threads=*/1, /*seed=*/11);
  ASSERT_TRUE(b.net);
  Network& net = *b.net;
  Perturb(net);
  testing::Batch data = SyntheticBatch(model, batch, /*seed=*/5, /*first=*/0);
  net.SetBatch(data.images, data.labels);

  const double loss = net.Forward();
  ASSERT_TRUE(std::isfinite(loss));
  const int params = static_cast<int>(net.params().size());
  std::vector<int> ready;
  net.Backward([&](int p) { ready.push_back(p); });
  // Every parameter's gradient is announced exactly once.
  std::vector<int> sorted = ready;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> expected(params);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(sorted, expected) << "Backward's ready() callbacks";

  std::vector<std::vector<float>> analytic(params);
  for (int p = 0; p < params; ++p) analytic[p] = net.ReadGrad(p);
  // A second step on the same batch gives the same loss and gradients: nothing accumulates
  // from one step into the next.
  EXPECT_EQ(net.Forward(), loss);
  net.Backward([](int) {});
  for (int p = 0; p < params; ++p) {
    EXPECT_TRUE(net.ReadGrad(p) == analytic[p]) << net.params()[p].name << " after a second step";
    // What a blocked layout pads must hold zero gradient: the trainer's optimizer (and the
    // PS) work elementwise on the raw buffers.
    double raw = 0, plain = 0;
    for (size_t i = 0; i < b.floats(p); ++i) raw += double(b.grad(p)[i]) * b.grad(p)[i];
    for (float g : analytic[p]) plain += double(g) * g;
    EXPECT_NEAR(raw, plain, 1e-5 * plain + 1e-30)
        << net.params()[p].name << ": gradient padding is not zero";
  }

  for (int p = 0; p < params; ++p) {
    const std::string& name = net.params()[p].name;
    std::vector<float> values = net.ReadParam(p);
    ASSERT_EQ(values.size(), analytic[p].size()) << name;
    // Loss and backward gradient with coordinate c moved to x (then put back).
    struct Point {
      double x, loss, grad;
    };
    auto at = [&](int64_t c, double x) {
      const float original = values[c];
      values[c] = static_cast<float>(x);
      Point point{values[c], 0, 0};  // the float actually used
      net.WriteParam(p, values);
      point.loss = net.Forward();
      net.Backward([](int) {});
      point.grad = net.ReadGrad(p)[c];
      values[c] = original;
      return point;
    };
    double largest = 0;
    int kinked = 0;
    for (int64_t c : SampleCoordinates(analytic[p], uint64_t(p))) {
      const double an = analytic[p][c];
      double h = kStep, fd = 0, kink = 0;
      for (;; h /= 4) {
        const Point up = at(c, double(values[c]) + h), down = at(c, double(values[c]) - h);
        fd = (up.loss - down.loss) / (up.x - down.x);
        kink = std::fabs(0.5 * (up.grad + down.grad) - an);
        if (kink <= 0.5 * (kRelTol * std::fabs(an) + kAbsTol)) {
          kink = 0;  // smooth enough over [x - h, x + h]
          break;
        }
        if (h / 4 < kMinStep) break;
      }
      if (kink > 0) ++kinked;
      largest = std::max(largest, std::fabs(fd));
      const double tolerance =
          kRelTol * std::max(std::fabs(fd), std::fabs(an)) + kAbsTol + kLossNoise / h + kink;
      EXPECT_LE(std::fabs(fd - an), tolerance)
          << model.name << ": " << name << "[" << c << "] finite difference " << fd
          << " (step " << h << (kink > 0 ? ", across a kink" : "") << ") vs backward " << an;
    }
    net.WriteParam(p, values);
    EXPECT_GT(largest, kNontrivial) << model.name << ": " << name
                                    << " has no sampled gradient large enough to check";
    EXPECT_LE(kinked, kMaxKinked) << model.name << ": " << name
                                  << ": too many coordinates next to a kink";
  }
  // Restored exactly: the forward pass is where it started.
  EXPECT_EQ(net.Forward(), loss);
}

// The models: input 3 x 8 x 8 (9 x 9 where odd sizes matter), a small convolution ("pre"),
// the layer under test, a classifier to kClasses and the loss.
ModelBuilder Builder(const std::string& name, int size = 8) {
  return ModelBuilder(name, {3, size, size});
}
int Pre(ModelBuilder& b, int channels = 16, bool relu = false, bool bias = true) {
  return b.Conv(0, "pre", channels, 3, 3, 1, 1, bias, relu);
}
absl::StatusOr<Model> Classify(ModelBuilder& b, int x) {
  return b.Finish(b.FullyConnected(x, "fc", kClasses, false));
}

// Convolution ----------------------------------------------------------------------------------

TEST(GradientTest, ConvolutionWithBiasAndRelu) {
  ModelBuilder b = Builder("conv_bias_relu");
  int x = b.Conv(Pre(b), "conv", 16, 3, 3, 1, 1, /*bias=*/true, /*relu=*/true);
  CheckGradients(Classify(b, x));
}

TEST(GradientTest, ConvolutionWithoutBiasOrRelu) {
  ModelBuilder b = Builder("conv_plain");
  int x = b.Conv(Pre(b), "conv", 12, 3, 3, 1, 1, /*bias=*/false, /*relu=*/false);
  CheckGradients(Classify(b, x));
}

TEST(GradientTest, ConvolutionWithBiasWithoutRelu) {
  ModelBuilder b = Builder("conv_bias");
  int x = b.Conv(Pre(b), "conv", 20, 3, 3, 1, 0, /*bias=*/true, /*relu=*/false);
  CheckGradients(Classify(b, x));
}

TEST(GradientTest, ConvolutionWithReluWithoutBias) {
  ModelBuilder b = Builder("conv_relu");
  int x = b.Conv(Pre(b), "conv", 16, 3, 3, 1, 1, /*bias=*/false, /*relu=*/true);
  CheckGradients(Classify(b, x));
}

TEST(GradientTest, ConvolutionStrideTwoSamePadding) {
  // 8x8, 3x3, stride 2, SAME: 4x4 out, padding 0 before and 1 after (asymmetric).
  ModelBuilder b = Builder("conv_stride2_same");
  int x = b.Conv(Pre(b), "conv", 16, 3, 3, 2, ModelBuilder::kSame, /*bias=*/true, /*relu=*/true);
  CheckGradients(Classify(b, x));
}

TEST(GradientTest, ConvolutionStridedOddInput) {
  // 9x9 with explicit padding 2, 5x5, stride 2: 5x5 out; then 1x3 and 3x1 SAME kernels.
  ModelBuilder b = Builder("conv_odd", 9);
  int x = b.Conv(Pre(b), "conv5x5", 16, 5, 5, 2, 2, /*bias=*/true, /*relu=*/false);
  x = b.Conv(x, "conv1x3", 8, 1, 3, 1, ModelBuilder::kSame, /*bias=*/false, /*relu=*/true);
  x = b.Conv(x, "conv3x1", 8, 3, 1, 1, ModelBuilder::kSame, /*bias=*/true, /*relu=*/false);
  CheckGradients(Classify(b, x));
}

TEST(GradientTest, ConvolutionOnTheImages) {
  // The first convolution has no input gradient to compute; stride 4 and an 11x11 kernel as
  // in AlexNet, on a 19x19 image.
  ModelBuilder b = Builder("conv_first", 19);
  int x = b.Conv(0, "conv", 16, 11, 11, 4, 2, /*bias=*/true, /*relu=*/true);
  CheckGradients(Classify(b, x));
}

// Batch normalization ------------------------------------------------------------------------

// (A bias right before batch norm has no gradient: the batch mean absorbs it.)
TEST(GradientTest, BatchNormWithRelu) {
  ModelBuilder b = Builder("bn_relu");
  int x = b.BatchNorm(Pre(b, 24, /*relu=*/false, /*bias=*/false), "bn", /*relu=*/true);
  CheckGradients(Classify(b, x));
}

TEST(GradientTest, BatchNormWithoutRelu) {
  ModelBuilder b = Builder("bn");
  int x = b.BatchNorm(Pre(b, 16, /*relu=*/false, /*bias=*/false), "bn", /*relu=*/false);
  CheckGradients(Classify(b, x));
}

TEST(GradientTest, ConvBnChain) {
  // Convolutions without bias, each followed by BN (Inception, ResNet), 5 channels.
  ModelBuilder b = Builder("convbn");
  int x = b.ConvBn(Pre(b), "cbn1", 5, 3, 3, 1, 1, /*relu=*/true);
  x = b.ConvBn(x, "cbn2", 16, 1, 1, 1, 0, /*relu=*/false);
  CheckGradients(Classify(b, x));
}

TEST(GradientTest, BatchNormOnTheImages) {
  ModelBuilder b = Builder("bn_first");
  int x = b.BatchNorm(0, "bn", /*relu=*/false);
  x = b.Conv(x, "conv", 8, 3, 3, 1, 1, /*bias=*/true, /*relu=*/false);
  CheckGradients(Classify(b, x));
}

// ReLU ------------------------------------------------------------------------------------------

TEST(GradientTest, Relu) {
  ModelBuilder b = Builder("relu");
  int x = b.Relu(Pre(b, 16), "relu");
  CheckGradients(Classify(b, x));
}

// Pooling ---------------------------------------------------------------------------------------

TEST(GradientTest, MaxPoolOverlapping) {
  ModelBuilder b = Builder("maxpool_3s2", 9);
  int x = b.MaxPool(Pre(b), "pool", 3, 2);  // 9x9 -> 4x4
  CheckGradients(Classify(b, x));
}

TEST(GradientTest, MaxPoolPadded) {
  ModelBuilder b = Builder("maxpool_pad");
  int x = b.MaxPool(Pre(b, 16, /*relu=*/true), "pool", 3, 2, 1);  // ResNet's: 8x8 -> 4x4
  CheckGradients(Classify(b, x));
}

TEST(GradientTest, MaxPoolSame) {
  ModelBuilder b = Builder("maxpool_same");
  int x = b.MaxPool(Pre(b), "pool", 3, 2, ModelBuilder::kSame);  // 8x8 -> 4x4, pad 0/1
  CheckGradients(Classify(b, x));
}

TEST(GradientTest, MaxPoolNonOverlapping) {
  ModelBuilder b = Builder("maxpool_2s2");
  int x = b.MaxPool(Pre(b), "pool", 2, 2);
  CheckGradients(Classify(b, x));
}

TEST(GradientTest, AvgPoolSameExcludesPadding) {
  // Inception's 3x3 stride 1 SAME: the border windows average fewer pixels.
  ModelBuilder b = Builder("avgpool_same");
  int x = b.AvgPool(Pre(b), "pool", 3, 1, ModelBuilder::kSame);
  CheckGradients(Classify(b, x));
}

TEST(GradientTest, AvgPoolStridedPadded) {
  ModelBuilder b = Builder("avgpool_pad", 9);
  int x = b.AvgPool(Pre(b), "pool", 3, 2, 1);  // 9x9 -> 5x5
  CheckGradients(Classify(b, x));
}

TEST(GradientTest, GlobalAvgPool) {
  ModelBuilder b = Builder("global_avgpool");
  int x = b.GlobalAvgPool(Pre(b, 24, /*relu=*/true), "pool");
  CheckGradients(Classify(b, x));
}

// LRN --------------------------------------------------------------------------------------------

TEST(GradientTest, Lrn) {
  // A large alpha, so that the normalization matters to the gradient.
  ModelBuilder b = Builder("lrn");
  int x = b.Lrn(Pre(b, 16), "lrn", 5, 0.5f, 0.75f, 2.0f);
  CheckGradients(Classify(b, x));
}

// Fully connected ------------------------------------------------------------------------------

TEST(GradientTest, FullyConnectedFrom4dWithRelu) {
  ModelBuilder b = Builder("fc4d_relu");
  int x = b.FullyConnected(Pre(b), "fc1", 20, /*relu=*/true);
  CheckGradients(Classify(b, x));  // and the classifier from a 2-D input
}

TEST(GradientTest, FullyConnectedFrom2d) {
  ModelBuilder b = Builder("fc2d");
  int x = b.FullyConnected(Pre(b), "fc1", 24, /*relu=*/false);
  x = b.FullyConnected(x, "fc2", 12, /*relu=*/true);
  x = b.FullyConnected(x, "fc3", 16, /*relu=*/false);
  CheckGradients(Classify(b, x));
}

TEST(GradientTest, FullyConnectedFromPooled) {
  ModelBuilder b = Builder("fc_pooled");
  int x = b.MaxPool(Pre(b, 16, /*relu=*/true), "pool", 2, 2);
  x = b.FullyConnected(x, "fc1", 20, /*relu=*/true);
  CheckGradients(Classify(b, x));
}

// Concatenation ------------------------------------------------------------------------------

TEST(GradientTest, ConcatAlignedBranches) {
  // 16 + 32 channels: every slice starts on a 16-channel block.
  ModelBuilder b = Builder("concat_aligned");
  int pre = Pre(b);
  int a = b.Conv(pre, "a", 16, 1, 1, 1, 0, true, true);
  int c = b.Conv(pre, "c", 32, 3, 3, 1, 1, true, false);
  int x = b.Concat({a, c}, "concat");
  x = b.Conv(x, "mix", 8, 1, 1, 1, 0, true, false);
  CheckGradients(Classify(b, x));
}

TEST(GradientTest, ConcatUnalignedBranches) {
  // 24 + 8 + 5 + 8 (a pool of pre) channels: slices start inside 16-channel blocks.
  ModelBuilder b = Builder("concat_unaligned");
  int pre = Pre(b);
  int a = b.Conv(pre, "a", 24, 1, 1, 1, 0, true, true);
  int c = b.Conv(pre, "c", 8, 3, 3, 1, 1, true, false);
  int d = b.ConvBn(pre, "d", 5, 3, 3, 1, 1, /*relu=*/true);
  int p = b.MaxPool(pre, "p", 3, 1, ModelBuilder::kSame);
  int x = b.Concat({a, c, d, p}, "concat");
  x = b.Conv(x, "mix", 8, 1, 1, 1, 0, true, false);
  CheckGradients(Classify(b, x));
}

TEST(GradientTest, ConcatIntoFullyConnected) {
  ModelBuilder b = Builder("concat_fc");
  int pre = Pre(b);
  int a = b.Conv(pre, "a", 5, 1, 1, 1, 0, true, false);
  int c = b.Conv(pre, "c", 16, 1, 1, 1, 0, true, false);
  CheckGradients(Classify(b, b.Concat({a, c}, "concat")));
}

TEST(GradientTest, NestedConcat) {
  // Inception's 8x8 blocks: a concatenation of two concatenations and a plain branch.
  ModelBuilder b = Builder("concat_nested");
  int pre = Pre(b);
  int s = b.Conv(pre, "s", 12, 1, 1, 1, 0, true, true);
  int inner1 = b.Concat({b.Conv(s, "s_1x3", 8, 1, 3, 1, ModelBuilder::kSame, true, false),
                         b.Conv(s, "s_3x1", 8, 3, 1, 1, ModelBuilder::kSame, true, false)},
                        "inner1");
  int inner2 = b.Concat({b.Conv(pre, "t_a", 20, 1, 1, 1, 0, true, false),
                         b.Conv(pre, "t_b", 4, 1, 1, 1, 0, true, false)},
                        "inner2");
  int plain = b.Conv(pre, "u", 3, 1, 1, 1, 0, true, false);
  int x = b.Concat({inner1, plain, inner2}, "outer");
  x = b.Conv(x, "mix", 8, 1, 1, 1, 0, true, false);
  CheckGradients(Classify(b, x));
}

// Residual add and gradient accumulation ---------------------------------------------------------

TEST(GradientTest, ResidualAddIdentityShortcut) {
  // pre feeds both the block and the add.
  ModelBuilder b = Builder("add_identity");
  int pre = Pre(b, 16);
  int y = b.ConvBn(pre, "c1", 8, 1, 1, 1, 0, true);
  y = b.ConvBn(y, "c2", 16, 3, 3, 1, 1, /*relu=*/false);
  int x = b.Relu(b.Add(y, pre, "add"), "relu");
  CheckGradients(Classify(b, x));
}

TEST(GradientTest, ResidualAddProjectionShortcut) {
  // ResNet's first block of a stage: stride 2 in the block and in the 1x1 shortcut; 24 channels.
  ModelBuilder b = Builder("add_projection");
  int pre = Pre(b);
  int y = b.ConvBn(pre, "c1", 8, 3, 3, 2, 1, true);
  y = b.ConvBn(y, "c2", 24, 1, 1, 1, 0, /*relu=*/false);
  int s = b.ConvBn(pre, "down", 24, 1, 1, 2, 0, /*relu=*/false);
  int x = b.Relu(b.Add(y, s, "add"), "relu");
  CheckGradients(Classify(b, x));
}

TEST(GradientTest, TensorWithTwoConsumers) {
  ModelBuilder b = Builder("two_consumers");
  int pre = Pre(b);
  int a = b.Conv(pre, "a", 8, 3, 3, 1, 1, true, true);
  int c = b.Conv(pre, "c", 8, 1, 1, 1, 0, true, false);
  CheckGradients(Classify(b, b.Add(a, c, "add")));
}

TEST(GradientTest, TensorWithFourConsumersOfEveryKind) {
  // pre's gradient sums a convolution's, a pool's, a concatenation slice's and an add's.
  ModelBuilder b = Builder("four_consumers");
  int pre = Pre(b, 16, /*relu=*/true);
  int a = b.Conv(pre, "a", 16, 3, 3, 1, 1, true, false);
  int p = b.AvgPool(pre, "p", 3, 1, ModelBuilder::kSame);
  int s = b.Add(a, pre, "add");
  int x = b.Concat({s, p, b.Conv(pre, "c", 5, 1, 1, 1, 0, true, false)}, "concat");
  CheckGradients(Classify(b, x));
}

TEST(GradientTest, AddOfATensorToItself) {
  ModelBuilder b = Builder("self_add");
  int pre = Pre(b);
  CheckGradients(Classify(b, b.Add(pre, pre, "add")));
}

TEST(GradientTest, ConsumersOfTheImages) {
  // The images feed two layers; they need no gradient.
  ModelBuilder b = Builder("image_consumers");
  int a = b.Conv(0, "a", 8, 3, 3, 1, 1, true, true);
  int c = b.Conv(0, "c", 8, 1, 1, 1, 0, true, false);
  CheckGradients(Classify(b, b.Concat({a, c}, "concat")));
}

// The loss ------------------------------------------------------------------------------------

TEST(GradientTest, LossOnPooledConvolution) {
  // Class scores straight from a global pool (c x 1 x 1, in a blocked layout), no classifier.
  ModelBuilder b = Builder("loss_4d");
  int x = b.Conv(Pre(b), "scores", kClasses, 3, 3, 1, 1, true, false);
  CheckGradients(b.Finish(b.GlobalAvgPool(x, "pool")));
}

TEST(GradientTest, LargerBatch) {
  ModelBuilder b = Builder("batch8");
  int x = b.ConvBn(Pre(b), "cbn", 16, 3, 3, 2, 1, true);
  CheckGradients(Classify(b, x), /*batch=*/8);
}

// Small whole networks -----------------------------------------------------------------------------

TEST(GradientTest, MiniInception) {
  ModelBuilder b = Builder("mini_inception", 12);
  constexpr int S = ModelBuilder::kSame;
  int x = b.ConvBn(0, "stem", 8, 3, 3, 2, 0, true);  // 12x12 -> 5x5
  int b1 = b.ConvBn(x, "1x1", 6, 1, 1, 1, S);
  int b5 = b.ConvBn(b.ConvBn(x, "5x5_1", 4, 1, 1, 1, S), "5x5_2", 8, 5, 5, 1, S);
  int bp = b.ConvBn(b.AvgPool(x, "pool", 3, 1, S), "pool_1x1", 5, 1, 1, 1, S);
  x = b.Concat({b1, b5, bp}, "concat");
  int r = b.ConvBn(x, "red_3x3", 8, 3, 3, 2, 0);
  int rp = b.MaxPool(x, "red_pool", 3, 2);
  x = b.Concat({r, rp}, "red_concat");
  x = b.GlobalAvgPool(x, "avgpool");
  CheckGradients(Classify(b, x));
}

TEST(GradientTest, MiniAlexNet) {
  ModelBuilder b = Builder("mini_alexnet", 19);
  int x = b.Conv(0, "conv1", 8, 5, 5, 2, 2);  // 10x10
  x = b.Lrn(x, "norm1", 5, 1e-2f, 0.75f, 1.0f);
  x = b.MaxPool(x, "pool1", 3, 2);            // 4x4
  x = b.Conv(x, "conv2", 16, 3, 3, 1, 1);
  x = b.FullyConnected(x, "fc6", 24, true);
  x = b.FullyConnected(x, "fc7", 16, true);
  CheckGradients(Classify(b, x));
}

// Broken engines --------------------------------------------------------------------------------

// Each test fault of the CPU engine (EngineFault in worker/trainer/dnnl_internal.h) armed in
// turn: the check of a model using the broken part must fail on a gradient. A check that
// cannot fail proves nothing.
struct Broken {
  const char* fault;
  absl::StatusOr<Model> (*model)();
};
void PrintTo(const Broken& b, std::ostream* os) { *os << b.fault; }

absl::StatusOr<Model> ConvModel() {
  ModelBuilder b = Builder("broken_conv");
  return Classify(b, b.Conv(Pre(b), "conv", 16, 3, 3, 1, 1, true, true));
}
absl::StatusOr<Model> ReluModel() {
  ModelBuilder b = Builder("broken_relu");
  return Classify(b, b.Relu(Pre(b, 16), "relu"));
}
absl::StatusOr<Model> ConcatModel() {
  ModelBuilder b = Builder("broken_concat");
  int pre = Pre(b);
  int x = b.Concat({b.Conv(pre, "a", 16, 1, 1, 1, 0, true, true), b.Conv(pre, "c", 32, 3, 3, 1, 1, true, false)},
                   "concat");
  return Classify(b, b.Conv(x, "mix", 8, 1, 1, 1, 0, true, false));
}
absl::StatusOr<Model> TwoConsumersModel() {
  ModelBuilder b = Builder("broken_two_consumers");
  int pre = Pre(b);
  return Classify(b, b.Add(b.Conv(pre, "a", 8, 3, 3, 1, 1, true, true), b.Conv(pre, "c", 8, 1, 1, 1, 0, true, false),
                           "add"));
}
absl::StatusOr<Model> BatchNormModel() {
  ModelBuilder b = Builder("broken_bn");
  return Classify(b, b.BatchNorm(Pre(b, 24, /*relu=*/false, /*bias=*/false), "bn", /*relu=*/true));
}
absl::StatusOr<Model> MaxPoolModel() {
  ModelBuilder b = Builder("broken_maxpool", 9);
  return Classify(b, b.MaxPool(Pre(b), "pool", 3, 2));
}
absl::StatusOr<Model> FullyConnectedModel() {
  ModelBuilder b = Builder("broken_fc");
  return Classify(b, b.FullyConnected(Pre(b), "fc1", 24, /*relu=*/false));
}

class BrokenEngineTest : public ::testing::TestWithParam<Broken> {};

TEST_P(BrokenEngineTest, GradientCheckFails) {
  ASSERT_EQ(setenv("PSBENCH_TEST_ENGINE_FAULT", GetParam().fault, 1), 0);
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter intercept(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    CheckGradients(GetParam().model());
  }
  unsetenv("PSBENCH_TEST_ENGINE_FAULT");
  int on_gradients = 0;
  std::string first;
  for (int i = 0; i < failures.size(); ++i) {
    const std::string message = failures.GetTestPartResult(i).message();
    if (first.empty()) first = message;
    if (message.find("vs backward") != std::string::npos) ++on_gradients;
  }
  EXPECT_GT(on_gradients, 0) << GetParam().fault << " went unnoticed by the gradient check ("
                             << failures.size() << " other failures; first: " << first << ")";
  // Unarmed, the same model passes (its check is not failing for another reason).
  CheckGradients(GetParam().model());
}

INSTANTIATE_TEST_SUITE_P(Faults, BrokenEngineTest,
                         ::testing::Values(Broken{"scaled-weight-gradient", ConvModel},
                                           Broken{"relu-without-mask", ReluModel},
                                           Broken{"concat-slice-misplaced", ConcatModel},
                                           Broken{"lost-accumulation", TwoConsumersModel},
                                           Broken{"batch-norm-swapped", BatchNormModel},
                                           Broken{"max-pool-as-average", MaxPoolModel},
                                           Broken{"fc-bias-lost", FullyConnectedModel}),
                         [](const ::testing::TestParamInfo<Broken>& info) {
                           std::string name = info.param.fault;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(BrokenEngineTest, UnknownFaultIsRefused) {
  absl::StatusOr<Model> model = ConvModel();
  ASSERT_TRUE(model.ok());
  ASSERT_EQ(setenv("PSBENCH_TEST_ENGINE_FAULT", "gentle", 1), 0);
  absl::StatusOr<std::unique_ptr<Network>> net = MakeNetwork("cpu", *model, 1, 1);
  unsetenv("PSBENCH_TEST_ENGINE_FAULT");
  ASSERT_FALSE(net.ok());
  EXPECT_EQ(net.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(net.status().message().find("lost-accumulation"), std::string::npos) << net.status();
}

}  // namespace
}  // namespace psbench::trainer
