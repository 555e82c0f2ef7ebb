// The benchmark loops (bench/runner.h) and the records made from them (bench/report.h), on
// the in-process loopback transport: every operation counted once, bytes = operations x
// payload, the PS's own counts equal the worker's, the record says so; no process, no socket.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/figures.h"
#include "bench/report.h"
#include "bench/runner.h"
#include "bench/scenario.h"
#include "payloads/payload.h"
#include "transports/loopback/loopback.h"

namespace psbench {
namespace {

class RunnerTest : public ::testing::Test {
 protected:
  void StartPs(int n, int64_t corrupt_every = 0) {
    for (int i = 0; i < n; ++i) {
      ServerOptions so;
      so.corrupt_every = corrupt_every;
      auto server = loopback::NewLoopbackServer(so);
      auto port = server->Start();
      ASSERT_TRUE(port.ok()) << port.status();
      scenario_.ps.push_back(absl::StrCat("loopback:", *port));
      servers_.push_back(std::move(server));
    }
  }
  void TearDown() override {
    for (auto& s : servers_) s->Shutdown();
    for (auto& s : servers_) s->Wait();
  }

  // Runs the scenario's first plan; its measurement and record.
  absl::StatusOr<Measurement> Run(nlohmann::json* record = nullptr) {
    scenario_.run_id = "runner-test";
    ClientOptions co;
    co.servers = scenario_.ps;
    co.validate = scenario_.validate;
    client_ = loopback::NewLoopbackClient(co);
    if (absl::Status s = client_->Connect(); !s.ok()) return s;
    auto plans = scenario_.Plans();
    if (!plans.ok()) return plans.status();
    plan_ = (*plans)[0];
    auto set = RegisterPayloads(scenario_, *client_, plan_, &payloads_);
    if (!set.ok()) return set.status();
    auto m = RunBenchmark(scenario_, *client_, *set, 0);
    if (m.ok() && record != nullptr) *record = RecordToJson(MakeRecord(scenario_, plan_, *m));
    return m;
  }

  Scenario scenario_;
  PayloadPlan plan_;
  std::vector<std::unique_ptr<Server>> servers_;
  std::unique_ptr<Client> client_;
  std::vector<std::unique_ptr<Payload>> payloads_;
};

TEST_F(RunnerTest, LatencyCountsEveryOperationOnceAndTheRecordSaysSo) {
  StartPs(1);
  scenario_.benchmark = Benchmark::kLatency;
  scenario_.warmup_iterations = 5;
  scenario_.iterations = 50;
  scenario_.validate = true;
  nlohmann::json r;
  auto m = Run(&r);
  ASSERT_TRUE(m.ok()) << m.status();
  const uint64_t payload = plan_.Bytes(0);
  EXPECT_EQ(m->ops, 50u);
  EXPECT_EQ(m->bytes, 50 * payload);
  EXPECT_EQ(m->latency.count(), 50u);
  ASSERT_EQ(m->ps_rpcs.size(), 1u);
  EXPECT_EQ(m->ps_rpcs[0], 50u) << "the PS counts the measurement alone, as the worker does";
  EXPECT_EQ(m->ps_bytes[0], 50 * payload);
  EXPECT_GT(m->seconds, 0);
  EXPECT_EQ(r["benchmark"], "latency");
  EXPECT_EQ(r["iterations"], 50);
  EXPECT_EQ(r["bytes"], 50 * payload);
  EXPECT_EQ(r["payload_bytes"], payload);
  EXPECT_EQ(r["latency_us"]["count"], 50);
  EXPECT_LE(r["latency_us"]["min"].get<double>(), r["latency_us"]["p50"].get<double>());
  EXPECT_LE(r["latency_us"]["p50"].get<double>(), r["latency_us"]["max"].get<double>());
  EXPECT_EQ(r["ps_counted"][0]["rpcs"], 50);
  EXPECT_EQ(r["peers_lost"], 0);
  EXPECT_EQ(r["validate"], true);
}

TEST_F(RunnerTest, BandwidthRecordIsBytesOverTime) {
  StartPs(1);
  scenario_.benchmark = Benchmark::kBandwidth;
  scenario_.window = 4;
  scenario_.warmup_iterations = 4;
  scenario_.iterations = 40;
  nlohmann::json r;
  auto m = Run(&r);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->ops, 40u);
  EXPECT_EQ(r["iterations"], 40);
  const double seconds = r["seconds"].get<double>();
  ASSERT_GT(seconds, 0);
  EXPECT_NEAR(r["mb_per_s"].get<double>(), 40.0 * plan_.Bytes(0) / seconds / 1e6, 1e-6 * r["mb_per_s"].get<double>());
  EXPECT_NEAR(r["msgs_per_s"].get<double>(), 40.0 / seconds, 1e-6 * r["msgs_per_s"].get<double>());
}

// Throughput by count is per PS: each of 2 PS gets its iterations; the total record of one
// worker equals its own figures.
TEST_F(RunnerTest, ThroughputCountsPerPsAndAggregates) {
  StartPs(2);
  scenario_.benchmark = Benchmark::kThroughput;
  scenario_.outstanding = 3;
  scenario_.warmup_iterations = 3;
  scenario_.iterations = 30;
  nlohmann::json r;
  auto m = Run(&r);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->ops_per_ps.size(), 2u);
  EXPECT_EQ(m->ops_per_ps[0], 30u);
  EXPECT_EQ(m->ops_per_ps[1], 30u);
  EXPECT_EQ(m->ops, 60u);
  EXPECT_EQ(m->ps_rpcs[0] + m->ps_rpcs[1], 60u);
  nlohmann::json total = RecordToJson(AggregateThroughput({*RecordFromJson(r)}));
  EXPECT_EQ(total["scope"], "total");
  EXPECT_EQ(total["iterations"], r["iterations"]);
  // Over the workers' wall-clock window (start_unix_s to end_unix_s), which differs from the
  // worker's own steady-clock seconds by microseconds.
  EXPECT_NEAR(total["rpc_per_s"].get<double>(), r["rpc_per_s"].get<double>(), 1e-3 * r["rpc_per_s"].get<double>());
  // 60 operations: a p99 from them is their maximum, which the total's table row showed.
  EXPECT_FALSE(total.contains("worst_worker_p99_us")) << total.dump();
  EXPECT_EQ(FindBenchmarkKind("throughput")->row(*RecordFromJson(total))[5], "-");
  nlohmann::json longer = r;
  longer["iterations"] = 100;
  total = RecordToJson(AggregateThroughput({*RecordFromJson(longer)}));
  EXPECT_EQ(total["worst_worker_p99_us"], r["rpc_latency_us"]["p99"]);
}

// By time: the measured time covers at least the duration, and bytes still equal operations
// times the payload (no operation left out or counted twice at the edges).
TEST_F(RunnerTest, ByTimeEveryStartedOperationIsCounted) {
  StartPs(1);
  scenario_.benchmark = Benchmark::kBandwidth;
  scenario_.warmup = absl::ZeroDuration();
  scenario_.warmup_iterations = -1;
  scenario_.duration = absl::Milliseconds(200);
  auto m = Run();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_GT(m->ops, 0u);
  EXPECT_EQ(m->bytes, m->ops * plan_.Bytes(0));
  EXPECT_GE(m->seconds, 0.2);
}

// However short the time, the first round goes out and is counted: a measurement of no
// operation read as 0 µs.
TEST_F(RunnerTest, ByTimeTheFirstRoundGoesOutHoweverShortTheTime) {
  StartPs(2);
  scenario_.benchmark = Benchmark::kThroughput;
  scenario_.outstanding = 2;
  scenario_.warmup = absl::ZeroDuration();
  scenario_.duration = absl::Nanoseconds(1);
  auto m = Run();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->ops, 4u) << "one round: 2 outstanding to each of 2 PS";
  EXPECT_EQ(m->ops_per_ps, (std::vector<uint64_t>{2, 2}));
  EXPECT_GT(m->latency.Percentile(0.5), 0);
}

// --validate with a PS that damages payloads: the loop stops with DATA_LOSS, it does not hang.
TEST_F(RunnerTest, DamagedPayloadStopsTheLoopWithDataLoss) {
  StartPs(1, /*corrupt_every=*/3);
  scenario_.benchmark = Benchmark::kLatency;
  scenario_.warmup_iterations = 0;
  scenario_.iterations = 20;
  scenario_.validate = true;
  auto m = Run();
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss) << m.status();
}

// Open loop by count: every planned operation sent and counted once, each timed three ways,
// and the record's "load" says what was planned and what came of it.
TEST_F(RunnerTest, OpenLoopSendsEveryPlannedOperationOnce) {
  StartPs(2);
  scenario_.benchmark = Benchmark::kThroughput;
  scenario_.load = {LoadKind::kConstant, 20000};
  scenario_.warmup_iterations = 10;
  scenario_.iterations = 200;  // per PS
  nlohmann::json r;
  auto m = Run(&r);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(m->open_loop.has_value());
  EXPECT_EQ(m->ops, 400u);
  EXPECT_EQ(m->ops_per_ps[0], 200u) << "operations go to the PS in turn";
  EXPECT_EQ(m->ps_rpcs[1], 200u);
  EXPECT_EQ(m->latency.count(), 400u);
  EXPECT_EQ(m->open_loop->uncorrected.count(), 400u);
  EXPECT_EQ(m->open_loop->lag.count(), 400u);
  EXPECT_EQ(m->open_loop->planned, 400u);
  EXPECT_EQ(m->open_loop->dropped, 0u);
  // 400 operations at 20000/s: the schedule takes 20 ms, which the measurement cannot beat.
  EXPECT_GE(m->seconds, 399 / 20000.0);
  // From the planned start is never shorter than from the send.
  EXPECT_GE(m->latency.max(), m->open_loop->uncorrected.max());
  const nlohmann::json& load = r["load"];
  EXPECT_EQ(load["schedule"], "constant:20000");
  EXPECT_EQ(load["planned"], 400);
  EXPECT_EQ(load["completed"], 400);
  EXPECT_EQ(load["offered_per_s"], 20000.0);
  EXPECT_NEAR(load["achieved_per_s"].get<double>(), 400 / m->seconds, 1e-6 * 20000);
  for (const char* h : {"corrected", "uncorrected", "lag"}) EXPECT_TRUE(load["histograms"].contains(h)) << h;
  EXPECT_EQ(load["corrected_us"]["count"], 400);
  EXPECT_EQ(r["rpc_latency_us"]["count"], 400) << "the record's latency is the corrected one";
}

// A rate far over what one slot can carry: operations due while --max-in-flight are out wait
// (deferred, timed from their planned start); by time, those still waiting at the end are
// dropped and counted, never silently skipped.
TEST_F(RunnerTest, OpenLoopDefersAtTheCapAndCountsWhatIsDropped) {
  StartPs(1);
  scenario_.benchmark = Benchmark::kLatency;
  scenario_.sweep = std::make_pair(uint64_t{64}, uint64_t{64});  // quick operations: many of them
  scenario_.load = {LoadKind::kConstant, 1e8};
  scenario_.max_in_flight = 1;
  scenario_.warmup_iterations = 0;
  scenario_.duration = absl::Milliseconds(50);
  nlohmann::json r;
  auto m = Run(&r);
  ASSERT_TRUE(m.ok()) << m.status();
  const OpenLoopFigures& f = *m->open_loop;
  EXPECT_GT(f.deferred, 0u);
  EXPECT_GT(f.dropped, 0u);
  EXPECT_EQ(f.planned, m->ops + f.dropped) << "every planned operation was sent or dropped";
  EXPECT_EQ(r["load"]["dropped"], f.dropped);
  EXPECT_LT(r["load"]["achieved_per_s"].get<double>(), 1e8);
  // The operations waited for the slot: corrected latency far above the send-to-reply one.
  EXPECT_GT(m->latency.Percentile(0.5), 10 * f.uncorrected.Percentile(0.5));
}

}  // namespace
}  // namespace psbench
