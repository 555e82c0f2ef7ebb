// A small network learns the synthetic task: plain SGD with momentum, written here over the
// bound float buffers, drives the loss from chance (ln 10) well below it.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "tests/trainer/trainer_test_util.h"
#include "worker/trainer/model.h"
#include "worker/trainer/network.h"

namespace psbench::trainer {
namespace {

using testing::BoundNetwork;
using testing::MakeBound;
using testing::SyntheticBatch;

absl::StatusOr<Model> SmallNet() {
  ModelBuilder b("small", {3, 16, 16});
  int x = b.Conv(0, "conv1", 16, 3, 3, 1, 1);  // 16x16
  x = b.MaxPool(x, "pool1", 2, 2);              // 8x8
  x = b.ConvBn(x, "conv2", 24, 3, 3, 1, 1);     // batch norm; channels not a multiple of 16
  x = b.MaxPool(x, "pool2", 2, 2);              // 4x4
  x = b.FullyConnected(x, "fc1", 32, /*relu=*/true);
  x = b.FullyConnected(x, "fc2", 10, /*relu=*/false);
  return b.Finish(x);
}

TEST(LearningTest, SgdWithMomentumLearnsSyntheticImages) {
  absl::StatusOr<Model> model = SmallNet();
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(model->num_classes, 10);
  constexpr int kBatch = 32;
  constexpr int kMaxSteps = 200;  // it takes about 20, a few ms each
  constexpr double kLearningRate = 0.02, kMomentum = 0.9;
  constexpr int kWindow = 10;      // batches the loss is averaged over
  constexpr double kTarget = 0.1;  // chance is ln 10 = 2.30
  BoundNetwork b = MakeBound(*model, kBatch, /*threads=*/0, /*seed=*/3);
  ASSERT_TRUE(b.net);
  Network& net = *b.net;
  const int params = static_cast<int>(net.params().size());

  // SGD elementwise over the raw buffers is layout-agnostic: what a blocked layout pads
  // starts at zero and gets zero gradient (gradient_test checks the latter), so it stays zero.
  std::vector<std::vector<float>> velocity(params);
  for (int p = 0; p < params; ++p) velocity[p].assign(b.floats(p), 0.f);

  const auto start = std::chrono::steady_clock::now();
  std::vector<double> losses;
  double average = 0;
  for (int step = 0; step < kMaxSteps; ++step) {
    // A fresh batch every step: nothing to memorize, the classes' patterns must be learnt.
    testing::Batch data = SyntheticBatch(*model, kBatch, /*seed=*/9, uint64_t(step) * kBatch);
    net.SetBatch(data.images, data.labels);
    losses.push_back(net.Forward());
    ASSERT_TRUE(std::isfinite(losses.back())) << "step " << step;
    if (losses.size() >= kWindow) {
      average = std::accumulate(losses.end() - kWindow, losses.end(), 0.0) / kWindow;
      if (average < kTarget) break;
    }
    net.Backward([](int) {});
    for (int p = 0; p < params; ++p) {
      float* value = b.value(p);
      const float* grad = b.grad(p);
      float* v = velocity[p].data();
      for (size_t i = 0; i < b.floats(p); ++i) {
        v[i] = static_cast<float>(kMomentum * v[i] - kLearningRate * grad[i]);
        value[i] += v[i];
      }
    }
    net.ParamsChanged();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("loss %.3f at the start, %.3f (mean of %d batches) after %zu steps, %.2f s\n",
              losses.front(), average, kWindow, losses.size(), seconds);
  EXPECT_GT(losses.front(), 2.0) << "the untrained network should be no better than chance";
  EXPECT_LT(average, kTarget) << "after " << losses.size() << " steps";

  // The padding of blocked layouts is still zero: the raw buffers hold exactly the canonical
  // values.
  for (int p = 0; p < params; ++p) {
    double raw = 0, plain = 0;
    for (size_t i = 0; i < b.floats(p); ++i) raw += double(b.value(p)[i]) * b.value(p)[i];
    for (float v : net.ReadParam(p)) plain += double(v) * v;
    EXPECT_NEAR(raw, plain, 1e-5 * plain) << net.params()[p].name;
  }

  // Images far past any batch it saw.
  testing::Batch held_out = SyntheticBatch(*model, kBatch, /*seed=*/9, uint64_t{1} << 40);
  net.SetBatch(held_out.images, held_out.labels);
  const double held_out_loss = net.Forward();
  std::printf("held-out loss %.3f\n", held_out_loss);
  EXPECT_LT(held_out_loss, kTarget);
}

}  // namespace
}  // namespace psbench::trainer
