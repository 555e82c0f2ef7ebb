// A hostile client straight at the PS port (psbench_hostile_client): garbage, truncated and
// broken HTTP/2, gRPC calls with bodies that are not what the method takes in both wire modes,
// and requests over --max-message-size. Each must be refused, and the PS must keep serving: a
// worker measuring while the attacks run finishes with valid records, and one started after
// them too. grpc+verbs and grpc+mpi get the same client on their gRPC control port
// (tests/rdma/rdma_suite.sh fault/hostile, tests/mpi/mpi_transport_test.cc).
#include <string>

#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"

namespace psbench::testing {
namespace {

constexpr int kMaxMessage = 64 * 1024;

class HostileClientTest : public IntegrationTest {};

TEST_F(HostileClientTest, EachAttackIsRefusedAndThePsKeepsServing) {
  auto ps = PsServer::Start({"--max-message-size=64K"});
  ASSERT_TRUE(ps);
  TempDir tmp;
  // A worker measuring through the attacks.
  Process during(WorkerArgv(ps->address(), {"--benchmark=bandwidth", "--validate", "--warmup=0s",
                                            "--duration=6s", "--sizes=16K:16K", "--quiet",
                                            "--json=" + tmp.File("during.jsonl")}));
  RunResult attack = RunCommand({BinPath("psbench_hostile_client"), ps->address(),
                                 std::to_string(kMaxMessage)},
                                seconds(50));
  EXPECT_EQ(attack.exit_code, 0) << attack.Describe();
  std::vector<std::string> lines = Lines(attack.out);
  EXPECT_GE(lines.size(), 24u) << attack.Describe();
  for (const std::string& line : lines) EXPECT_EQ(line.rfind("PASS ", 0), 0u) << line;
  for (const char* name : {"tcp/garbage", "tcp/truncated-preface", "tcp/truncated-frame",
                           "raw/truncated-body", "serialized/truncated", "oversized/control",
                           "oversized/raw", "oversized/serialized", "after/still-serving"}) {
    EXPECT_NE(attack.out.find(std::string("PASS ") + name + ":"), std::string::npos)
        << name << "\n" << attack.Describe();
  }
  ASSERT_TRUE(ps->process().Running()) << "the PS died: " << ps->process().Stderr();

  auto status = during.Wait(seconds(40));
  ASSERT_TRUE(status) << "the worker measuring through the attacks did not finish";
  EXPECT_EQ(*status, 0) << during.Stderr();
  std::vector<Json> records = ReadJsonLines(tmp.File("during.jsonl"));
  ASSERT_EQ(records.size(), 1u);
  // Attackers hold no session: they are not workers, and no worker was lost.
  EXPECT_EQ(records[0].value("peers_lost", -1), 0) << records[0].dump();
  EXPECT_GT(records[0].value("iterations", 0), 0);

  // A new worker, in the other wire mode, after the attacks.
  RunResult after = RunCommand(WorkerArgv(ps->address(),
                                          {"--benchmark=latency", "--mode=serialized", "--validate",
                                           "--sizes=16K:16K", "--warmup-iterations=2",
                                           "--iterations=30", "--quiet"}));
  EXPECT_EQ(after.exit_code, 0) << after.Describe();
  EXPECT_EQ(after.err, "");
  EXPECT_TRUE(ps->process().Running()) << "the PS died";
  EXPECT_EQ(ps->process().Stop(SIGTERM, seconds(10)), 0) << "and it still shuts down cleanly";
}

TEST_F(HostileClientTest, UsageErrors) {
  RunResult none = RunCommand({BinPath("psbench_hostile_client")});
  EXPECT_EQ(none.exit_code, 2) << none.Describe();
  RunResult bad = RunCommand({BinPath("psbench_hostile_client"), "no-port"});
  EXPECT_EQ(bad.exit_code, 2) << bad.Describe();
}

}  // namespace
}  // namespace psbench::testing
