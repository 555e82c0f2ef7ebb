// The six models: each builds, has the published parameter count, instantiates on the CPU
// engine and takes one forward and backward step at batch 1. And the builder's errors.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/trainer_test_util.h"
#include "worker/trainer/model.h"
#include "worker/trainer/network.h"

namespace psbench::trainer {
namespace {

using ::testing::HasSubstr;
using testing::BoundNetwork;
using testing::MakeBound;
using testing::SyntheticBatch;

struct Expected {
  const char* name;
  int64_t parameters;  // torchvision's / Keras' counts (no auxiliary heads)
};
void PrintTo(const Expected& e, std::ostream* os) { *os << e.name; }

class ModelTest : public ::testing::TestWithParam<Expected> {};

TEST_P(ModelTest, BuildsAndTakesOneStep) {
  const Expected& expected = GetParam();
  absl::StatusOr<Model> model = BuildModel(expected.name);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->name, expected.name);
  EXPECT_EQ(model->parameter_count(), expected.parameters);
  EXPECT_EQ(model->num_classes, 1000);
  EXPECT_EQ(model->layers.front().kind, LayerKind::kInput);
  EXPECT_EQ(model->loss().kind, LayerKind::kSoftmaxCrossEntropy);

  const auto start = std::chrono::steady_clock::now();
  BoundNetwork b = MakeBound(*model, /*batch=*/1, /*threads=*/0, /*seed=*/1);
  ASSERT_TRUE(b.net);
  Network& net = *b.net;
  const int params = static_cast<int>(net.params().size());
  int64_t total = 0;
  for (const ParamInfo& p : net.params()) {
    total += p.count;
    EXPECT_GE(p.bytes, size_t(p.count) * sizeof(float)) << p.name;
  }
  EXPECT_EQ(total, model->parameter_count());

  testing::Batch data = SyntheticBatch(*model, 1, /*seed=*/2, /*first=*/0);
  net.SetBatch(data.images, data.labels);
  const double loss = net.Forward();
  ASSERT_TRUE(std::isfinite(loss));
  // Near chance (ln 1000 = 6.9); how near depends on the spread of the class scores, below.
  EXPECT_NEAR(loss, std::log(1000.0), 4.0);

  std::vector<int> ready(params, 0);
  net.Backward([&](int p) { ++ready[p]; });
  for (int p = 0; p < params; ++p) {
    const std::string& name = net.params()[p].name;
    EXPECT_EQ(ready[p], 1) << name;
    bool finite = true, nonzero = false;
    for (size_t i = 0; i < b.floats(p); ++i) {
      finite = finite && std::isfinite(b.grad(p)[i]);
      nonzero = nonzero || b.grad(p)[i] != 0.f;
    }
    EXPECT_TRUE(finite) << name;
    EXPECT_TRUE(nonzero) << name << ": all-zero gradient";
  }

  // The classifier's bias gradient is softmax(scores) - onehot(label) (batch 1): it gives the
  // class probabilities, which must agree with the loss. log p = score - logsumexp(scores), so
  // they also give the spread of the scores: fan-in scaled initialization keeps it O(1), neither
  // collapsed nor exploding (measured: 0.5-1.5 with batch norm, 2-3 without, where every max
  // pool raises the activations' second moment). The loss averaged over all labels is
  // ln 1000 + spread^2 / 2, roughly: a few nats above chance.
  const ParamInfo& last = net.params().back();
  ASSERT_EQ(last.layer, static_cast<int>(model->layers.size()) - 2) << last.name;
  ASSERT_EQ(last.count, 1000) << last.name;
  std::vector<float> probability = net.ReadGrad(params - 1);
  probability[data.labels[0]] += 1.f;
  double sum = 0, mean_log = 0, square_log = 0;
  for (float p : probability) {
    EXPECT_GT(p, 0.f);
    sum += p;
    const double log_p = std::log(std::max(double(p), 1e-30));
    mean_log += log_p / 1000;
    square_log += log_p * log_p / 1000;
  }
  const double spread = std::sqrt(std::max(square_log - mean_log * mean_log, 0.0));
  EXPECT_NEAR(sum, 1.0, 1e-4);
  EXPECT_NEAR(-std::log(probability[data.labels[0]]), loss, 1e-3 * loss);
  EXPECT_GT(spread, 0.3);
  EXPECT_LT(spread, 5.0);
  EXPECT_LT(-mean_log, std::log(1000.0) + 6.0);
  std::printf("%s: loss %.3f (%.3f over all labels, scores' spread %.2f), build + one step "
              "%.2f s\n",
              expected.name, loss, -mean_log, spread,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

INSTANTIATE_TEST_SUITE_P(Models, ModelTest,
                         ::testing::Values(Expected{"alexnet", 61'100'840},
                                           Expected{"overfeat", 145'920'872},
                                           Expected{"vgg11", 132'863'336},
                                           Expected{"vgg16", 138'357'544},
                                           Expected{"inception3", 23'834'568},
                                           Expected{"resnet50", 25'557'032}),
                         [](const ::testing::TestParamInfo<Expected>& info) {
                           return std::string(info.param.name);
                         });

TEST(ModelNamesTest, EveryNameBuilds) {
  for (const std::string& name : ModelNames()) {
    absl::StatusOr<Model> model = BuildModel(name);
    EXPECT_TRUE(model.ok()) << name << ": " << model.status();
  }
  // The seeds' aliases.
  EXPECT_EQ(BuildModel("vgg_a")->parameter_count(), 132'863'336);
  EXPECT_EQ(BuildModel("inception_v3")->parameter_count(), 23'834'568);
}

TEST(ModelNamesTest, UnknownNameListsTheKnownOnes) {
  absl::StatusOr<Model> model = BuildModel("lenet");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("lenet"));
  for (const std::string& name : ModelNames())
    EXPECT_THAT(model.status().message(), HasSubstr(name));
}

// ModelBuilder refuses impossible shapes at Finish, naming the layer, and does not crash
// building the layers after the bad one.
TEST(ModelBuilderTest, PoolWindowLargerThanInput) {
  ModelBuilder b("tiny", {3, 4, 4});
  int x = b.MaxPool(0, "toolarge", 5, 1);
  x = b.Conv(x, "conv", 8, 3, 3);
  x = b.FullyConnected(x, "fc", 5, false);
  absl::StatusOr<Model> model = b.Finish(x);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("toolarge"));
}

TEST(ModelBuilderTest, ConvolutionKernelLargerThanInput) {
  ModelBuilder b("tiny", {3, 4, 4});
  int x = b.Conv(0, "conv", 8, 7, 7, 1, 1);  // 4 + 2 < 7
  absl::StatusOr<Model> model = b.Finish(b.FullyConnected(x, "fc", 5, false));
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("conv"));
}

TEST(ModelBuilderTest, MismatchedConcatAndAdd) {
  {
    ModelBuilder b("concat", {3, 8, 8});
    int a = b.Conv(0, "a", 4, 3, 3, 1, 1);
    int c = b.Conv(0, "c", 4, 3, 3, 2, 1);
    absl::StatusOr<Model> model = b.Finish(b.FullyConnected(b.Concat({a, c}, "cat"), "fc", 5, false));
    ASSERT_FALSE(model.ok());
    EXPECT_THAT(model.status().message(), HasSubstr("cat"));
  }
  {
    ModelBuilder b("add", {3, 8, 8});
    int a = b.Conv(0, "a", 4, 3, 3, 1, 1);
    int c = b.Conv(0, "c", 8, 3, 3, 1, 1);
    absl::StatusOr<Model> model = b.Finish(b.FullyConnected(b.Add(a, c, "sum"), "fc", 5, false));
    ASSERT_FALSE(model.ok());
    EXPECT_THAT(model.status().message(), HasSubstr("sum"));
  }
  {
    ModelBuilder b("empty", {3, 8, 8});
    absl::StatusOr<Model> model = b.Finish(b.Concat({}, "nothing"));
    ASSERT_FALSE(model.ok());
    EXPECT_THAT(model.status().message(), HasSubstr("nothing"));
  }
}

TEST(NetworkTest, RejectsUnknownEngineAndEmptyBatch) {
  absl::StatusOr<Model> model = BuildModel("alexnet");
  ASSERT_TRUE(model.ok());
  absl::StatusOr<std::unique_ptr<Network>> net = MakeNetwork("tpu", *model, 1, 1);
  ASSERT_FALSE(net.ok());
  EXPECT_THAT(net.status().message(), HasSubstr("cpu"));
  net = MakeNetwork("cpu", *model, 0, 1);
  EXPECT_FALSE(net.ok());
}

TEST(NetworkTest, BindRejectsTheWrongNumberOfBuffers) {
  ModelBuilder b("tiny", {3, 8, 8});
  absl::StatusOr<Model> model = b.Finish(b.FullyConnected(b.Conv(0, "c", 4, 3, 3), "fc", 5, false));
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::unique_ptr<Network>> net = MakeNetwork("cpu", *model, 2, 1);
  ASSERT_TRUE(net.ok()) << net.status();
  std::vector<float*> one(1, nullptr);
  EXPECT_FALSE((*net)->Bind(one, one).ok());
}

}  // namespace
}  // namespace psbench::trainer
