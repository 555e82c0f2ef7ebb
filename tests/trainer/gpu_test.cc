// The GPU engine (cuDNN) against the CPU engine (oneDNN, whose gradients the finite
// difference tests check): same model, parameters and batch must give the same loss and
// gradients. Label gpu; skips, saying why, where psbench has no GPU engine or no GPU.
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "worker/trainer/init.h"
#include "worker/trainer/network.h"
#include "worker/trainer/timing.h"

namespace psbench::trainer {
namespace {

std::unique_ptr<Network> MakeGpuOrSkip(const Model& model, int batch, std::string* skip) {
  bool built = false;
  for (const std::string& e : EngineNames()) built |= e == "gpu";
  if (!built) {
    *skip = "psbench was built without the GPU engine (CMake found no CUDA toolkit with cuDNN)";
    return nullptr;
  }
  auto net = MakeNetwork("gpu", model, batch, 0);
  if (!net.ok()) {
    *skip = std::string(net.status().message());
    return nullptr;
  }
  return *std::move(net);
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

TEST(GpuEngineTest, MatchesCpuEngine) {
  const Model model = AllLayers();
  const int batch = 4;
  std::string skip;
  auto gpu = MakeGpuOrSkip(model, batch, &skip);
  if (!gpu) GTEST_SKIP() << skip;
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
  EXPECT_NEAR(gpu_loss, cpu_loss, 1e-4 * std::abs(cpu_loss));
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
      EXPECT_NEAR(b[i], a[i], 1e-3f * std::max(1.f, std::abs(a[i]))) << gpu->params()[p].name << "[" << i << "]";
      EXPECT_EQ(host[i], b[i]) << gpu->params()[p].name;
    }
  }
}

TEST(GpuEngineTest, EveryModelStepsOnceAtBatchOne) {
  std::string skip;
  for (const std::string& name : ModelNames()) {
    auto model = BuildModel(name);
    ASSERT_TRUE(model.ok());
    auto gpu = MakeGpuOrSkip(*model, 1, &skip);
    if (!gpu) {
      // Inception-v3's TensorFlow SAME padding is symmetric everywhere cuDNN sees it.
      if (skip.find("CUDA") != std::string::npos || skip.find("GPU") != std::string::npos) GTEST_SKIP() << skip;
      FAIL() << name << ": " << skip;
    }
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
    gpu->Backward([](int) {});
  }
}

}  // namespace
}  // namespace psbench::trainer
