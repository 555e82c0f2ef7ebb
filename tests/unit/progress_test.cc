// The live status line's arithmetic and format (bench/progress.h): the progress line a
// worker writes, the time left from the scenario and a sample, the text shown.
#include "bench/progress.h"

#include <gtest/gtest.h>

namespace psbench {
namespace {

TEST(ProgressTest, LineRoundTripsAndRejectsTornText) {
  ProgressSample p{.plan = 2, .plans = 13, .phase = LoopCounters::kMeasure, .phase_s = 1.5,
                   .phase_ops = 300, .ops = 1000, .bytes = 123456789, .elapsed_s = 9.25};
  std::string line = ProgressLine(p);
  auto back = ParseProgressLine(line);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(ProgressLine(*back), line);
  EXPECT_FALSE(ParseProgressLine(line.substr(0, line.size() / 2)).ok());
  EXPECT_FALSE(ParseProgressLine("{\"plan\": 1}").ok());
}

TEST(ProgressTest, SecondsLeftByTime) {
  Scenario s;
  s.warmup = absl::Seconds(2);
  s.duration = absl::Seconds(10);
  s.warmup_iterations = -1;
  s.iterations = 0;
  ProgressSample p{.plan = 1, .plans = 3, .phase = LoopCounters::kWarmup, .phase_s = 0.5};
  // 1.5 s of warm-up and 10 s of this payload, then one more payload of 12 s.
  EXPECT_DOUBLE_EQ(*SecondsLeft(s, 1, p), 1.5 + 10 + 12);
  p.phase = LoopCounters::kMeasure;
  p.phase_s = 4;
  EXPECT_DOUBLE_EQ(*SecondsLeft(s, 1, p), 6 + 12);
  p.phase_s = 11;  // waiting for the last operations: never negative
  EXPECT_DOUBLE_EQ(*SecondsLeft(s, 1, p), 12);
  p.phase = LoopCounters::kIdle;
  EXPECT_DOUBLE_EQ(*SecondsLeft(s, 1, p), 24);
}

TEST(ProgressTest, SecondsLeftByCountAtTheCurrentRate) {
  Scenario s;
  s.warmup_iterations = 100;
  s.iterations = 1000;
  // 2 PS: a count is per PS, 200 + 2000 operations per payload; 400 op/s now.
  ProgressSample p{.plan = 0, .plans = 2, .phase = LoopCounters::kMeasure, .phase_s = 2, .phase_ops = 800};
  EXPECT_DOUBLE_EQ(*SecondsLeft(s, 2, p), (2000.0 / 400 - 2) + (200.0 / 400 + 2000.0 / 400));
  p.phase_ops = 0;  // no rate yet
  EXPECT_FALSE(SecondsLeft(s, 2, p).has_value());
}

TEST(ProgressTest, StatusText) {
  ProgressSample p{.plan = 2, .plans = 13, .phase = LoopCounters::kMeasure};
  EXPECT_EQ(StatusText("run 2/6 latency sweep", p, 4.2, 75.0, 21340.4, 87.44),
            "run 2/6 latency sweep | payload 3/13 measure | 4 s elapsed, ~1 min 15 s left | 21340 op/s 87.4 MB/s");
  p.plans = 1;
  p.phase = LoopCounters::kWarmup;
  EXPECT_EQ(StatusText("", p, 3725, std::nullopt, 0, 0),
            "warm-up | 1 h 02 min elapsed, time left unknown yet | 0 op/s 0.0 MB/s");
}

TEST(ProgressTest, NoTerminalNoLine) {
  TerminalLine line(-1);  // not a terminal
  EXPECT_FALSE(line.enabled());
  line.Show("x");  // does nothing, and must not crash
  line.Clear();
}

}  // namespace
}  // namespace psbench
