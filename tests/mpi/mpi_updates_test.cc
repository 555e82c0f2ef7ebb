// No lost update over grpc+mpi under a real mpirun (psbench run starts the job): 3 workers x 2
// PS, sync and async; every worker finds every parameter exact and sees each
// PS account for every step it acknowledged.
#include <string>

#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"

namespace psbench::testing {
namespace {

class MpiUpdatesTest : public IntegrationTest {};

TEST_F(MpiUpdatesTest, ExactOverGrpcMpiSyncAndAsync) {
  TempDir tmp;
  const std::string json = tmp.File("r.jsonl");
  int runs = 0;
  for (const char* sync : {"--sync", "--async"}) {
    RunResult r = RunCommand(RunArgv({"--transport=grpc+mpi", "--benchmark=updates", sync, "--num-ps=2",
                                      "--num-workers=3", "--steps=20", "--json=" + json}),
                             seconds(150));
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    EXPECT_EQ(r.err.find("psbench-ps applied updates"), std::string::npos)
        << "a PS rank's exit report is the records' to say, not stderr's: " << r.Describe();
    ++runs;
  }
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), static_cast<size_t>(3 * runs));
  EXPECT_EQ(ExpectAllMovedOver(records, "grpc+mpi"), records.size());
  for (const Json& rec : records) {
    EXPECT_EQ(rec["kind"], "updates");
    EXPECT_EQ(rec["transport"], "grpc+mpi");
    EXPECT_FALSE(rec.contains("mode")) << "grpc+mpi has no wire modes";
    EXPECT_EQ(rec["result"], "exact") << rec.dump();
    EXPECT_EQ(rec["mismatches"], 0);
    EXPECT_EQ(rec["workers"], 3);
    ASSERT_EQ(rec["placement"].size(), 2u);
    const int me = rec["worker_index"].get<int>();
    for (const Json& p : rec["placement"]) {
      const Json& mine = p["applied"]["workers"][me];
      EXPECT_EQ(mine["applied"], 20) << p.dump();
      EXPECT_EQ(mine["steps"], "0-19");
      if (rec["sync"].get<bool>()) {
        EXPECT_EQ(p["applied"]["updates"], 20) << p.dump();
      }
    }
  }
}

// The check fires over grpc+mpi too: every PS rank armed with a test fault (mpirun hands its
// environment to the local ranks) drops, doubles or misplaces worker 1's step 3 of the first
// tensor of its shard, accounting for it as a correct store would. The first worker to find
// it ends the MPI job (a dead rank ends it), and its line, which psbench relays, names the PS,
// the tensor and the update.
TEST_F(MpiUpdatesTest, TestFaultsAreCaughtAndNamed) {
  struct Case {
    const char* kind;
    const char* words;
  };
  for (const Case& c : {Case{"drop", "is missing"}, Case{"duplicate", "an extra update of"},
                        Case{"wrong-tensor", "is missing"}}) {
    for (const char* sync : {"--sync", "--async"}) {
      SCOPED_TRACE(std::string(c.kind) + " " + sync);
      RunResult r = RunCommand(Concat({"/usr/bin/env", std::string("PSBENCH_TEST_PS_FAULT=") + c.kind + ":1:3:0"},
                                      RunArgv({"--transport=grpc+mpi", "--benchmark=updates", sync, "--num-ps=2",
                                               "--num-workers=2", "--steps=6"})),
                               seconds(150));
      EXPECT_EQ(r.exit_code, 1) << r.Describe();
      for (const std::string& words : {std::string("updates lost or wrong: PS 127.0.0.1:"), std::string(" tensor "),
                                       std::string("worker 1's step 3"), std::string(c.words)}) {
        EXPECT_NE(r.err.find(words), std::string::npos) << words << "\n" << r.Describe();
      }
    }
  }
}

// --replay=timed over grpc+mpi: the ResNet-18 steps captured from PyTorch, its buckets sent
// part by part as they became ready; parameters still exact, the run as long as its compute.
TEST_F(MpiUpdatesTest, TimedReplayOfACapturedTraceIsExact) {
  TempDir tmp;
  const std::string json = tmp.File("r.jsonl");
  RunResult r = RunCommand(RunArgv({"--transport=grpc+mpi", "--benchmark=updates", "--scheme=trace",
                                    "--trace=" + SourcePath("payloads/traces/resnet18_captured.json"),
                                    "--replay=timed", "--num-ps=2", "--num-workers=2", "--steps=3",
                                    "--json=" + json}),
                           seconds(180));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(ExpectAllMovedOver(records, "grpc+mpi"), 2u);
  for (const Json& rec : records) {
    EXPECT_EQ(rec["result"], "exact") << rec.dump();
    EXPECT_EQ(rec["replay"]["mode"], "timed");
    EXPECT_EQ(rec["replay"]["buckets"], 3);
    ASSERT_EQ(rec["replay"]["steps"].size(), 3u);
    double compute_us = 0;
    for (const Json& s : rec["replay"]["steps"]) compute_us += s["compute_us"].get<double>();
    EXPECT_GE(rec["seconds"].get<double>() * 1e6, compute_us) << "the recorded compute is waited out";
    for (const Json& p : rec["placement"]) EXPECT_EQ(p["applied"]["updates"], 3) << p.dump();
  }
}

}  // namespace
}  // namespace psbench::testing
