#include "worker/update_codes.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace psbench::update_codes {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}

uint32_t Group(uint32_t code, uint64_t i) { return (code >> (2 * (i % kGroups))) & 3; }

}  // namespace

uint32_t ElementCode(uint64_t seed, uint64_t tensor, uint64_t i) {
  return static_cast<uint32_t>(Mix(Mix(seed ^ 0x5A5A5A5AULL) + tensor * 0x9E3779B97F4A7C15ULL + i) & 3);
}

float Initial(uint64_t seed, uint64_t tensor, uint64_t i) {
  return static_cast<float>((seed + tensor * 1009 + i) % 1024);
}

bool SyncSumsExact(uint32_t workers) {
  if (workers == 0) return true;
  if (workers > (1u << 22)) return false;  // 4W - 1 alone is past 2^24 (and the product below fits)
  // W x K is exact when its odd part fits float32's 24-bit significand; the largest odd part
  // over K <= 4W is W's own odd part times 4W - 1.
  uint64_t odd = workers;
  while (odd % 2 == 0) odd /= 2;
  return odd * (4 * uint64_t{workers} - 1) < (uint64_t{1} << 24);
}

uint32_t Codes::UpdateCode(uint32_t worker, uint64_t step) const {
  // XOR with a seeded mask keeps the index injective and varies the pattern with the seed.
  const auto mask = static_cast<uint32_t>(Mix(seed_ ^ 0xA5A5A5A5ULL));
  return static_cast<uint32_t>(worker * steps_ + step) ^ mask;
}

void Codes::FillGradient(float* __restrict g, const uint8_t* __restrict b, uint64_t n, uint32_t code,
                         float unit) {
  uint8_t a[kGroups];
  for (int j = 0; j < kGroups; ++j) a[j] = static_cast<uint8_t>(Group(code, j));
#pragma omp simd
  for (uint64_t i = 0; i < n; ++i) g[i] = unit * static_cast<float>(1 + ((a[i % kGroups] + b[i]) & 3));
}

void Codes::Applied::Add(uint32_t code) {
  for (int j = 0; j < kGroups; ++j) ++count_[j][Group(code, j)];
}

void Codes::Applied::Decrements(double out[kGroups][4]) const {
  for (int j = 0; j < kGroups; ++j) {
    for (uint32_t b = 0; b < 4; ++b) {
      uint64_t dec = 0;
      for (uint32_t r = 0; r < 4; ++r) dec += count_[j][r] * (1 + ((r + b) & 3));
      out[j][b] = static_cast<double>(dec);
    }
  }
}

Codes::Explanation Codes::Explain(std::span<const double> diff, std::span<const uint8_t> b) const {
  Explanation e;
  if (diff.empty() || diff.size() != b.size()) return e;
  // One update's gradient on every element, all of one sign: each element then gives its
  // group's 2 bits of the update's code.
  const double sign = diff[0] > 0 ? 1 : -1;
  int32_t group[kGroups];
  for (int32_t& g : group) g = -1;
  for (size_t i = 0; i < diff.size(); ++i) {
    const double v = diff[i] * sign;
    if (v != std::floor(v) || v < 1 || v > 4) return e;
    const auto a = static_cast<int32_t>((static_cast<uint32_t>(v) - 1 - b[i]) & 3);
    int32_t& known = group[i % kGroups];
    if (known >= 0 && known != a) return e;
    known = a;
  }
  for (uint32_t w = 0; w < workers_; ++w) {
    for (uint64_t s = 0; s < steps_; ++s) {
      const uint32_t code = UpdateCode(w, s);
      bool fits = true;
      for (int j = 0; j < kGroups && fits; ++j) fits = group[j] < 0 || static_cast<uint32_t>(group[j]) == Group(code, j);
      if (!fits) continue;
      ++e.fitting;
      if (e.updates.size() < 8) e.updates.push_back({w, s});
    }
  }
  if (e.fitting > 0) e.kind = sign > 0 ? Explanation::kMissing : Explanation::kExtra;
  return e;
}

std::string DescribeUpdates(const Codes::Explanation& e) {
  auto one = [](const std::pair<uint32_t, uint64_t>& u) {
    return absl::StrCat("worker ", u.first, "'s step ", u.second);
  };
  if (e.fitting == 1) return one(e.updates[0]);
  std::string text = absl::StrCat("one of ", e.fitting, " updates (");
  for (size_t k = 0; k < e.updates.size(); ++k) absl::StrAppend(&text, k ? ", " : "", one(e.updates[k]));
  return absl::StrCat(text, e.fitting > e.updates.size() ? ", ...)" : ")");
}

}  // namespace psbench::update_codes
