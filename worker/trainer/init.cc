#include "worker/trainer/init.h"

#include <cmath>

namespace psbench::trainer {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1).
float Unit(uint64_t a, uint64_t b) {
  return static_cast<float>(static_cast<double>(Mix(a ^ Mix(b)) >> 11) * 0x1.0p-52 - 1.0);
}

}  // namespace

void FillInitial(const Layer::Param& spec, uint64_t seed, uint64_t index, std::span<float> out) {
  const int64_t n = static_cast<int64_t>(out.size());
  switch (spec.init) {
    case Layer::Param::Init::kZero:
      for (float& v : out) v = 0.f;
      return;
    case Layer::Param::Init::kOne:
      for (float& v : out) v = 1.f;
      return;
    case Layer::Param::Init::kFanIn: {
      const float bound = static_cast<float>(std::sqrt(6.0 / double(spec.fan_in)));
      const uint64_t stream = Mix(seed) ^ (index << 44);
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) out[i] = bound * Unit(stream, uint64_t(i));
      return;
    }
  }
}

int SyntheticImages::Label(uint64_t sample) const {
  return static_cast<int>(Mix(seed_ ^ Mix(sample ^ 0x5eed)) % uint64_t(classes_));
}

void SyntheticImages::Fill(uint64_t first, int count, std::span<float> images,
                           std::span<int> labels) const {
  const int64_t per_image = shape_.elements();
#pragma omp parallel for schedule(static)
  for (int n = 0; n < count; ++n) {
    const uint64_t sample = first + uint64_t(n);
    const int label = Label(sample);
    labels[n] = label;
    float* image = images.data() + n * per_image;
    const uint64_t pattern = Mix(seed_ + 1) ^ (uint64_t(label) << 32);
    const uint64_t noise = Mix(seed_ + 2) ^ Mix(sample);
    for (int c = 0; c < shape_.c; ++c)
      for (int h = 0; h < shape_.h; ++h)
        for (int w = 0; w < shape_.w; ++w) {
          const uint64_t block = (uint64_t(c) << 40) | (uint64_t(h >> 3) << 20) | uint64_t(w >> 3);
          const int64_t at = (int64_t{c} * shape_.h + h) * shape_.w + w;
          image[at] = Unit(pattern, block) + 0.5f * Unit(noise, uint64_t(at));
        }
  }
}

}  // namespace psbench::trainer
