// --replay=timed (worker/timed_replay.h) through psbench run: a small psbench-trace/2 with
// two buckets replayed over real PS, 2 workers x 2 PS, sync and async. Each bucket must start
// no earlier than the trace says it became ready (and soon after), the run must take at least
// its recorded compute (wall clock), each step's exposed communication must be no more than
// its slowest part allows, and every parameter must still come back exact. Also the captured
// ResNet-18 trace (from PyTorch), and the flags refused.
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"

namespace psbench::testing {
namespace {

// A start's lateness allowed: a sleeping thread's wake-up on a loaded 2-core machine.
constexpr double kSlackUs = 100000;

// Every replayed tensor went once a step (its bucket goes whole), and its percentiles are in
// order; from its ready time it cannot be back sooner than from its part's start.
void ExpectPerTensor(const Json& replay, int steps) {
  const Json& tensors = replay["per_tensor"];
  ASSERT_EQ(tensors.size(), replay["tensors"].get<size_t>()) << replay.dump();
  for (const Json& t : tensors) {
    EXPECT_EQ(t["count"], steps) << t.dump();
    const Json& l = t["latency_us"];
    EXPECT_GT(l["p50"].get<double>(), 0) << t.dump();
    EXPECT_LE(l["p50"].get<double>(), l["p99"].get<double>()) << t.dump();
    EXPECT_LE(l["p99"].get<double>(), l["max"].get<double>()) << t.dump();
    EXPECT_LE(l["max"].get<double>(), replay["part_latency_us"]["max"].get<double>() + 1) << t.dump();
    EXPECT_GE(t["ready_to_back_us"]["p50"].get<double>(), l["p50"].get<double>()) << t.dump();
  }
}

// What every timed record must show; `buckets` buckets, `steps` steps.
void ExpectTimed(const Json& rec, size_t buckets, int steps) {
  ASSERT_EQ(rec["result"], "exact") << rec.dump();
  const Json& r = rec["replay"];
  ASSERT_EQ(r["mode"], "timed") << rec.dump();
  EXPECT_EQ(r["buckets"], buckets);
  ASSERT_EQ(r["steps"].size(), static_cast<size_t>(steps));
  const double slowest_part_us = r["part_latency_us"]["max"].get<double>();
  double compute_us = 0;
  for (const Json& s : r["steps"]) {
    compute_us += s["compute_us"].get<double>();
    // Exposed: how long the last parts took past the backward pass's end; at most the
    // slowest part and a start's lateness.
    EXPECT_GE(s["exposed_us"].get<double>(), -1) << s.dump();
    EXPECT_LE(s["exposed_us"].get<double>(), slowest_part_us + kSlackUs) << s.dump();
    ASSERT_EQ(s["bucket_start_us"].size(), buckets);
    for (size_t b = 0; b < buckets; ++b) {
      const double ready = s["bucket_ready_us"][b].get<double>(), start = s["bucket_start_us"][b].get<double>();
      EXPECT_GE(start, ready) << "bucket " << b << " sent before it was ready: " << s.dump();
      EXPECT_LE(start, ready + kSlackUs) << "bucket " << b << " sent long after it was ready: " << s.dump();
    }
  }
  // The recorded compute is waited out: the steps take at least that long by the wall clock.
  EXPECT_GE(rec["seconds"].get<double>() * 1e6, compute_us) << rec.dump();
  ExpectPerTensor(r, steps);
}

class TimedReplayTest : public IntegrationTest {};

TEST_F(TimedReplayTest, BucketsGoWhenReadyAndStepsLastTheirCompute) {
  TempDir tmp;
  const std::string trace = WriteTimedTrace(tmp), json = tmp.File("r.jsonl");
  for (const char* sync : {"--sync", "--async"}) {
    RunResult r = RunCommand(RunArgv({"--benchmark=updates", "--scheme=trace", "--trace=" + trace, "--replay=timed",
                                      sync, "--num-ps=2", "--num-workers=2", "--steps=4", "--json=" + json}),
                             seconds(120));
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    EXPECT_NE(r.out.find("4 steps replayed as timed"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("# timed replay, ms per step"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("# slowest tensors of worker"), std::string::npos) << r.out;
  }
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 4u);
  for (const Json& rec : records) {
    ExpectTimed(rec, 2, 4);
    // Trace steps in turn; step 1's second bucket has a tensor without a gradient: ready at
    // the compute's end.
    const Json& steps = rec["replay"]["steps"];
    EXPECT_EQ(steps[3]["trace_step"], 0);
    EXPECT_EQ(steps[1]["bucket_ready_us"][1], 60000.0) << steps[1].dump();
    EXPECT_EQ(steps[0]["bucket_ready_us"][0], 20000.0);
    // Placed by bytes in model order: a, c and d on PS 0, b on PS 1; so bucket {d, c} is one
    // part, bucket {b, a} two.
    EXPECT_EQ(rec["replay"]["parts"], 3) << rec.dump();
    const Json& tensors = rec["replay"]["per_tensor"];
    EXPECT_EQ(tensors[1]["name"], "b");
    EXPECT_EQ(tensors[1]["ps"], 1);
    EXPECT_EQ(tensors[3]["ps"], 0);
  }
}

// Three steps of torchvision's ResNet-18 captured with psbench_trace from PyTorch.
TEST_F(TimedReplayTest, CapturedPyTorchTraceReplaysExactly) {
  TempDir tmp;
  const std::string json = tmp.File("r.jsonl");
  RunResult r = RunCommand(RunArgv({"--benchmark=updates", "--scheme=trace", "--replay=timed",
                                    "--trace=" + SourcePath("payloads/traces/resnet18_captured.json"),
                                    "--num-ps=2", "--num-workers=2", "--steps=3", "--json=" + json}),
                           seconds(180));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 2u);
  for (const Json& rec : records) {
    EXPECT_EQ(rec["replay"]["tensors"], 62) << rec.dump();
    EXPECT_EQ(rec["replay"]["buckets"], 3);
    ASSERT_EQ(rec["result"], "exact");
    double compute_us = 0;
    for (const Json& s : rec["replay"]["steps"]) compute_us += s["compute_us"].get<double>();
    EXPECT_GE(rec["seconds"].get<double>() * 1e6, compute_us) << "the recorded compute is waited out";
    ExpectPerTensor(rec["replay"], 3);
    EXPECT_EQ(rec["replay"]["per_tensor"][0]["name"], "conv1.weight");
  }
}

TEST_F(TimedReplayTest, ReplayFlagsThatCannotWorkAreRefused) {
  TempDir tmp;
  const std::string timed = WriteTimedTrace(tmp);
  struct Case {
    Argv flags;
    std::vector<std::string> keywords;
  };
  const std::vector<Case> cases = {
      {{"--benchmark=updates", "--scheme=trace", "--trace=" + timed, "--replay=fast"},
       {"--replay=fast", "timed or back-to-back"}},
      {{"--benchmark=updates", "--buffers=4", "--replay=timed"}, {"--replay", "--scheme=trace only"}},
      {{"--benchmark=latency", "--scheme=trace", "--trace=" + timed, "--replay=timed"},
       {"--replay", "--benchmark=updates"}},
      {{"--benchmark=updates", "--scheme=trace", "--trace=" + SourcePath("payloads/traces/alexnet.json"),
        "--replay=timed"},
       {"--replay=timed", "psbench-trace/2"}},
  };
  for (const Case& c : cases) ExpectRunAndWorkerRefuse(c.flags, c.keywords);
  // The trace's compute is waited out: 50 steps of 60 ms cannot fit a 2 s run.
  ExpectOneLineFailure(RunCommand(RunArgv({"--benchmark=updates", "--scheme=trace", "--trace=" + timed, "--replay=timed",
                                           "--steps=50", "--timeout=2s"})),
                       2, "psbench", {"--replay=timed", "50 steps", "take 3s", "--timeout=2s"});
}

}  // namespace
}  // namespace psbench::testing
