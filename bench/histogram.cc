#include "bench/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace psbench {
namespace {
constexpr uint64_t kSub = uint64_t{1} << Histogram::kSubBits;
// Values below kSub get one bucket each; above, each power of two gets kSub buckets.
constexpr size_t kBuckets = kSub + (64 - Histogram::kSubBits) * kSub;
}  // namespace

Histogram::Histogram() : buckets_(kBuckets, 0) {}

size_t Histogram::BucketOf(uint64_t v) {
  if (v < kSub) return static_cast<size_t>(v);
  int top = 63 - std::countl_zero(v);     // >= kSubBits
  int shift = top - kSubBits;             // bits below the sub-bucket index
  uint64_t sub = (v >> shift) - kSub;     // 0 .. kSub-1
  return static_cast<size_t>(kSub + static_cast<uint64_t>(shift) * kSub + sub);
}

uint64_t Histogram::BucketLow(size_t b) {
  if (b < kSub) return b;
  uint64_t shift = (b - kSub) / kSub;
  uint64_t sub = (b - kSub) % kSub;
  return (kSub + sub) << shift;
}

uint64_t Histogram::BucketHigh(size_t b) {
  if (b < kSub) return b + 1;
  uint64_t shift = (b - kSub) / kSub;
  return BucketLow(b) + (uint64_t{1} << shift);
}

void Histogram::Add(uint64_t v) {
  ++buckets_[BucketOf(v)];
  ++count_;
  min_ = std::min(min_, v);
  max_ = std::max(max_, v);
  double d = static_cast<double>(v);
  sum_ += d;
  sum_sq_ += d * d;
}

void Histogram::Merge(const Histogram& o) {
  for (size_t i = 0; i < buckets_.size(); ++i) buckets_[i] += o.buckets_[i];
  count_ += o.count_;
  min_ = std::min(min_, o.min_);
  max_ = std::max(max_, o.max_);
  sum_ += o.sum_;
  sum_sq_ += o.sum_sq_;
}

void Histogram::Clear() { *this = Histogram(); }

size_t Histogram::NumBuckets() { return kBuckets; }

Histogram::Parts Histogram::ToParts() const {
  Parts p;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (buckets_[b] > 0) p.buckets.push_back({b, buckets_[b]});
  }
  p.min = min();
  p.max = max_;
  p.sum = sum_;
  p.sum_sq = sum_sq_;
  return p;
}

std::optional<Histogram> Histogram::FromParts(const Parts& p) {
  Histogram h;
  size_t last = 0;
  for (const auto& [b, n] : p.buckets) {
    if (b >= kBuckets || n == 0 || (h.count_ > 0 && b <= last) || n > UINT64_MAX - h.count_) return std::nullopt;
    h.buckets_[b] = n;
    h.count_ += n;
    last = b;
  }
  if (h.count_ == 0) return h;
  if (p.min > p.max || BucketOf(p.min) != p.buckets.front().first || BucketOf(p.max) != p.buckets.back().first ||
      !(p.sum >= 0) || !(p.sum_sq >= 0)) {
    return std::nullopt;
  }
  h.min_ = p.min;
  h.max_ = p.max;
  h.sum_ = p.sum;
  h.sum_sq_ = p.sum_sq;
  return h;
}

double Histogram::mean() const { return count_ ? sum_ / static_cast<double>(count_) : 0; }

double Histogram::stdev() const {
  if (count_ < 2) return 0;
  double m = mean();
  double var = sum_sq_ / static_cast<double>(count_) - m * m;
  return var > 0 ? std::sqrt(var) : 0;
}

double Histogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
  rank = std::clamp<uint64_t>(rank, 1, count_);
  uint64_t seen = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    seen += buckets_[b];
    if (seen >= rank) {
      double mid = (static_cast<double>(BucketLow(b)) + static_cast<double>(BucketHigh(b) - 1)) / 2;
      return std::clamp(mid, static_cast<double>(min_), static_cast<double>(max_));
    }
  }
  return static_cast<double>(max_);
}

}  // namespace psbench
