// Open-loop load (bench/load.h, bench/hdr_text.h, bench/load_report.h): what --load and
// --load-sweep accept and refuse, the schedules' planned starts (a constant one exact, a
// Poisson one exponential by a Kolmogorov-Smirnov test), the histograms as records carry them
// and as HdrHistogram's percentile text, and the knee of a sweep.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "bench/hdr_text.h"
#include "bench/histogram.h"
#include "bench/load.h"
#include "bench/load_report.h"

namespace psbench {
namespace {

TEST(LoadTest, ParsesTheThreeLoads) {
  auto closed = ParseLoad("closed");
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_FALSE(closed->open());
  auto constant = ParseLoad("constant:2.5k");
  ASSERT_TRUE(constant.ok()) << constant.status();
  EXPECT_EQ(constant->kind, LoadKind::kConstant);
  EXPECT_EQ(constant->rate, 2500);
  auto poisson = ParseLoad("poisson:64000");
  ASSERT_TRUE(poisson.ok()) << poisson.status();
  EXPECT_EQ(poisson->kind, LoadKind::kPoisson);
  EXPECT_EQ(poisson->rate, 64000);
  EXPECT_EQ(LoadName(*poisson), "poisson:64000");
  EXPECT_EQ(ParseLoad("poisson:1M")->rate, 1e6);
}

TEST(LoadTest, RefusesBadLoadsNamingTheFlag) {
  for (const char* bad : {"poisson:0", "poisson:-5", "poisson:abc", "poisson", "constant:", "closed:5", "bursty:100",
                          "poisson:inf", "poisson:nan", "poisson:1e9", "", "poisson:5x", "constant:1e-300"}) {
    auto s = ParseLoad(bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("--load"), std::string::npos) << s.status();
  }
}

TEST(LoadTest, SweepsDoubleFromLoToHi) {
  auto s = ParseLoadSweep("poisson:1000..64000*2");
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<LoadSchedule> points = SweepPoints(*s);
  ASSERT_EQ(points.size(), 7u);
  EXPECT_EQ(points.front().rate, 1000);
  EXPECT_EQ(points.back().rate, 64000);
  for (const LoadSchedule& p : points) EXPECT_EQ(p.kind, LoadKind::kPoisson);
  EXPECT_EQ(SweepPoints(*ParseLoadSweep("constant:1k..1k*2")).size(), 1u);
}

TEST(LoadTest, RefusesSweepsThatNeverEndOrMakeNoSense) {
  for (const char* bad : {"poisson:1000..500*2", "poisson:1..1000*1", "poisson:1..1000*0.5", "poisson:1..1e8*1.01",
                          "closed:1..10*2", "poisson:1000-2000*2", "poisson:1000..2000", "poisson:0..2000*2",
                          "poisson:1..2*abc", "1..2*2"}) {
    auto s = ParseLoadSweep(bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("--load-sweep"), std::string::npos) << s.status();
  }
}

// Operation i at i / rate after the worker's offset (within the first period, from its seed).
TEST(LoadTest, ConstantScheduleIsExactAndDoesNotDrift) {
  Arrivals a({LoadKind::kConstant, 3000}, LoadSeed(1, 0)), b({LoadKind::kConstant, 3000}, LoadSeed(1, 1));
  const uint64_t first = a.Next(), other = b.Next();
  EXPECT_LT(first, 1e9 / 3000);
  EXPECT_NE(first, other) << "two workers do not send in lockstep";
  for (uint64_t i = 1; i < 1000000; ++i) {
    const uint64_t at = a.Next();
    if (i % 99991 == 0 || i == 999999) {
      EXPECT_NEAR(static_cast<double>(at - first), static_cast<double>(i) * 1e9 / 3000, 1.0) << i;
    }
  }
}

// Operation i of a constant schedule starts within its own period: rounded to the nearest ns,
// an offset drawn at the period's end landed on the next period's start, and a --duration of
// exactly one period planned no operation.
TEST(LoadTest, ConstantOperationsStartWithinTheirOwnPeriod) {
  for (const double rate : {1e8, 3.0, 7e6}) {
    const double period = 1e9 / rate;
    for (uint64_t seed = 0; seed < 2000; ++seed) {
      Arrivals a({LoadKind::kConstant, rate}, seed);
      for (int i = 0; i < 20; ++i) {
        const double at = static_cast<double>(a.Next());
        ASSERT_LT(at, (i + 1) * period) << "rate " << rate << " seed " << seed << " operation " << i;
        ASSERT_GT(at + 1, i * period) << "rate " << rate << " seed " << seed << " operation " << i;
      }
    }
  }
}

// Gaps of a Poisson schedule against the exponential distribution of mean 1 / rate: the
// Kolmogorov-Smirnov statistic under its 1 % critical value (1.63 / sqrt(n)). Uniform gaps of
// the same mean, or a wrong rate, fail it by far.
double KsStatistic(std::vector<double> gaps_s, double rate) {
  std::sort(gaps_s.begin(), gaps_s.end());
  const double n = static_cast<double>(gaps_s.size());
  double d = 0;
  for (size_t i = 0; i < gaps_s.size(); ++i) {
    const double cdf = 1 - std::exp(-rate * gaps_s[i]);
    d = std::max({d, cdf - static_cast<double>(i) / n, static_cast<double>(i + 1) / n - cdf});
  }
  return d;
}

TEST(LoadTest, PoissonGapsAreExponential) {
  constexpr double kRate = 20000;
  constexpr size_t kN = 20000;
  for (uint64_t seed : {1u, 7u, 20180324u}) {
    Arrivals a({LoadKind::kPoisson, kRate}, LoadSeed(seed, 0));
    std::vector<double> gaps;
    uint64_t previous = a.Next();
    EXPECT_EQ(previous, 0u) << "the first operation starts the schedule";
    for (size_t i = 0; i < kN; ++i) {
      const uint64_t at = a.Next();
      ASSERT_GE(at, previous);
      gaps.push_back(static_cast<double>(at - previous) / 1e9);
      previous = at;
    }
    const double critical = 1.63 / std::sqrt(static_cast<double>(kN));
    EXPECT_LT(KsStatistic(gaps, kRate), critical) << "seed " << seed;
    EXPECT_GT(KsStatistic(gaps, kRate * 1.1), critical) << "the test tells a rate 10 % off";
    std::vector<double> uniform(kN);
    for (size_t i = 0; i < kN; ++i) uniform[i] = 2.0 / kRate * (static_cast<double>(i) + 0.5) / kN;
    EXPECT_GT(KsStatistic(uniform, kRate), critical) << "and uniform gaps of the same mean";
  }
}

TEST(LoadTest, SchedulesRepeatWithTheirSeedAndDifferAcrossWorkers) {
  Arrivals a({LoadKind::kPoisson, 1000}, LoadSeed(5, 0)), b({LoadKind::kPoisson, 1000}, LoadSeed(5, 0)),
      c({LoadKind::kPoisson, 1000}, LoadSeed(5, 1));
  int same = 0;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    same += x == c.Next();
  }
  EXPECT_LT(same, 5) << "worker 1's schedule is another";
}

Histogram Sample() {
  Histogram h;
  for (uint64_t v = 1; v <= 100000; v += 7) h.Add(v * 13);
  h.Add(5);
  h.Add(300000000);  // a stall
  return h;
}

TEST(LoadTest, HistogramsTravelInRecordsExactly) {
  const Histogram h = Sample();
  auto back = HistogramFromJson(nlohmann::json::parse(HistogramToJson(h).dump()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->count(), h.count());
  EXPECT_EQ(back->min(), h.min());
  EXPECT_EQ(back->max(), h.max());
  EXPECT_DOUBLE_EQ(back->mean(), h.mean());
  for (double q : {0.0, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0}) EXPECT_EQ(back->Percentile(q), h.Percentile(q)) << q;
  auto empty = HistogramFromJson(HistogramToJson(Histogram()));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->count(), 0u);

  nlohmann::json bad = HistogramToJson(h);
  bad["counts"][0] = Histogram::NumBuckets();
  EXPECT_FALSE(HistogramFromJson(bad).ok());
  bad = HistogramToJson(h);
  bad["max"] = 1;
  EXPECT_FALSE(HistogramFromJson(bad).ok()) << "a max outside the last bucket";
  bad = HistogramToJson(h);
  bad["sub_bits"] = 7;
  EXPECT_FALSE(HistogramFromJson(bad).ok());
  bad = HistogramToJson(h);
  bad["counts"].push_back(3);
  EXPECT_FALSE(HistogramFromJson(bad).ok()) << "an odd count list";
}

// HdrHistogram's "classic" percentile text: a header, lines of value (µs), percentile, total
// count and 1/(1-percentile), rising, the last at percentile 1 with the maximum, then the
// footer; what HdrHistogram's plotter reads.
TEST(LoadTest, PercentileTextIsHdrHistograms) {
  const Histogram h = Sample();
  const std::string text = HdrPercentileText(h);
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  EXPECT_NE(line.find("Value"), std::string::npos);
  EXPECT_NE(line.find("1/(1-Percentile)"), std::string::npos);
  std::getline(in, line);
  EXPECT_EQ(line, "");
  double last_value = -1, last_percentile = -1;
  uint64_t last_count = 0;
  int lines = 0;
  while (std::getline(in, line) && line[0] != '#') {
    std::istringstream fields(line);
    double value, percentile;
    uint64_t count;
    ASSERT_TRUE(fields >> value >> percentile >> count) << line;
    EXPECT_GE(value, last_value) << line;
    EXPECT_GE(percentile, last_percentile) << line;
    EXPECT_GE(count, last_count) << line;
    last_value = value;
    last_percentile = percentile;
    last_count = count;
    ++lines;
  }
  EXPECT_GT(lines, 50) << "levels close in on 100 % by halves";
  EXPECT_EQ(last_percentile, 1.0);
  EXPECT_EQ(last_count, h.count());
  EXPECT_NEAR(last_value, 300000.0, 0.001) << "the maximum, in µs";
  EXPECT_NE(line.find("#[Mean"), std::string::npos) << line;
  EXPECT_NE(text.find("Total count    = "), std::string::npos);
}

TEST(LoadTest, KneeIsWhereP99ClimbsOrTheRateIsNotAchievedForGood) {
  std::vector<LoadPoint> points = {{1000, 1000, 40, 60, 90, 0}, {2000, 2000, 41, 70, 95, 0},
                                   {4000, 3990, 45, 150, 200, 0}, {8000, 7990, 60, 400, 900, 0}};
  auto knee = FindKnee(points);
  ASSERT_TRUE(knee.has_value());
  EXPECT_EQ(knee->index, 3u) << knee->why;
  EXPECT_NE(knee->why.find("p99 5.7x"), std::string::npos) << "against the median below, 70: " << knee->why;
  points[2].achieved_per_s = 3000;
  EXPECT_EQ(FindKnee(points)->index, 2u) << "achieved 75 % of offered, and the next rate is past too";
  points[2].achieved_per_s = 3990;
  points[1].dropped = 4;
  EXPECT_EQ(FindKnee(points)->index, 3u) << "a rate that dropped, then one that kept up: a hiccup";
  points[1].dropped = 0;
  points.pop_back();
  EXPECT_FALSE(FindKnee(points).has_value());
  // One p99 raised by a hiccup neither makes a knee nor hides a later one.
  points = {{1000, 1000, 40, 60, 90, 0},  {2000, 2000, 40, 900, 990, 0}, {4000, 4000, 40, 65, 90, 0},
            {8000, 8000, 40, 70, 90, 0},  {16000, 16000, 40, 300, 400, 0}};
  EXPECT_EQ(FindKnee(points)->index, 4u) << FindKnee(points)->why;
  points.back().p99_us = 150;
  EXPECT_FALSE(FindKnee(points).has_value());
}

}  // namespace
}  // namespace psbench
