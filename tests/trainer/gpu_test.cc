// The GPU engine (cuDNN) against the CPU engine (oneDNN, whose gradients the finite
// difference tests check): same model, parameters and batch must give the same loss and
// gradients; every model steps; GPU workers train through real PS like one worker with the
// whole batch. Label gpu. Skips, saying why, only where psbench has no GPU engine or the
// machine no GPU; any other failure of the engine fails.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/run_helpers.h"
#include "worker/trainer/init.h"
#include "worker/trainer/network.h"
#include "worker/trainer/timing.h"

namespace psbench::trainer {
namespace {

// Whether the machine has an NVIDIA GPU at all, whatever CUDA says of it: a driver that
// does not match the runtime is an error to report where a GPU exists, and the normal state
// of a machine with the CUDA toolkit and no GPU.
bool GpuPresent() {
  std::error_code ec;
  if (std::filesystem::exists("/dev/nvidia0", ec)) return true;
  return std::filesystem::is_directory("/proc/driver/nvidia/gpus", ec) &&
         !std::filesystem::is_empty("/proc/driver/nvidia/gpus", ec);
}

// Why the GPU tests cannot run here, or "" when they can. Only the absence of the engine or
// of a GPU skips; where there is a GPU, an engine that cannot start fails every test.
std::string NoGpu() {
  bool built = false;
  for (const std::string& e : EngineNames()) built |= e == "gpu";
  if (!built) return "psbench was built without the GPU engine (CMake found no CUDA toolkit with cuDNN and nvcc)";
  if (GpuPresent()) return "";
  auto net = MakeNetwork("gpu", *BuildModel("tiny"), 1, 0);
  return net.ok() ? "" : absl::StrCat("this machine has no NVIDIA GPU (", net.status().message(), ")");
}

#define SKIP_WITHOUT_GPU()                                     \
  do {                                                         \
    static const std::string no_gpu = NoGpu();                 \
    if (!no_gpu.empty()) GTEST_SKIP() << no_gpu;               \
  } while (0)

std::unique_ptr<Network> MakeGpu(const Model& model, int batch, Math math = Math::kFp32,
                                 Layout layout = Layout::kAuto) {
  auto net = MakeNetwork("gpu", model, batch, 0, math, layout);
  EXPECT_TRUE(net.ok()) << model.name << " " << LayoutName(layout) << ": " << net.status();
  return net.ok() ? *std::move(net) : nullptr;
}

// Every layer kind cuDNN serves (symmetric padding), small enough to compare exhaustively.
Model AllLayers() {
  ModelBuilder b("all_layers", {3, 12, 12});
  int x = b.Conv(0, "conv1", 8, 3, 3, 1, 1);
  int y = b.ConvBn(x, "conv2", 8, 3, 3, 1, 1);
  int z = b.Lrn(x, "lrn", 3, 1e-2f, 0.75f, 1.f);
  x = b.Relu(b.Add(y, z, "add"), "relu");
  int p = b.MaxPool(x, "max", 2, 2);
  int q = b.AvgPool(x, "avg", 3, 2, 1);
  x = b.Concat({p, b.Conv(q, "conv3", 5, 1, 1, 1, 0, false, true)}, "concat");
  x = b.FullyConnected(x, "fc1", 16, true);
  x = b.FullyConnected(x, "fc2", 7, false);
  return *b.Finish(x);
}

// Batch norm's kernels at the shapes they split differently: channels not a multiple of 32
// (lanes left idle in NHWC) and more than 32, odd planes, a tensor normalized twice (its
// gradient accumulates), with and without the fused ReLU.
Model BatchNormShapes() {
  ModelBuilder b("batch_norm_shapes", {3, 9, 9});
  int x = b.Conv(0, "conv1", 48, 3, 3, 1, 1);
  int y = b.BatchNorm(x, "bn_relu", true);
  int z = b.BatchNorm(x, "bn_plain", false);
  x = b.Relu(b.Add(y, z, "add"), "relu");
  x = b.ConvBn(x, "conv2", 72, 3, 3, 2, 1);
  x = b.FullyConnected(x, "fc", 5, false);
  return *b.Finish(x);
}

// A residual add with its ReLU (the engine fuses the pair), one input already holding a
// gradient from a later add (the fused backward accumulates into it), and an add with no
// ReLU after it. At batch 3 its tensors' sizes are no multiple of four, at batch 4 they are.
Model Residual() {
  ModelBuilder b("residual", {3, 5, 5});
  int x = b.Conv(0, "conv1", 5, 3, 3, 1, 1);
  int y = b.Conv(x, "conv2", 5, 3, 3, 1, 1, true, false);  // negative sums: the ReLU masks
  int r = b.Relu(b.Add(y, x, "add_relu"), "relu");
  x = b.FullyConnected(b.Add(r, x, "add"), "fc", 4, false);
  return *b.Finish(x);
}

// fp32 must match the CPU engine tightly; tf32 rounds inputs to 10-bit mantissas, so within
// a few parts per thousand. Either layout: what the host sees is the same.
void ExpectMatchesCpu(const Model& model, int batch, Math math, Layout layout) {
  SCOPED_TRACE(model.name);
  const bool tf32 = math == Math::kTf32;
  const float tolerance = tf32 ? 2e-2f : 1e-3f;
  auto gpu = MakeGpu(model, batch, math, layout);
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->layout(), LayoutName(layout));
  auto cpu = MakeNetwork("cpu", model, batch, 0);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ParamStorage cpu_storage((*cpu)->params()), gpu_storage(gpu->params());
  ASSERT_TRUE((*cpu)->Bind(cpu_storage.values(), cpu_storage.grads()).ok());
  ASSERT_TRUE(gpu->Bind(gpu_storage.values(), gpu_storage.grads()).ok());
  (*cpu)->InitParams(7);
  gpu->InitParams(7);
  const Shape in = model.layers[0].out;
  std::vector<float> images(batch * in.elements());
  std::vector<int> labels(batch);
  SyntheticImages(in, model.num_classes, 7).Fill(0, batch, images, labels);
  (*cpu)->SetBatch(images, labels);
  gpu->SetBatch(images, labels);
  const double cpu_loss = (*cpu)->Forward(), gpu_loss = gpu->Forward();
  EXPECT_NEAR(gpu_loss, cpu_loss, (tf32 ? 1e-2 : 1e-4) * std::abs(cpu_loss));
  int ready = 0;
  (*cpu)->Backward([](int) {});
  gpu->Backward([&ready](int) { ++ready; });
  ASSERT_EQ(ready, static_cast<int>(gpu->params().size()));
  for (size_t p = 0; p < gpu->params().size(); ++p) {
    std::vector<float> a = (*cpu)->ReadGrad(static_cast<int>(p)), b = gpu->ReadGrad(static_cast<int>(p));
    ASSERT_EQ(a.size(), b.size());
    // The gradient the worker would send is the host copy: it must be what the device holds.
    const float* host = gpu_storage.grads()[p];
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_NEAR(b[i], a[i], tolerance * std::max(1.f, std::abs(a[i]))) << gpu->params()[p].name << "[" << i << "]";
      EXPECT_EQ(host[i], b[i]) << gpu->params()[p].name;
    }
  }
}

class GpuEngineTest : public ::testing::TestWithParam<std::tuple<Math, Layout>> {};

TEST_P(GpuEngineTest, MatchesCpuEngine) {
  SKIP_WITHOUT_GPU();
  const auto [math, layout] = GetParam();
  ExpectMatchesCpu(AllLayers(), 4, math, layout);
  ExpectMatchesCpu(BatchNormShapes(), 3, math, layout);
  ExpectMatchesCpu(Residual(), 3, math, layout);  // the fused kernels' scalar path
  ExpectMatchesCpu(Residual(), 4, math, layout);  // and their float4 path
}

// ResNet-50's 16 residual adds each fuse with their ReLU; the engine says so.
TEST(GpuEngineModelsTest, ResidualAddsFuseTheirRelu) {
  SKIP_WITHOUT_GPU();
  auto net = MakeGpu(*BuildModel("resnet50"), 1);
  ASSERT_NE(net, nullptr);
  EXPECT_NE(net->description().find("16 add+ReLU fused"), std::string::npos) << net->description();
}

INSTANTIATE_TEST_SUITE_P(MathLayout, GpuEngineTest,
                         ::testing::Combine(::testing::Values(Math::kFp32, Math::kTf32),
                                            ::testing::Values(Layout::kNchw, Layout::kNhwc)),
                         [](const auto& info) {
                           return absl::StrCat(MathName(std::get<0>(info.param)), "_",
                                               LayoutName(std::get<1>(info.param)));
                         });

// auto: NHWC where tensor cores compute (tf32), NCHW for fp32 (Winograd and FFT are NCHW only).
TEST(GpuEngineModelsTest, AutoLayoutFollowsTheMath) {
  SKIP_WITHOUT_GPU();
  auto fp32 = MakeGpu(*BuildModel("tiny"), 2, Math::kFp32);
  auto tf32 = MakeGpu(*BuildModel("tiny"), 2, Math::kTf32);
  ASSERT_TRUE(fp32 && tf32);
  EXPECT_EQ(fp32->layout(), "nchw");
  EXPECT_EQ(tf32->layout(), "nhwc");
}

class GpuModelsTest : public ::testing::TestWithParam<Layout> {};

TEST_P(GpuModelsTest, EveryModelStepsOnceAtBatchOne) {
  SKIP_WITHOUT_GPU();
  for (const std::string& name : ModelNames()) {
    auto model = BuildModel(name);
    ASSERT_TRUE(model.ok());
    // Inception-v3's TensorFlow SAME padding is symmetric everywhere cuDNN sees it.
    auto gpu = MakeGpu(*model, 1, Math::kFp32, GetParam());
    ASSERT_NE(gpu, nullptr) << name;
    ParamStorage storage(gpu->params());
    ASSERT_TRUE(gpu->Bind(storage.values(), storage.grads()).ok());
    gpu->InitParams(1);
    const Shape in = model->layers[0].out;
    std::vector<float> images(in.elements());
    std::vector<int> labels(1);
    SyntheticImages(in, model->num_classes, 1).Fill(0, 1, images, labels);
    gpu->SetBatch(images, labels);
    const double loss = gpu->Forward();
    EXPECT_TRUE(std::isfinite(loss)) << name;
    int ready = 0;
    gpu->Backward([&ready](int) { ++ready; });
    EXPECT_EQ(ready, static_cast<int>(gpu->params().size())) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Layout, GpuModelsTest, ::testing::Values(Layout::kNchw, Layout::kNhwc),
                         [](const auto& info) { return std::string(LayoutName(info.param)); });

TEST(GpuEngineModelsTest, RefusesBf16WithAReason) {
  SKIP_WITHOUT_GPU();
  auto net = MakeNetwork("gpu", *BuildModel("tiny"), 1, 0, Math::kBf16);
  ASSERT_FALSE(net.ok());
  EXPECT_EQ(net.status().code(), absl::StatusCode::kInvalidArgument);
}

// Two GPU workers of batch 2 through two real PS end where one GPU worker of batch 4 does,
// as the CPU engine's distributed test requires; the record shows what staging cost.
class GpuTrainingTest : public testing::IntegrationTest, public ::testing::WithParamInterface<Layout> {};

TEST_P(GpuTrainingTest, TwoWorkersMatchOneWorkerWithTheWholeBatch) {
  SKIP_WITHOUT_GPU();
  const std::string layout = LayoutName(GetParam());
  const testing::Argv common = {"--trainer=tiny", "--engine=gpu", "--num-ps=2", "--steps=20",
                                "--warmup-steps=0", "--learning-rate=0.01", "--sync", "--layout=" + layout};
  auto train = [&](const testing::Argv& flags, const std::string& name) {
    const std::string json =
        "/tmp/psbench-gpu-test-" + std::to_string(getpid()) + "-" + layout + "-" + name + ".jsonl";
    testing::RunResult r = testing::RunCommand(testing::RunArgv(testing::Concat({"--json=" + json}, flags)),
                                               std::chrono::seconds(240));
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    std::vector<testing::Json> workers;
    for (const testing::Json& rec : testing::ReadJsonLines(json))
      if (rec["kind"] == "train") workers.push_back(rec);
    unlink(json.c_str());
    return workers;
  };
  auto one = train(testing::Concat(common, {"--num-workers=1", "--batch=4"}), "one");
  auto two = train(testing::Concat(common, {"--num-workers=2", "--batch=2"}), "two");
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(two.size(), 2u);
  const double sum = one[0]["final_params"]["sum"].get<double>();
  const double squares = one[0]["final_params"]["sum_squares"].get<double>();
  for (const testing::Json& w : two) {
    EXPECT_NEAR(w["final_params"]["sum"].get<double>(), sum, 1e-5 * std::abs(sum)) << w.dump();
    EXPECT_NEAR(w["final_params"]["sum_squares"].get<double>(), squares, 1e-5 * squares) << w.dump();
    EXPECT_EQ(w["engine"], "gpu");
    EXPECT_EQ(w["math"], "fp32");
    EXPECT_EQ(w["layout"], layout);
    EXPECT_TRUE(w.contains("gradients_to_host") && w.contains("parameters_to_device")) << w.dump();
  }
  EXPECT_EQ(two[0]["final_params"], two[1]["final_params"]);
  EXPECT_LT(one[0]["loss_last"].get<double>(), 0.5);
}

INSTANTIATE_TEST_SUITE_P(Layout, GpuTrainingTest, ::testing::Values(Layout::kNchw, Layout::kNhwc),
                         [](const auto& info) { return std::string(LayoutName(info.param)); });

}  // namespace
}  // namespace psbench::trainer
