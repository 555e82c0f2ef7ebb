// No lost update: W workers push integer gradients through real psbench-ps
// processes for K steps, sync and async, in both wire modes; every parameter must come back
// exact, and each PS's account of what it applied (GetInfo, and its line at exit) must say
// every worker's every step, once. Also: psbench run --benchmark=updates, a corrupted
// update caught, and the flags it refuses.
#include <signal.h>

#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"

namespace psbench::testing {
namespace {

constexpr int kWorkers = 3;
constexpr int kSteps = 25;

// Every worker's steps 0..K-1 applied exactly once.
void ExpectEveryStepOnce(const Json& report, int workers, int steps) {
  ASSERT_EQ(report["workers"].size(), static_cast<size_t>(workers)) << report.dump();
  for (const Json& w : report["workers"]) {
    EXPECT_EQ(w["applied"], steps) << report.dump();
    EXPECT_EQ(w["steps"], "0-" + std::to_string(steps - 1)) << report.dump();
    EXPECT_TRUE(w["duplicates"].empty()) << report.dump();
  }
}

class UpdatesTest : public IntegrationTest,
                    public ::testing::WithParamInterface<std::tuple<bool, std::string>> {};

TEST_P(UpdatesTest, EveryParameterIsExactAfterEveryWorkersEveryStep) {
  const auto& [sync, mode] = GetParam();
  auto ps0 = PsServer::Start();
  auto ps1 = PsServer::Start();
  ASSERT_TRUE(ps0 && ps1);
  TempDir tmp;
  std::vector<std::unique_ptr<Process>> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.push_back(std::make_unique<Process>(WorkerArgv(
        ps0->address() + "," + ps1->address(),
        {"--benchmark=updates", sync ? "--sync" : "--async", "--steps=" + std::to_string(kSteps),
         "--mode=" + mode, "--num-workers=" + std::to_string(kWorkers),
         "--worker-index=" + std::to_string(w), "--run-id=updates-test", "--quiet",
         "--json=" + tmp.File("w" + std::to_string(w) + ".jsonl")})));
  }
  for (int w = 0; w < kWorkers; ++w) {
    auto status = workers[w]->Wait(seconds(90));
    ASSERT_TRUE(status) << "worker " << w << " still running";
    EXPECT_EQ(*status, 0) << workers[w]->Stderr();
    EXPECT_EQ(workers[w]->Stderr(), "");
    std::vector<Json> records = ReadJsonLines(tmp.File("w" + std::to_string(w) + ".jsonl"));
    ASSERT_EQ(records.size(), 1u);
    const Json& r = records[0];
    EXPECT_EQ(r["kind"], "updates");
    EXPECT_EQ(r["result"], "exact") << r.dump();
    EXPECT_EQ(r["mismatches"], 0);
    EXPECT_EQ(r["sync"], sync);
    EXPECT_EQ(r["mode"], mode);
    EXPECT_EQ(r["transport"], "grpc");
    EXPECT_EQ(r["workers"], kWorkers);
    EXPECT_EQ(r["worker_index"], w);
    EXPECT_EQ(r["ps"], 2);
    EXPECT_EQ(r["steps"], kSteps);
    EXPECT_TRUE(r.contains("seed"));
    // The default payload: 10 buffers (3 x 1 MiB, 3 x 10 KiB, 4 x 10 B) as float32 tensors.
    EXPECT_EQ(r["elements_checked"], 3 * 262144 + 3 * 2560 + 4 * 3);
    ASSERT_EQ(r["placement"].size(), 2u);
    for (const Json& p : r["placement"]) {
      EXPECT_FALSE(p["tensors"].empty());
      if (sync) ExpectEveryStepOnce(p["applied"], kWorkers, kSteps);
    }
  }
  // What each PS says it applied, once everyone is done: every step of every worker, once.
  for (PsServer* ps : {ps0.get(), ps1.get()}) {
    Json report = StopAndReadAppliedUpdates(*ps);
    EXPECT_EQ(report["sync"], sync);
    EXPECT_EQ(report["updates"], sync ? kSteps : kWorkers * kSteps) << report.dump();
    ExpectEveryStepOnce(report, kWorkers, kSteps);
  }
}

INSTANTIATE_TEST_SUITE_P(
    SyncAsyncByMode, UpdatesTest,
    ::testing::Combine(::testing::Bool(), ::testing::Values("non-serialized", "serialized")),
    [](const auto& info) {
      return std::string(std::get<0>(info.param) ? "Sync" : "Async") +
             (std::get<1>(info.param) == "serialized" ? "Serialized" : "NonSerialized");
    });

class UpdatesRunTest : public IntegrationTest {};

TEST_F(UpdatesRunTest, PsbenchRunChecksEveryWorker) {
  TempDir tmp;
  for (const char* sync : {"--sync", "--async"}) {
    RunResult r = RunCommand(RunArgv({"--benchmark=updates", sync, "--num-ps=2", "--num-workers=3",
                                      "--steps=10", "--buffers=4", "--json=" + tmp.File("r.jsonl")}),
                             seconds(120));
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    EXPECT_NE(r.out.find("# psbench updates (no lost update): 3 workers x 2 PS over grpc"),
              std::string::npos) << r.out;
  }
  std::vector<Json> records = ReadJsonLines(tmp.File("r.jsonl"));
  ASSERT_EQ(records.size(), 6u);
  for (const Json& r : records) {
    EXPECT_EQ(r["result"], "exact") << r.dump();
    EXPECT_EQ(r["workers"], 3);
    EXPECT_EQ(r["ps"], 2);
    EXPECT_EQ(r["buffers"].size(), 4u);
  }
}

// A trace of several groups is one model: every group's tensors (the first group alone was
// the model, and the record's summary named tensors never sent).
TEST_F(UpdatesRunTest, ATraceOfSeveralGroupsIsOneModel) {
  TempDir tmp;
  const std::string trace = tmp.Write("groups.json", "[[4], [4000000, 12]]");
  RunResult r = RunCommand(RunArgv({"--benchmark=updates", "--num-ps=2", "--steps=3", "--scheme=trace",
                                    "--trace=" + trace, "--json=" + tmp.File("r.jsonl")}),
                           seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("(3 tensors)"), std::string::npos) << r.out;
  std::vector<Json> records = ReadJsonLines(tmp.File("r.jsonl"));
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["result"], "exact") << records[0].dump();
  EXPECT_EQ(records[0]["buffers"], Json::parse("[4, 4000000, 12]"));
  EXPECT_EQ(records[0]["elements_checked"], 1 + 1000000 + 3);
  EXPECT_EQ(records[0]["payload_bytes"], 4000016);
}

TEST_F(UpdatesRunTest, ACorruptedUpdateIsCaughtAndNamed) {
  // The PS flips a byte of every 5th request it receives: some parameter goes wrong.
  auto ps = PsServer::Start({"--fault-corrupt-every=5"});
  ASSERT_TRUE(ps);
  TempDir tmp;
  RunResult r = RunCommand(WorkerArgv(ps->address(), {"--benchmark=updates", "--async", "--steps=12",
                                                      "--run-id=corrupt", "--quiet",
                                                      "--json=" + tmp.File("c.jsonl")}));
  ExpectOneLineFailure(r, 1, "psbench-worker",
                       {"updates lost or wrong", ps->address(), "tensor", "element", "expected", "got"});
  std::vector<Json> records = ReadJsonLines(tmp.File("c.jsonl"));
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["result"], "mismatch");
  EXPECT_GT(records[0]["mismatches"].get<int>(), 0);
  EXPECT_TRUE(records[0].contains("first_mismatch"));
}

TEST_F(UpdatesRunTest, ARunIdThePsAlreadyUpdatedIsRefused) {
  auto ps = PsServer::Start();
  ASSERT_TRUE(ps);
  const Argv flags = {"--benchmark=updates", "--steps=3", "--run-id=again", "--quiet", "--buffers=2"};
  RunResult first = RunCommand(WorkerArgv(ps->address(), flags));
  EXPECT_EQ(first.exit_code, 0) << first.Describe();
  RunResult second = RunCommand(WorkerArgv(ps->address(), flags));
  ExpectOneLineFailure(second, 2, "psbench-worker", {"already applied 3 updates", "--run-id"});
}

TEST_F(UpdatesRunTest, FlagsThatDoNotApplyOrBreakExactnessAreRefused) {
  ClosedPort nobody;
  struct Case {
    Argv flags;
    std::vector<std::string> keywords;
  };
  const std::vector<Case> cases = {
      {{"--steps=0"}, {"--steps", "[1, 1000000]"}},
      {{"--steps=1000000", "--num-workers=5"}, {"float32", "exact"}},
      {{"--sync", "--async"}, {"--sync", "--async"}},
      {{"--learning-rate=0.5"}, {"--learning-rate", "applies to --trainer only"}},
      {{"--window=4"}, {"--window", "applies to --benchmark=bandwidth only"}},
      {{"--iterations=10"}, {"--iterations", "does not apply"}},
      {{"--sizes=1:64"}, {"--sizes", "does not apply"}},
  };
  for (const Case& c : cases) {
    RunResult w = RunCommand(WorkerArgv(nobody.address(), Concat({"--benchmark=updates"}, c.flags)));
    ExpectOneLineFailure(w, 2, "psbench-worker", c.keywords);
    RunResult run = RunCommand(RunArgv(Concat({"--benchmark=updates"}, c.flags)));
    ExpectOneLineFailure(run, 2, "psbench", c.keywords);
  }
  // A sync step's sum past exact float32 (psbench run takes at most 256 workers; a worker on
  // its own, or a job's, may say more).
  RunResult wide = RunCommand(WorkerArgv(nobody.address(), {"--benchmark=updates", "--num-workers=2049"}));
  ExpectOneLineFailure(wide, 2, "psbench-worker", {"2049 workers", "not exact", "--async"});
  // More PS than tensors: each PS must hold one.
  RunResult few = RunCommand(RunArgv({"--benchmark=updates", "--num-ps=3", "--buffers=2"}));
  ExpectOneLineFailure(few, 2, "psbench", {"2 tensors", "3 PS", "--buffers"});
}

}  // namespace
}  // namespace psbench::testing
