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
    ++runs;
  }
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), static_cast<size_t>(3 * runs));
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
