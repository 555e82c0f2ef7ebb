// Shared by the trainer tests: a network on the CPU engine bound to host memory.
#ifndef PSBENCH_TESTS_TRAINER_TRAINER_TEST_UTIL_H_
#define PSBENCH_TESTS_TRAINER_TRAINER_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "worker/trainer/init.h"
#include "worker/trainer/model.h"
#include "worker/trainer/network.h"
#include "worker/trainer/timing.h"

namespace psbench::trainer::testing {

// A network with its parameter and gradient memory (params()[i].bytes each, as Bind wants).
struct BoundNetwork {
  std::unique_ptr<Network> net;
  std::unique_ptr<ParamStorage> storage;

  // The raw bound buffers, in the engine's (possibly blocked and padded) layout.
  float* value(int i) const { return storage->values()[i]; }
  float* grad(int i) const { return storage->grads()[i]; }
  size_t floats(int i) const { return net->params()[i].bytes / sizeof(float); }
};

// Builds `model` on the CPU engine, binds fresh memory and initializes the parameters.
inline BoundNetwork MakeBound(const Model& model, int batch, int threads, uint64_t seed) {
  BoundNetwork b;
  absl::StatusOr<std::unique_ptr<Network>> net = MakeNetwork("cpu", model, batch, threads);
  if (!net.ok()) {
    ADD_FAILURE() << model.name << ": " << net.status();
    return b;
  }
  b.net = std::move(*net);
  b.storage = std::make_unique<ParamStorage>(b.net->params());
  absl::Status bound = b.net->Bind(b.storage->values(), b.storage->grads());
  if (!bound.ok()) {
    ADD_FAILURE() << model.name << ": Bind: " << bound;
    b.net.reset();
    return b;
  }
  b.net->InitParams(seed);
  return b;
}

// One batch of the synthetic dataset for `model` (its input shape and classes).
struct Batch {
  std::vector<float> images;
  std::vector<int> labels;
};
inline Batch SyntheticBatch(const Model& model, int batch, uint64_t seed, uint64_t first) {
  const Shape& in = model.layers[0].out;
  Batch b;
  b.images.resize(size_t(batch) * in.elements());
  b.labels.resize(batch);
  SyntheticImages(in, model.num_classes, seed).Fill(first, batch, b.images, b.labels);
  return b;
}

}  // namespace psbench::trainer::testing

#endif  // PSBENCH_TESTS_TRAINER_TRAINER_TEST_UTIL_H_
