// The no-lost-update check can fire: a psbench-ps armed with a test fault
// (PSBENCH_TEST_PS_FAULT) drops one update of one tensor, applies it twice, or applies it to
// the wrong tensor, while accounting for it as a correct store would. Over grpc, 2 PS (one
// faulty), 2 workers, sync and async, both wire modes: every worker exits 1 with one line
// naming the PS, the tensor, and the worker and step of the update that went wrong; under
// psbench run their records are kept. The fault is refused when malformed, and no flag
// reaches it.
#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"

namespace psbench::testing {
namespace {

constexpr int kSteps = 6;

struct Fault {
  std::string kind;  // drop, duplicate, wrong-tensor
  std::string words;  // what the worker's line says of the update
};

class PsTestFaultTest : public IntegrationTest,
                        public ::testing::WithParamInterface<std::tuple<Fault, bool, std::string>> {};

TEST_P(PsTestFaultTest, EveryWorkerNamesThePsTensorWorkerAndStep) {
  const auto& [fault, sync, mode] = GetParam();
  // Worker 1's step 3, the first tensor of PS 0's shard (the first 1 MiB buffer).
  auto faulty = PsServer::Start({}, {"PSBENCH_TEST_PS_FAULT=" + fault.kind + ":1:3:0"});
  auto healthy = PsServer::Start();
  ASSERT_TRUE(faulty && healthy);
  EXPECT_NE(faulty->process().Stderr().find("TEST FAULT ARMED"), std::string::npos);
  TempDir tmp;
  std::vector<std::unique_ptr<Process>> workers;
  for (int w = 0; w < 2; ++w) {
    workers.push_back(std::make_unique<Process>(WorkerArgv(
        faulty->address() + "," + healthy->address(),
        {"--benchmark=updates", sync ? "--sync" : "--async", "--steps=" + std::to_string(kSteps),
         "--mode=" + mode, "--num-workers=2", "--worker-index=" + std::to_string(w), "--run-id=fault-test",
         "--quiet", "--json=" + tmp.File("w" + std::to_string(w) + ".jsonl")})));
  }
  for (int w = 0; w < 2; ++w) {
    auto status = workers[w]->Wait(seconds(90));
    ASSERT_TRUE(status) << "worker " << w << " still running";
    // Async, worker 0 may read the parameters back before worker 1's step 3 is applied:
    // only the worker whose update it is must see it. Sync, every worker does.
    if (!sync && w == 0 && *status == 0) continue;
    std::vector<Json> records = ReadJsonLines(tmp.File("w" + std::to_string(w) + ".jsonl"));
    ASSERT_EQ(records.size(), 1u);
    const Json& r = records[0];
    EXPECT_EQ(r["result"], "mismatch") << r.dump();
    const Json& first = r["placement"][0];
    ASSERT_EQ(first["ps"], faulty->address());
    const int tensor = first["tensors"][0].get<int>();
    // The PS accounted for every update as a correct store would: only the values tell.
    for (const Json& p : r["placement"]) {
      EXPECT_EQ(p["applied"]["workers"][w]["steps"], "0-" + std::to_string(kSteps - 1)) << p.dump();
      EXPECT_TRUE(p["applied"]["workers"][w]["duplicates"].empty()) << p.dump();
    }
    ASSERT_TRUE(r.contains("explained")) << r.dump();
    EXPECT_EQ(r["explained"][0]["ps"], faulty->address());
    EXPECT_EQ(r["explained"][0]["tensor"], tensor);
    EXPECT_EQ(r["explained"][0]["fitting"], 1);
    EXPECT_EQ(r["explained"][0]["updates"][0], Json({{"worker", 1}, {"step", 3}}));
    RunResult result;
    result.exit_code = *status;
    result.err = workers[w]->Stderr();
    ExpectOneLineFailure(result, 1, "psbench-worker",
                         {"updates lost or wrong", "PS " + faulty->address(), "tensor " + std::to_string(tensor),
                          "worker 1's step 3", fault.words});
  }
}

INSTANTIATE_TEST_SUITE_P(
    Faults, PsTestFaultTest,
    ::testing::Combine(::testing::Values(Fault{"drop", "is missing"}, Fault{"duplicate", "an extra update of"},
                                         Fault{"wrong-tensor", "is missing"}),
                       ::testing::Bool(), ::testing::Values("serialized", "non-serialized")),
    [](const auto& info) {
      std::string kind = std::get<0>(info.param).kind;
      kind.erase(std::remove(kind.begin(), kind.end(), '-'), kind.end());
      return kind + (std::get<1>(info.param) ? "_sync_" : "_async_") +
             (std::get<2>(info.param) == "serialized" ? "serialized" : "nonserialized");
    });

// psbench run keeps the records of workers that exited 1 on a failed check: the mismatch
// is a measurement, and each record says where the update went missing.
class PsTestFaultRunTest : public IntegrationTest {};

TEST_F(PsTestFaultRunTest, PsbenchRunKeepsTheRecordsOfWorkersWhoseCheckFailed) {
  TempDir tmp;
  const std::string json = tmp.File("run.jsonl");
  RunResult r = RunCommand(Concat({"/usr/bin/env", "PSBENCH_TEST_PS_FAULT=drop:1:3:0"},
                                  RunArgv({"--benchmark=updates", "--sync", "--num-ps=1", "--num-workers=2",
                                           "--steps=" + std::to_string(kSteps), "--json=" + json})),
                           seconds(120));
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("updates lost or wrong"), std::string::npos) << r.Describe();
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 2u) << "one record per worker, no total\n" << r.Describe();
  for (const Json& rec : records) {
    EXPECT_EQ(rec["result"], "mismatch") << rec.dump();
    EXPECT_EQ(rec["explained"][0]["updates"][0], Json({{"worker", 1}, {"step", 3}})) << rec.dump();
  }
}

class PsTestFaultArmingTest : public IntegrationTest {};

TEST_F(PsTestFaultArmingTest, AMalformedTestFaultIsRefusedAndNoFlagArmsOne) {
  for (const char* bad : {"drop", "lose:1:3:0", "drop:x:3:0"}) {
    RunResult r = RunCommand({"/usr/bin/env", std::string("PSBENCH_TEST_PS_FAULT=") + bad,
                              PsArgv({"--port=0"})[0], "--port=0"},
                             seconds(20));
    ExpectOneLineFailure(r, 2, "psbench-ps", {"PSBENCH_TEST_PS_FAULT", bad});
  }
  RunResult r = RunCommand(PsArgv({"--port=0", "--test-fault=drop:1:3:0"}), seconds(20));
  EXPECT_EQ(r.exit_code, 2) << "no flag arms a test fault";
}

}  // namespace
}  // namespace psbench::testing
