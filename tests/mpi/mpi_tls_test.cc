// grpc+mpi with the security flags under a real mpirun (psbench run starts the job): its gRPC
// control plane over mutual TLS, and a payload over the PS's --max-message-size refused as bad
// input naming the limit. (The PS's own refusal on the MPI data plane, drained without a
// buffer, is the conformance suite's OversizedMessage case, run by mpi_conformance_test.)
#include <string>

#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"
#include "tests/integration/test_certs.h"

namespace psbench::testing {
namespace {

class MpiTlsTest : public IntegrationTest {};

TEST_F(MpiTlsTest, ControlPlaneOverMutualTls) {
  TestCerts certs;
  ASSERT_TRUE(certs.ok());
  TempDir tmp;
  const std::string json = tmp.File("r.jsonl");
  RunResult r = RunCommand(
      RunArgv(Concat(certs.ServerFlags(),
                     {"--tls-ca=" + certs.ca(), "--transport=grpc+mpi", "--benchmark=latency",
                      "--sizes=1K:64K", "--iterations=20", "--warmup-iterations=2", "--validate",
                      "--json=" + json})),
      seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("tls on"), std::string::npos) << r.Describe();
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 7u);  // 1K .. 64K
  for (const Json& rec : records) {
    EXPECT_EQ(rec.value("tls", false), true) << rec.dump();
    EXPECT_EQ(rec.value("transport", ""), "grpc+mpi");
  }
}

// A payload over the limit psbench run gives the PS is bad input before the job starts.
TEST_F(MpiTlsTest, OversizedPayloadIsBadInputNamingTheLimit) {
  for (const std::string benchmark : {"latency", "bandwidth"}) {
    RunResult r = RunCommand(RunArgv({"--transport=grpc+mpi", "--benchmark=" + benchmark,
                                      "--max-message-size=64K", "--sizes=1M:1M", "--iterations=4",
                                      "--warmup-iterations=0"}),
                             seconds(120));
    EXPECT_EQ(r.exit_code, 2) << r.Describe();
    EXPECT_NE(r.err.find("--max-message-size=64KiB"), std::string::npos) << r.Describe();
  }
}

}  // namespace
}  // namespace psbench::testing
