#include "bench/histogram.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace psbench {
namespace {

// Exact percentile by the same rank rule as Histogram::Percentile.
double ExactPercentile(std::vector<uint64_t> v, double q) {
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  rank = std::clamp<size_t>(rank, 1, v.size());
  return static_cast<double>(v[rank - 1]);
}

TEST(HistogramTest, EmptyReportsZeros) {
  Histogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.Percentile(0.5), 0);
  EXPECT_EQ(h.mean(), 0);
  EXPECT_EQ(h.stdev(), 0);
}

TEST(HistogramTest, SmallValuesAreExact) {
  Histogram h;
  for (uint64_t v = 1; v <= 100; ++v) h.Add(v);
  EXPECT_EQ(h.min(), 1u);
  EXPECT_EQ(h.max(), 100u);
  EXPECT_DOUBLE_EQ(h.Percentile(0.5), 50);
  EXPECT_DOUBLE_EQ(h.Percentile(0.99), 99);
  EXPECT_DOUBLE_EQ(h.Percentile(1.0), 100);
  EXPECT_DOUBLE_EQ(h.mean(), 50.5);
  EXPECT_NEAR(h.stdev(), 28.866, 1e-3);
}

TEST(HistogramTest, PercentilesWithinOneTenthPercentOfExact) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(11.0, 1.5);  // ~60 us median, long tail
  std::vector<uint64_t> values;
  Histogram h;
  for (int i = 0; i < 200000; ++i) {
    uint64_t v = static_cast<uint64_t>(dist(rng)) + 1;
    values.push_back(v);
    h.Add(v);
  }
  for (double q : {0.0, 0.5, 0.9, 0.99, 0.999, 1.0}) {
    double exact = ExactPercentile(values, q);
    EXPECT_NEAR(h.Percentile(q), exact, exact * 0.001) << "q=" << q;
  }
  EXPECT_EQ(h.min(), *std::min_element(values.begin(), values.end()));
  EXPECT_EQ(h.max(), *std::max_element(values.begin(), values.end()));
}

TEST(HistogramTest, HugeValuesDoNotOverflow) {
  Histogram h;
  h.Add(UINT64_MAX);
  h.Add(uint64_t{1} << 63);
  EXPECT_EQ(h.max(), UINT64_MAX);
  EXPECT_GE(h.Percentile(1.0), static_cast<double>(uint64_t{1} << 63));
}

TEST(HistogramTest, MergeEqualsAddingEverything) {
  Histogram a, b, all;
  for (uint64_t v = 1000; v < 5000; v += 7) {
    a.Add(v);
    all.Add(v);
  }
  for (uint64_t v = 40000; v < 90000; v += 13) {
    b.Add(v);
    all.Add(v);
  }
  a.Merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.min(), all.min());
  EXPECT_EQ(a.max(), all.max());
  for (double q : {0.1, 0.5, 0.9, 0.99}) EXPECT_EQ(a.Percentile(q), all.Percentile(q));
  EXPECT_DOUBLE_EQ(a.mean(), all.mean());
}

}  // namespace
}  // namespace psbench
