// End to end: real psbench-ps, psbench-worker and psbench processes on loopback, checked
// through their exit status and their JSON records.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"

namespace psbench::testing {
namespace {

constexpr uint64_t S = 10;                // default --small
constexpr uint64_t M = 10 * 1024;         // default --medium
constexpr uint64_t L = 1024 * 1024;       // default --large
constexpr uint64_t kDefaultSeed = 20180324;

// The plans docs/payloads.md and payloads/spec.h define for the default 10 buffers.
const std::vector<uint64_t> kUniformPlan = {S, M, L, S, M, L, S, M, L, S};
const std::vector<uint64_t> kSkewPlan = {L, M, S, L, M, L, M, L, L, L};

// Quick by count: a few warm-up operations, then a few measured ones.
const Argv kQuick = {"--warmup-iterations=5", "--iterations=20"};
constexpr uint64_t kQuickIterations = 20;

// The random scheme as spec.h defines it: category i is chosen[mt19937_64(seed)() % k].
std::vector<uint64_t> RandomPlan(uint64_t seed, int buffers, const std::vector<uint64_t>& chosen) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> plan;
  for (int i = 0; i < buffers; ++i) plan.push_back(chosen[rng() % chosen.size()]);
  return plan;
}

// "L M S ..." for a plan of default-sized buffers, to print the order a run used.
std::string Letters(const Json& buffers) {
  std::string out;
  for (const Json& b : buffers) {
    uint64_t v = b.get<uint64_t>();
    out += out.empty() ? "" : " ";
    out += v == S ? "S" : v == M ? "M" : v == L ? "L" : std::to_string(v);
  }
  return out;
}

void ExpectRelativelyNear(double actual, double expected, double rel, const std::string& what) {
  EXPECT_NEAR(actual, expected, rel * std::max(std::abs(actual), std::abs(expected))) << what;
}

// min <= p50 <= p90 <= p99 <= p999 <= max, and min <= mean <= max.
void ExpectOrderedLatency(const Json& lat, uint64_t count) {
  SCOPED_TRACE("latency: " + lat.dump());
  const char* keys[] = {"min", "p50", "p90", "p99", "p999", "max"};
  for (const char* k : {"min", "p50", "p90", "p99", "p999", "max", "mean", "stdev"}) {
    ASSERT_TRUE(lat.contains(k) && lat[k].is_number()) << k;
  }
  EXPECT_EQ(lat.value("count", uint64_t{0}), count);
  EXPECT_GT(lat["min"].get<double>(), 0);
  for (size_t i = 1; i < std::size(keys); ++i) {
    EXPECT_LE(lat[keys[i - 1]].get<double>(), lat[keys[i]].get<double>())
        << keys[i - 1] << " > " << keys[i];
  }
  EXPECT_LE(lat["min"].get<double>(), lat["mean"].get<double>());
  EXPECT_LE(lat["mean"].get<double>(), lat["max"].get<double>());
  EXPECT_GE(lat["stdev"].get<double>(), 0);
}

// What a worker record must say.
struct Expected {
  std::string benchmark = "latency";
  std::string mode = "non-serialized";
  std::string scheme = "uniform";
  Json buffers;                 // sizes, or one list of sizes per payload (traces with groups)
  uint64_t iterations = kQuickIterations;  // --iterations (throughput: per PS)
  size_t num_ps = 1;
  int workers = 1;
  bool validate = true;
  uint64_t seed = kDefaultSeed;
};

void ExpectRecord(const Json& r, const Expected& e) {
  SCOPED_TRACE("record: " + r.dump().substr(0, 2000));
  EXPECT_EQ(r.value("benchmark", ""), e.benchmark);
  EXPECT_EQ(r.value("transport", ""), "grpc");
  EXPECT_EQ(r.value("mode", ""), e.mode);
  EXPECT_EQ(r.value("scheme", ""), e.scheme);
  EXPECT_EQ(r["buffers"], e.buffers);
  EXPECT_EQ(r.value("scope", ""), "worker");
  EXPECT_EQ(r.value("workers", 0), e.workers);
  EXPECT_EQ(r.value("ps", size_t{0}), e.num_ps);
  EXPECT_EQ(r.value("validate", !e.validate), e.validate);
  EXPECT_EQ(r.value("seed", uint64_t{0}), e.seed);

  // Counts: --iterations per PS; every operation carried one payload.
  const bool throughput = e.benchmark == "throughput";
  const uint64_t ops = e.iterations * (throughput ? e.num_ps : 1);
  EXPECT_EQ(r.value("iterations", uint64_t{0}), ops);
  const bool one_payload = e.buffers.is_array() && !e.buffers.empty() && !e.buffers[0].is_array();
  if (one_payload) {
    uint64_t payload = 0;
    for (const Json& b : e.buffers) payload += b.get<uint64_t>();
    EXPECT_EQ(r.value("payload_bytes", uint64_t{0}), payload);
    EXPECT_EQ(r.value("payloads", 0), 1);
    EXPECT_EQ(r.value("bytes", uint64_t{0}), payload * ops);
  }
  const double secs = r.value("seconds", 0.0);
  EXPECT_GT(secs, 0);

  // The scenario, the processes and the machine.
  const Json& cfg = r["config"];
  EXPECT_EQ(cfg.value("benchmark", ""), e.benchmark);
  EXPECT_EQ(cfg.value("mode", ""), e.mode);
  EXPECT_EQ(cfg.value("iterations", uint64_t{0}), e.iterations);
  EXPECT_EQ(cfg.value("validate", !e.validate), e.validate);
  EXPECT_EQ(cfg.value("ps", Json::array()).size(), e.num_ps);
  const Json& env = r["environment"];
  EXPECT_FALSE(env.value("host", "").empty());
  EXPECT_GE(env.value("online_cpus", 0), 1);
  for (const char* v : {"psbench", "grpc", "protobuf", "compiler"}) {
    EXPECT_FALSE(env["versions"].value(v, "").empty()) << "environment.versions." << v;
  }
  // The allocator's large-block policy is fixed (bench/process/alloc_policy.h).
  ExpectAllocatorPolicy(env["allocator"]);
  EXPECT_EQ(env.value("mutex_deadlock_detection", ""), "off") << "bench/process/mutex_policy.h";
  EXPECT_TRUE(r["cpu"]["worker"].contains("utilization"));
  EXPECT_EQ(r["cpu"]["ps"].size(), e.num_ps);
  EXPECT_GT(r["placement"]["worker"].value("pid", 0), 0);
  ASSERT_EQ(r["placement"]["ps"].size(), e.num_ps);
  for (size_t i = 0; i < e.num_ps; ++i) {
    EXPECT_EQ(r["placement"]["ps"][i]["address"], cfg["ps"][i]);
    EXPECT_GT(r["placement"]["ps"][i].value("pid", 0), 0);
  }
  EXPECT_TRUE(r.value("timestamp", "").size() >= 20) << "timestamp";
  EXPECT_LE(r.value("start_unix_s", 0.0), r.value("end_unix_s", 0.0));

  // With one worker, what each PS counted itself must match what the worker counted.
  if (e.workers == 1) {
    const Json& counted = r["ps_counted"];
    ASSERT_EQ(counted.size(), e.num_ps) << "ps_counted";
    for (size_t i = 0; i < e.num_ps; ++i) {
      const uint64_t rpcs = throughput ? e.iterations : ops;
      EXPECT_EQ(counted[i]["address"], cfg["ps"][i]);
      EXPECT_EQ(counted[i].value("rpcs", uint64_t{0}), rpcs) << "PS " << i << " counted";
      if (one_payload) {
        EXPECT_EQ(counted[i].value("bytes", uint64_t{0}),
                  rpcs * r.value("payload_bytes", uint64_t{0}))
            << "PS " << i << " counted";
      }
    }
  }

  // The benchmark's own figures.
  const double bytes = r.value("bytes", 0.0);
  if (e.benchmark == "latency") {
    ExpectOrderedLatency(r["latency_us"], ops);
  } else if (e.benchmark == "bandwidth") {
    ExpectRelativelyNear(r.value("mb_per_s", 0.0), bytes / secs / 1e6, 1e-6, "mb_per_s");
    ExpectRelativelyNear(r.value("msgs_per_s", 0.0), static_cast<double>(ops) / secs, 1e-6,
                         "msgs_per_s");
    EXPECT_GT(r.value("mb_per_s", 0.0), 0);
    ExpectOrderedLatency(r["rpc_latency_us"], ops);
  } else {
    ExpectRelativelyNear(r.value("rpc_per_s", 0.0), static_cast<double>(ops) / secs, 1e-6,
                         "rpc_per_s");
    ExpectRelativelyNear(r.value("mb_per_s", 0.0), bytes / secs / 1e6, 1e-6, "mb_per_s");
    EXPECT_GT(r.value("rpc_per_s", 0.0), 0);
    EXPECT_EQ(r["rpc_per_ps"], Json(std::vector<uint64_t>(e.num_ps, e.iterations)))
        << "--iterations=" << e.iterations << " is per PS: every PS serves exactly that many";
    ExpectOrderedLatency(r["rpc_latency_us"], ops);
  }
}

// Runs commands that write --json records; has a directory for their files.
class E2ETest : public IntegrationTest {
 protected:
  // Runs `argv` with --json=<a fresh file>; expects exit 0 and nothing on stderr.
  std::vector<Json> RunForRecords(Argv argv, RunResult* result = nullptr,
                                  milliseconds timeout = seconds(60)) {
    std::string json = tmp_.File("results-" + std::to_string(++runs_) + ".jsonl");
    argv.push_back("--json=" + json);
    RunResult r = RunCommand(argv, timeout);
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    EXPECT_EQ(r.err, "") << r.Describe();
    if (result != nullptr) *result = r;
    return ReadJsonLines(json);
  }

  TempDir tmp_;
  int runs_ = 0;
};

// Tests against one psbench-ps started for the test; it must still be serving at the end and
// exit 0 on SIGTERM.
class E2EWorkerTest : public E2ETest {
 protected:
  void SetUp() override {
    E2ETest::SetUp();
    ps_ = PsServer::Start();
    ASSERT_TRUE(ps_);
  }
  void TearDown() override {
    if (ps_) {
      EXPECT_TRUE(ps_->process().Running()) << "the PS died during the test";
      EXPECT_EQ(ps_->process().Stop(SIGTERM), 0) << "psbench-ps exits 0 on SIGTERM";
      ps_.reset();
    }
    E2ETest::TearDown();
  }

  std::vector<Json> RunWorker(const Argv& flags, RunResult* result = nullptr) {
    return RunForRecords(WorkerArgv(ps_->address(), flags), result);
  }

  std::unique_ptr<PsServer> ps_;
};

// --- every benchmark in every mode, validated -----------------------------------------------

class E2EBenchmarkModeTest
    : public E2EWorkerTest,
      public ::testing::WithParamInterface<std::tuple<std::string, std::string>> {};

TEST_P(E2EBenchmarkModeTest, ValidatedRunReportsItsPlanAndFigures) {
  const auto& [benchmark, mode] = GetParam();
  RunResult run;
  auto records = RunWorker(
      Concat({"--benchmark=" + benchmark, "--mode=" + mode, "--validate"}, kQuick), &run);
  ASSERT_EQ(records.size(), 1u);
  ExpectRecord(records[0], {.benchmark = benchmark, .mode = mode, .buffers = kUniformPlan});
  EXPECT_NE(run.out.find("# psbench " + benchmark + " | transport grpc | mode " + mode +
                         " | scheme uniform"),
            std::string::npos)
      << "table header on stdout:\n" << run.out;
}

INSTANTIATE_TEST_SUITE_P(
    All, E2EBenchmarkModeTest,
    ::testing::Combine(::testing::Values("latency", "bandwidth", "throughput"),
                       ::testing::Values("non-serialized", "serialized")),
    [](const auto& info) {
      std::string name = std::get<0>(info.param) + "_" + std::get<1>(info.param);
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

// --- payload schemes --------------------------------------------------------------------------

TEST_F(E2EWorkerTest, UniformPlanFollowsTheGivenCategoryOrder) {
  auto records = RunWorker(Concat({"--benchmark=bandwidth", "--mode=serialized", "--validate",
                                   "--categories=L,S", "--buffers=5"},
                                  kQuick));
  ASSERT_EQ(records.size(), 1u);
  ExpectRecord(records[0], {.benchmark = "bandwidth",
                            .mode = "serialized",
                            .buffers = std::vector<uint64_t>{L, S, L, S, L}});
}

TEST_F(E2EWorkerTest, RandomPlanIsDrawnFromTheSeed) {
  for (uint64_t seed : {kDefaultSeed, uint64_t{7}}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Argv flags = {"--benchmark=latency", "--mode=serialized", "--validate", "--scheme=random"};
    if (seed != kDefaultSeed) flags.push_back("--seed=" + std::to_string(seed));
    auto records = RunWorker(Concat(flags, kQuick));
    ASSERT_EQ(records.size(), 1u);
    std::cout << "random plan, seed " << seed << ": " << Letters(records[0]["buffers"]) << "\n";
    ExpectRecord(records[0], {.mode = "serialized",
                              .scheme = "random",
                              .buffers = RandomPlan(seed, 10, {S, M, L}),
                              .seed = seed});
  }
}

TEST_F(E2EWorkerTest, SkewPlanGivesTheBiasSixtyPercentInterleaved) {
  auto records =
      RunWorker(Concat({"--benchmark=throughput", "--validate", "--scheme=skew"}, kQuick));
  ASSERT_EQ(records.size(), 1u);
  std::cout << "skew plan (large bias): " << Letters(records[0]["buffers"]) << "\n";
  // 6 L, 3 M, 1 S, round robin in bias order L, M, S while each has buffers left.
  ExpectRecord(records[0], {.benchmark = "throughput", .scheme = "skew", .buffers = kSkewPlan});
}

TEST_F(E2EWorkerTest, SkewPlanWithMediumBias) {
  auto records = RunWorker(Concat(
      {"--benchmark=bandwidth", "--validate", "--scheme=skew", "--skew-bias=medium", "--buffers=7"},
      kQuick));
  ASSERT_EQ(records.size(), 1u);
  std::cout << "skew plan (medium bias, 7 buffers): " << Letters(records[0]["buffers"]) << "\n";
  // 60/30/10 % of 7 = 4.2/2.1/0.7 -> 4 M, 2 L, 1 S by largest remainder; order M, L, S.
  ExpectRecord(records[0], {.benchmark = "bandwidth",
                            .scheme = "skew",
                            .buffers = std::vector<uint64_t>{M, L, S, M, L, M, M}});
}

TEST_F(E2EWorkerTest, TraceReplaysAReferenceModelInGradientReadyOrder) {
  const std::string trace = SourcePath("payloads/traces/alexnet.json");
  Json model = Json::parse(ReadFile(trace), nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(model.is_object() && model.contains("params")) << "cannot read " << trace;
  std::vector<Json> params = model["params"];
  std::stable_sort(params.begin(), params.end(), [](const Json& a, const Json& b) {
    return a["grad_ready_order"].get<int>() < b["grad_ready_order"].get<int>();
  });
  std::vector<uint64_t> sizes;
  std::vector<std::string> names;
  for (const Json& p : params) {
    sizes.push_back(p["bytes"].get<uint64_t>());
    names.push_back(p["name"].get<std::string>());
  }
  // AlexNet's gradients are 233 MiB per payload: two measured round trips are enough.
  auto records = RunWorker({"--benchmark=latency", "--validate", "--scheme=trace",
                            "--trace=" + trace, "--warmup-iterations=1", "--iterations=2"});
  ASSERT_EQ(records.size(), 1u);
  ExpectRecord(records[0], {.scheme = "trace", .buffers = sizes, .iterations = 2});
  EXPECT_EQ(records[0]["buffer_names"], Json(names));
  EXPECT_EQ(records[0]["payload_bytes"], model["total_bytes"]);
}

TEST_F(E2EWorkerTest, TraceGroupsAreSentInTurn) {
  const std::string trace = tmp_.Write("groups.json", R"({
    "format": "psbench-trace/1",
    "groups": [
      {"tensors": [{"name": "fc.weight", "bytes": 100}, {"name": "fc.bias", "bytes": 2048}]},
      {"tensors": [{"name": "embedding", "bytes": 5}]}
    ]})");
  // No warm-up, so that measured operation i sends group i % 2.
  auto records = RunWorker({"--benchmark=bandwidth", "--mode=serialized", "--validate",
                            "--scheme=trace", "--trace=" + trace, "--warmup=0s", "--iterations=5"});
  ASSERT_EQ(records.size(), 1u);
  const Json& r = records[0];
  ExpectRecord(r, {.benchmark = "bandwidth",
                   .mode = "serialized",
                   .scheme = "trace",
                   .buffers = Json::parse("[[100, 2048], [5]]"),
                   .iterations = 5});
  EXPECT_EQ(r["buffer_names"], Json::parse(R"([["fc.weight", "fc.bias"], ["embedding"]])"));
  EXPECT_EQ(r.value("payloads", 0), 2);
  EXPECT_EQ(r.value("bytes", uint64_t{0}), 3 * (100 + 2048) + 2 * 5);
}

// --- size sweeps ------------------------------------------------------------------------------

TEST_F(E2EWorkerTest, SizeSweepGivesOneRowPerPowerOfTwo) {
  auto records = RunWorker({"--benchmark=latency", "--validate", "--sizes=1:64K",
                            "--warmup-iterations=2", "--iterations=5"});
  ASSERT_EQ(records.size(), 17u);
  for (size_t i = 0; i < records.size(); ++i) {
    SCOPED_TRACE("row " + std::to_string(i));
    ExpectRecord(records[i], {.scheme = "sweep",
                              .buffers = std::vector<uint64_t>{uint64_t{1} << i},
                              .iterations = 5});
  }
}

TEST_F(E2ETest, RunSizeSweepEndsAtMax) {
  auto records = RunForRecords(RunArgv({"--benchmark=bandwidth", "--mode=serialized",
                                        "--validate", "--sizes=3:20", "--warmup=0s",
                                        "--iterations=10"}));
  ASSERT_EQ(records.size(), 4u);
  const uint64_t sizes[] = {3, 6, 12, 20};
  for (size_t i = 0; i < 4; ++i) {
    ExpectRecord(records[i], {.benchmark = "bandwidth",
                              .mode = "serialized",
                              .scheme = "sweep",
                              .buffers = std::vector<uint64_t>{sizes[i]},
                              .iterations = 10});
  }
}

// --- throughput over several PS ---------------------------------------------------------------

// Two spellings of one PS are one PS: counting it twice would report throughput that never
// happened.
TEST_F(E2EWorkerTest, TwoAddressesOfOnePsAreRefusedNamingBoth) {
  const std::string other = "localhost:" + std::to_string(ps_->port());
  RunResult r = RunCommand(WorkerArgv(ps_->address() + "," + other, {"--benchmark=throughput", "--duration=1s"}),
                           seconds(30));
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_NE(r.err.find(ps_->address() + " and " + other + " are the same PS"), std::string::npos) << r.Describe();
}

TEST_F(E2EWorkerTest, ThroughputCountsIterationsPerPs) {
  auto second = PsServer::Start();
  ASSERT_TRUE(second);
  auto records = RunForRecords(WorkerArgv(ps_->address() + "," + second->address(),
                                          {"--benchmark=throughput", "--validate",
                                           "--warmup-iterations=5", "--iterations=25"}));
  ASSERT_EQ(records.size(), 1u);
  ExpectRecord(records[0],
               {.benchmark = "throughput", .buffers = kUniformPlan, .iterations = 25, .num_ps = 2});
  EXPECT_EQ(second->process().Stop(SIGTERM), 0);
}

// A trace is a model: over several PS each tensor goes to one PS, placed by bytes as the
// trainer places variables, not the whole trace to every PS.
TEST_F(E2EWorkerTest, ThroughputPlacesATracesTensorsOverThePsByBytes) {
  auto second = PsServer::Start();
  ASSERT_TRUE(second);
  // By bytes, in order: a -> PS 0, b -> PS 1, c -> PS 1 (600 < 1000), d -> PS 0: 1100 B each.
  const std::string trace = tmp_.Write("model.json", R"([{"name": "a", "bytes": 1000}, {"name": "b", "bytes": 600},
                                                          {"name": "c", "bytes": 500}, {"name": "d", "bytes": 100}])");
  auto records = RunForRecords(WorkerArgv(ps_->address() + "," + second->address(),
                                          {"--benchmark=throughput", "--validate", "--scheme=trace",
                                           "--trace=" + trace, "--warmup-iterations=3", "--iterations=10"}));
  ASSERT_EQ(records.size(), 1u);
  const Json& r = records[0];
  EXPECT_EQ(r["shards"], Json::parse(R"([{"ps": ")" + ps_->address() + R"(", "tensors": 2, "bytes": 1100},
                                         {"ps": ")" + second->address() + R"(", "tensors": 2, "bytes": 1100}])"));
  EXPECT_EQ(r.value("iterations", 0), 20) << "10 to each PS";
  EXPECT_EQ(r.value("bytes", uint64_t{0}), 20u * 1100) << "each operation carries its PS's part";
  EXPECT_EQ(r.value("payload_bytes", 0.0), 1100.0) << "the mean an operation carried";
  for (int p = 0; p < 2; ++p) {
    EXPECT_EQ(r["ps_counted"][p].value("bytes", uint64_t{0}), 10u * 1100) << "PS " << p << " counted its part";
  }
  // One tensor cannot be spread over two PS.
  const std::string one = tmp_.Write("one.json", "[4096]");
  RunResult bad = RunCommand(WorkerArgv(ps_->address() + "," + second->address(),
                                        {"--benchmark=throughput", "--scheme=trace", "--trace=" + one, "--iterations=5"}),
                             seconds(30));
  EXPECT_EQ(bad.exit_code, 2) << bad.Describe();
  ASSERT_EQ(bad.ErrLines().size(), 1u) << bad.Describe();
  EXPECT_NE(bad.err.find("the trace has 1 tensor for 2 PS; each PS needs at least one"), std::string::npos)
      << bad.Describe();
  EXPECT_EQ(second->process().Stop(SIGTERM), 0);
}

TEST_F(E2ETest, RunThroughputTwoPsThreeWorkersAddsUp) {
  auto records = RunForRecords(RunArgv({"--benchmark=throughput", "--num-ps=2",
                                        "--num-workers=3", "--iterations=30", "--warmup=0s",
                                        "--validate"}));
  ASSERT_EQ(records.size(), 4u) << "3 worker records and 1 total";
  double rpc_sum = 0, mb_sum = 0;
  std::vector<int> pids;
  for (int w = 0; w < 3; ++w) {
    SCOPED_TRACE("worker " + std::to_string(w));
    const Json& r = records[w];
    EXPECT_EQ(r.value("worker_index", -1), w);
    ExpectRecord(r, {.benchmark = "throughput",
                     .buffers = kUniformPlan,
                     .iterations = 30,
                     .num_ps = 2,
                     .workers = 3});
    EXPECT_EQ(r["config"]["ps"], records[0]["config"]["ps"]) << "every worker uses the same PS";
    rpc_sum += r.value("rpc_per_s", 0.0);
    mb_sum += r.value("mb_per_s", 0.0);
    pids.push_back(r["placement"]["worker"].value("pid", 0));
  }
  std::sort(pids.begin(), pids.end());
  EXPECT_EQ(std::unique(pids.begin(), pids.end()), pids.end()) << "three worker processes";

  const Json& total = records[3];
  SCOPED_TRACE("total: " + total.dump().substr(0, 2000));
  EXPECT_EQ(total.value("scope", ""), "total");
  EXPECT_FALSE(total.contains("worker_index"));
  EXPECT_EQ(total.value("workers", 0), 3);
  EXPECT_EQ(total.value("ps", 0), 2);
  // The total rate is over the union of the workers' windows (ee74fab): all operations over
  // first start to last end. The sum of the workers' own rates is reported beside it, and
  // can only be larger (each worker's window lies inside the union).
  ExpectRelativelyNear(total.value("sum_of_worker_rpc_per_s", 0.0), rpc_sum, 1e-6,
                       "sum_of_worker_rpc_per_s is the sum of the workers' rpc_per_s");
  double first_start = 1e300, last_end = 0;
  for (int w = 0; w < 3; ++w) {
    first_start = std::min(first_start, records[w].value("start_unix_s", 0.0));
    last_end = std::max(last_end, records[w].value("end_unix_s", 0.0));
  }
  const double span = total.value("seconds", 0.0);
  ExpectRelativelyNear(span, last_end - first_start, 1e-6, "total seconds = union of windows");
  ExpectRelativelyNear(total.value("rpc_per_s", 0.0), 180 / span, 1e-6, "total rpc_per_s");
  ExpectRelativelyNear(total.value("mb_per_s", 0.0), total.value("bytes", 0.0) / span / 1e6,
                       1e-6, "total mb_per_s");
  EXPECT_LE(total.value("rpc_per_s", 0.0), rpc_sum * (1 + 1e-9));
  EXPECT_GT(mb_sum, 0);
  EXPECT_EQ(total.value("iterations", 0), 3 * 2 * 30);
  const uint64_t payload = records[0].value("payload_bytes", uint64_t{0});
  EXPECT_EQ(total.value("bytes", uint64_t{0}), 3 * 2 * 30 * payload);
  EXPECT_EQ(total["rpc_per_ps"], Json::parse("[90, 90]")) << "each PS served 3 workers x 30";
  EXPECT_EQ(total["per_worker"].size(), 3u);
  EXPECT_EQ(total["buffers"], Json(kUniformPlan));
}

// --- --validate catches corruption -------------------------------------------------------------

class E2ECorruptionTest
    : public IntegrationTest,
      public ::testing::WithParamInterface<std::tuple<std::string, std::string>> {};

TEST_P(E2ECorruptionTest, ValidateFailsTheRun) {
  const auto& [benchmark, mode] = GetParam();
  auto ps = PsServer::Start({"--fault-corrupt-every=3"});
  ASSERT_TRUE(ps);
  RunResult r = RunCommand(WorkerArgv(ps->address(), Concat({"--benchmark=" + benchmark,
                                                      "--mode=" + mode, "--validate", "--quiet"},
                                                     kQuick)));
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  ASSERT_EQ(r.ErrLines().size(), 1u) << r.Describe();
  EXPECT_EQ(r.err.rfind("psbench-worker: validation failed", 0), 0u) << r.Describe();
  EXPECT_NE(r.err.find(ps->address()), std::string::npos) << "names the PS\n" << r.Describe();
  EXPECT_EQ(ps->process().Stop(SIGTERM), 0) << "the PS survives";
}

INSTANTIATE_TEST_SUITE_P(
    EchoAndPush, E2ECorruptionTest,
    ::testing::Combine(::testing::Values("latency", "bandwidth"),
                       ::testing::Values("non-serialized", "serialized")),
    [](const auto& info) {
      std::string name = std::get<0>(info.param) + "_" + std::get<1>(info.param);
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

// --- JSON output -------------------------------------------------------------------------------

TEST_F(E2EWorkerTest, JsonAppendsOneLinePerRun) {
  const std::string json = tmp_.File("appended.jsonl");
  const Argv flags = Concat({"--benchmark=latency", "--quiet", "--json=" + json}, kQuick);
  RunResult first = RunCommand(WorkerArgv(ps_->address(), flags));
  ASSERT_EQ(first.exit_code, 0) << first.Describe();
  const std::string after_first = ReadFile(json);
  RunResult second = RunCommand(WorkerArgv(ps_->address(), flags));
  ASSERT_EQ(second.exit_code, 0) << second.Describe();
  EXPECT_EQ(first.out, "") << "--quiet prints no table";
  const std::string after_second = ReadFile(json);
  EXPECT_EQ(after_second.rfind(after_first, 0), 0u) << "the first run's line is kept as it was";
  auto records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 2u);
  for (const Json& r : records) {
    ExpectRecord(r, {.buffers = kUniformPlan, .validate = false});
  }
  EXPECT_NE(records[0]["placement"]["worker"]["pid"], records[1]["placement"]["worker"]["pid"]);
}

// --- the driver -------------------------------------------------------------------------------

TEST_F(E2ETest, RunHandsItsWorkerTheWholeScenario) {
  auto records = RunForRecords(RunArgv(
      {"--benchmark=bandwidth", "--mode=serialized", "--scheme=skew", "--skew-bias=small",
       "--categories=S,L", "--buffers=5", "--seed=5", "--window=4", "--validate",
       "--warmup-iterations=3", "--iterations=12"}));
  ASSERT_EQ(records.size(), 1u);
  // Bias small among S, L: 60/40 % of 5 = 3 S, 2 L, interleaved S, L, ...
  ExpectRecord(records[0], {.benchmark = "bandwidth",
                            .mode = "serialized",
                            .scheme = "skew",
                            .buffers = std::vector<uint64_t>{S, L, S, L, S},
                            .iterations = 12,
                            .seed = 5});
  const Json& cfg = records[0]["config"];
  EXPECT_EQ(cfg.value("window", 0), 4);
  EXPECT_EQ(cfg.value("warmup_iterations", 0), 3);
  EXPECT_EQ(cfg.value("skew_bias", ""), "small");
  EXPECT_EQ(cfg.value("categories", ""), "S,L");
}

// gRPC's transmit zero-copy on both ends (psbench run hands it to the PS too): every byte
// still checked, in both wire modes, and the records say which threshold ran.
TEST_F(E2ETest, RunWithTxZerocopyMovesEveryByteAndSaysSo) {
  for (const char* mode : {"--mode=non-serialized", "--mode=serialized"}) {
    SCOPED_TRACE(mode);
    auto records = RunForRecords(RunArgv({"--benchmark=bandwidth", mode, "--validate", "--sizes=1K:64K",
                                          "--warmup-iterations=2", "--iterations=20",
                                          "--grpc-tx-zerocopy=16K"}));
    ASSERT_EQ(records.size(), 7u);
    for (const Json& r : records) EXPECT_EQ(r["config"].value("grpc_tx_zerocopy", 0), 16384) << r.dump();
  }
  auto plain = RunForRecords(RunArgv({"--benchmark=latency", "--sizes=32:32", "--iterations=5"}));
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0]["config"].value("grpc_tx_zerocopy", -1), 0) << "off unless asked";
}

// gRPC's callback API on both ends (psbench run hands it to the PS): every kind of call, both
// wire modes, every byte checked; the records say which API ran, the PS in its own words too.
TEST_F(E2ETest, RunWithCallbackApiMovesEveryByteAndSaysSo) {
  for (const char* mode : {"--mode=non-serialized", "--mode=serialized"}) {
    SCOPED_TRACE(mode);
    std::vector<Json> records;
    for (std::vector<std::string> args : {std::vector<std::string>{"--benchmark=latency", "--sizes=32:64K"},
                                          {"--benchmark=bandwidth", "--sizes=1M:1M", "--window=4"},
                                          {"--benchmark=throughput", "--num-ps=2", "--num-workers=2"}}) {
      args.insert(args.end(), {mode, "--validate", "--grpc-api=callback", "--iterations=20", "--warmup=0s"});
      RunResult run;
      auto got = RunForRecords(RunArgv(args), &run);
      EXPECT_NE(run.out.find("| gRPC callback API"), std::string::npos) << "the table's header says so:\n" << run.out;
      records.insert(records.end(), got.begin(), got.end());
    }
    ASSERT_EQ(records.size(), 16u) << "12 sizes, 1 bandwidth size, 2 workers and their total";
    for (const Json& r : records) {
      EXPECT_EQ(r["config"].value("grpc_api", ""), "callback") << r.dump();
      for (const Json& ps : r["placement"]["ps"])
        EXPECT_EQ(ps.value("data_plane", ""), "gRPC over TCP (callback API)") << r.dump();
    }
    // An exchange (the PS's parameters back) on the callback API, checked element by element.
    auto updates = RunForRecords(RunArgv({"--benchmark=updates", mode, "--grpc-api=callback", "--num-ps=2",
                                          "--num-workers=2", "--steps=5"}));
    ASSERT_EQ(updates.size(), 2u);
    for (const Json& r : updates) EXPECT_EQ(r.value("result", ""), "exact") << r.dump();
  }
  auto plain = RunForRecords(RunArgv({"--benchmark=latency", "--sizes=32:32", "--iterations=5"}));
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0]["config"].value("grpc_api", ""), "cq") << "the completion queue unless asked";
  EXPECT_EQ(plain[0]["placement"]["ps"][0].value("data_plane", ""), "gRPC over TCP");
}

// A user's own malloc tuning stands, and the records say so.
TEST_F(E2ETest, GlibcTunablesKeepTheUsersAllocatorPolicy) {
  Argv argv = RunArgv({"--benchmark=latency", "--sizes=1M:1M", "--iterations=20"});
  argv.insert(argv.begin(), {"/usr/bin/env", "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072"});
  auto records = RunForRecords(argv);
  ASSERT_EQ(records.size(), 1u);
  const Json& allocator = records[0]["environment"]["allocator"];
  EXPECT_EQ(allocator.value("policy", ""), "GLIBC_TUNABLES") << allocator.dump();
  EXPECT_EQ(allocator.value("tunables", ""), "glibc.malloc.mmap_threshold=131072") << allocator.dump();
}

TEST_F(E2ETest, DefaultTourRunsNineBenchmarks) {
  RunResult run;
  auto records = RunForRecords(RunArgv({"--duration=0.3s", "--warmup=0s"}), &run, seconds(150));
  // Per scheme: latency, bandwidth, then throughput's 2 workers and their total; then the
  // floors of the reading aid: tcp and grpc, pingpong and stream, for each payload size.
  ASSERT_EQ(records.size(), 15u + 12u) << run.Describe();
  size_t i = 0;
  for (const char* scheme : {"uniform", "random", "skew"}) {
    SCOPED_TRACE(scheme);
    const struct {
      const char* benchmark;
      const char* scope;
      int workers;
    } group[] = {{"latency", "worker", 1},
                 {"bandwidth", "worker", 1},
                 {"throughput", "worker", 2},
                 {"throughput", "worker", 2},
                 {"throughput", "total", 2}};
    for (const auto& g : group) {
      const Json& r = records[i++];
      EXPECT_EQ(r.value("scheme", ""), scheme);
      EXPECT_EQ(r.value("benchmark", ""), g.benchmark);
      EXPECT_EQ(r.value("scope", ""), g.scope);
      EXPECT_EQ(r.value("workers", 0), g.workers);
      EXPECT_EQ(r.value("ps", 0), g.workers) << "the tour runs throughput 2 workers x 2 PS";
      EXPECT_EQ(r.value("mode", ""), "non-serialized");
      EXPECT_GT(r.value("iterations", 0), 0);
    }
  }
  EXPECT_NE(run.out.find("# Summary"), std::string::npos) << run.out;
  // The summary shows each scheme's payload.
  EXPECT_NE(run.out.find("3x1MiB 3x10KiB 4x10B"), std::string::npos) << run.out;
  // The floors measured each payload's size, and their figures stand beside the tour's.
  std::set<uint64_t> sizes;
  for (size_t s = 0; s < 3; ++s) sizes.insert(records[5 * s].value("payload_bytes", uint64_t{0}));
  std::set<std::string> seen;
  for (; i < records.size(); ++i) {
    const Json& r = records[i];
    EXPECT_EQ(r.value("kind", ""), "floor") << r.dump();
    EXPECT_TRUE(sizes.count(r.value("bytes", uint64_t{0}))) << r.dump();
    const std::string test = r.value("test", "");
    if (test == "pingpong") {
      EXPECT_GT(r["latency_us"].value("p50", 0.0), 0) << r.dump();
    } else {
      EXPECT_GT(r.value("mb_per_s", 0.0), 0) << r.dump();
    }
    seen.insert(r.value("floor", "") + "/" + test);
    // gRPC's floor is the strongest on psbench's own API, not the protobuf unary echo.
    if (r.value("floor", "") == "grpc") {
      EXPECT_EQ(r.value("tool", ""), "grpc-generic-floor") << r.dump();
    }
  }
  EXPECT_EQ(seen, (std::set<std::string>{"grpc/pingpong", "grpc/stream", "tcp/pingpong", "tcp/stream"}));
  const size_t aid = run.out.find("# Reading aid");
  ASSERT_NE(aid, std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("floor not measured"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find(" - ", aid), std::string::npos) << "every figure measured: " << run.out;
}

}  // namespace
}  // namespace psbench::testing
