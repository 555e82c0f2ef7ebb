// Deterministic numbers for training without a dataset: initial parameters and synthetic
// labelled images. Both are counter-based (a hash of seed and position), so any engine,
// batch size or split of a batch across workers sees exactly the same values.
#ifndef PSBENCH_WORKER_TRAINER_INIT_H_
#define PSBENCH_WORKER_TRAINER_INIT_H_

#include <cstdint>
#include <span>

#include "worker/trainer/model.h"

namespace psbench::trainer {

// Parameter `index` of a model in its canonical layout (OIHW, OI or C): fan-in scaled
// uniform in +-sqrt(6 / fan_in) (He), zeros or ones.
void FillInitial(const Layer::Param& spec, uint64_t seed, uint64_t index, std::span<float> out);

// Images whose class shows: each class has a coarse (8x8-pixel block) pattern, each image is
// its class's pattern plus per-pixel noise. Labels are uniform over the classes.
class SyntheticImages {
 public:
  SyntheticImages(Shape shape, int classes, uint64_t seed) : shape_(shape), classes_(classes), seed_(seed) {}
  // Samples first..first+count-1 of the (endless) dataset.
  void Fill(uint64_t first, int count, std::span<float> images, std::span<int> labels) const;
  int Label(uint64_t sample) const;

 private:
  Shape shape_;
  int classes_;
  uint64_t seed_;
};

}  // namespace psbench::trainer

#endif  // PSBENCH_WORKER_TRAINER_INIT_H_
