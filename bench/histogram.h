// Latency histogram in nanoseconds: log-linear buckets (2^kSubBits per power of two, so any
// recorded value is reported within 0.1 %), exact min, max, mean and stdev, mergeable across
// workers. Debian packages no C++ HdrHistogram; this is the same idea in a few lines.
#ifndef PSBENCH_BENCH_HISTOGRAM_H_
#define PSBENCH_BENCH_HISTOGRAM_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace psbench {

class Histogram {
 public:
  static constexpr int kSubBits = 10;

  Histogram();
  void Add(uint64_t value_ns);
  void Merge(const Histogram& other);
  void Clear();

  uint64_t count() const { return count_; }
  uint64_t min() const { return count_ ? min_ : 0; }
  uint64_t max() const { return max_; }
  double mean() const;
  double stdev() const;  // population standard deviation
  // Value at quantile q in [0, 1]: the smallest recorded bucket whose cumulative count
  // reaches ceil(q * count), reported as the bucket's midpoint clamped to [min, max].
  double Percentile(double q) const;

  // What a record carries of it: the buckets with a count, in order, and the exact moments.
  // FromParts is the histogram again, or nullopt when the parts cannot be one (a bucket out
  // of range or repeated, counts that overflow, min or max outside the buckets recorded or
  // min above max, a negative sum).
  struct Parts {
    std::vector<std::pair<size_t, uint64_t>> buckets;  // (bucket, count > 0), ascending
    uint64_t min = 0, max = 0;
    double sum = 0, sum_sq = 0;
  };
  Parts ToParts() const;
  static std::optional<Histogram> FromParts(const Parts& parts);

  // Bucket b holds the values [BucketLow(b), BucketHigh(b)).
  static size_t BucketOf(uint64_t v);
  static uint64_t BucketLow(size_t b);
  static uint64_t BucketHigh(size_t b);  // exclusive
  static size_t NumBuckets();

 private:

  std::vector<uint64_t> buckets_;
  uint64_t count_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
  double sum_ = 0;
  double sum_sq_ = 0;
};

}  // namespace psbench

#endif  // PSBENCH_BENCH_HISTOGRAM_H_
