// Security defaults end to end: gRPC TLS (server-only and mutual) on both wire modes and
// through psbench run, every way a worker's credentials can be wrong, bad --tls-* flags, and
// the PS's limits (--max-message-size, --max-connections). Certificates are made by the
// openssl command line for each test suite.
#include <signal.h>

#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"
#include "tests/integration/test_certs.h"

namespace psbench::testing {
namespace {

class TlsTest : public IntegrationTest {
 protected:
  static void SetUpTestSuite() { certs_ = new TestCerts; }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }
  void SetUp() override {
    IntegrationTest::SetUp();
    ASSERT_TRUE(certs_->ok()) << "openssl could not make the test certificates";
  }
  static const TestCerts& certs() { return *certs_; }
  static Argv TrustCa() { return {"--tls-ca=" + certs_->ca()}; }

  static TestCerts* certs_;
};
TestCerts* TlsTest::certs_ = nullptr;

const Argv kSmall = {"--sizes=1K:4K", "--iterations=20", "--warmup-iterations=2"};

// A failed worker: exit 1, one line on stderr naming the PS and every keyword.
void ExpectRefused(const RunResult& r, const std::string& ps, std::vector<std::string> keywords) {
  keywords.insert(keywords.begin(), ps);
  ExpectOneLineFailure(r, 1, "psbench-worker", keywords);
}

// Every benchmark over TLS in both wire modes: it works, and every record says TLS was on.
class TlsModesTest : public TlsTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(TlsModesTest, EveryBenchmarkRunsOverTlsAndSaysSo) {
  auto ps = PsServer::Start(certs().ServerFlags());
  ASSERT_TRUE(ps);
  TempDir tmp;
  const std::string json = tmp.File("r.jsonl");
  for (const std::string benchmark : {"latency", "bandwidth", "throughput"}) {
    RunResult r = RunCommand(
        WorkerArgv(ps->address(), Concat(Concat(kSmall, TrustCa()),
                                         {"--benchmark=" + benchmark, "--mode=" + GetParam(),
                                          "--validate", "--json=" + json})),
        seconds(60));
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    EXPECT_NE(r.out.find("| tls on"), std::string::npos) << "the table header says so\n"
                                                         << r.Describe();
  }
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 9u);  // three sizes, three benchmarks
  for (const Json& rec : records) {
    EXPECT_EQ(rec.value("tls", false), true) << rec.dump();
    EXPECT_EQ(rec.value("mode", ""), GetParam());
  }
  EXPECT_EQ(ps->process().Stop(SIGTERM), 0);
}

INSTANTIATE_TEST_SUITE_P(Modes, TlsModesTest, ::testing::Values("non-serialized", "serialized"),
                         [](const auto& info) {
                           return info.param == "serialized" ? "Serialized" : "NonSerialized";
                         });

TEST_F(TlsTest, PlaintextRecordsSayTlsOff) {
  auto ps = PsServer::Start();
  ASSERT_TRUE(ps);
  TempDir tmp;
  RunResult r = RunCommand(
      WorkerArgv(ps->address(), Concat(kSmall, {"--benchmark=latency", "--json=" + tmp.File("r")})),
      seconds(60));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("| tls off"), std::string::npos) << r.Describe();
  for (const Json& rec : ReadJsonLines(tmp.File("r"))) EXPECT_EQ(rec.value("tls", true), false);
  EXPECT_EQ(ps->process().Stop(SIGTERM), 0);
}

// psbench run gives the flags to its PS and worker: mutual TLS with one certificate.
TEST_F(TlsTest, PsbenchRunForwardsTheTlsFlags) {
  TempDir tmp;
  const std::string json = tmp.File("r.jsonl");
  RunResult r = RunCommand(
      RunArgv(Concat(Concat(certs().ServerFlags(), TrustCa()),
                     {"--benchmark=throughput", "--num-ps=2", "--num-workers=2", "--sizes=1K:1K",
                      "--iterations=20", "--warmup-iterations=2", "--validate", "--json=" + json})),
      seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("tls on"), std::string::npos) << r.Describe();
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 3u);  // two workers and the total
  for (const Json& rec : records) EXPECT_EQ(rec.value("tls", false), true) << rec.dump();
}

TEST_F(TlsTest, MutualTlsAdmitsOnlyWorkersWithACertificate) {
  auto ps = PsServer::Start(Concat(certs().ServerFlags(), TrustCa()));
  ASSERT_TRUE(ps);
  RunResult good = RunCommand(
      WorkerArgv(ps->address(), Concat(Concat(kSmall, TrustCa()),
                                       Concat(certs().ClientCertFlags(), {"--benchmark=latency"}))),
      seconds(60));
  EXPECT_EQ(good.exit_code, 0) << good.Describe();
  RunResult bare = RunCommand(
      WorkerArgv(ps->address(),
                 Concat(Concat(kSmall, TrustCa()), {"--benchmark=latency", "--connect-timeout=3s"})),
      seconds(30));
  ExpectRefused(bare, ps->address(), {"TLS", "client certificate"});
  EXPECT_LT(bare.seconds, 15) << "fails within its connect timeout";
  EXPECT_TRUE(ps->process().Running()) << "the PS keeps serving";
  EXPECT_EQ(ps->process().Stop(SIGTERM), 0);
}

TEST_F(TlsTest, WorkerTrustingAnotherCaFailsClearly) {
  auto ps = PsServer::Start(certs().ServerFlags());
  ASSERT_TRUE(ps);
  RunResult r = RunCommand(
      WorkerArgv(ps->address(), Concat(kSmall, {"--benchmark=latency", "--connect-timeout=3s",
                                                "--tls-ca=" + certs().other_ca()})),
      seconds(30));
  ExpectRefused(r, ps->address(), {"TLS", "certificate"});
  EXPECT_LT(r.seconds, 15) << "fails within its connect timeout";
  EXPECT_EQ(ps->process().Stop(SIGTERM), 0);
}

TEST_F(TlsTest, PlaintextWorkerAgainstATlsPsFailsClearly) {
  auto ps = PsServer::Start(certs().ServerFlags());
  ASSERT_TRUE(ps);
  RunResult r = RunCommand(
      WorkerArgv(ps->address(), Concat(kSmall, {"--benchmark=latency", "--connect-timeout=3s"})),
      seconds(30));
  ExpectRefused(r, ps->address(), {"TLS", "--tls-ca"});
  EXPECT_LT(r.seconds, 15) << "fails within its connect timeout, no hang";
  EXPECT_EQ(ps->process().Stop(SIGTERM), 0);
}

// --- bad --tls-* flags: exit 2, one line ----------------------------------------------------

void ExpectUsageError(const RunResult& r, const std::string& program,
                      const std::vector<std::string>& keywords) {
  ExpectOneLineFailure(r, 2, program, keywords);
}

TEST_F(TlsTest, BadTlsFlagsExitTwoWithOneLine) {
  ClosedPort nobody;  // where a worker would go if it wrongly accepted its flags
  const std::string missing = certs().Path("missing.pem");
  const std::string garbage = certs().dir().Write("garbage.pem", "not a certificate\n");
  const std::string cert = certs().Path("server.pem"), key = certs().Path("server.key");
  const std::string client_key = certs().Path("client.key");
  const Argv worker = {"--benchmark=latency", "--iterations=1", "--connect-timeout=1s"};
  auto ps = [](const Argv& flags) { return RunCommand(PsArgv(flags), seconds(20)); };
  auto work = [&](const Argv& flags) {
    return RunCommand(WorkerArgv(nobody.address(), Concat(worker, flags)), seconds(20));
  };
  auto run = [](const Argv& flags) {
    return RunCommand(RunArgv(Concat({"--benchmark=latency", "--iterations=1"}, flags)), seconds(20));
  };
  ExpectUsageError(ps({"--tls-cert=" + missing, "--tls-key=" + key}), "psbench-ps",
                   {"--tls-cert=" + missing, "No such file"});
  ExpectUsageError(ps({"--tls-cert=" + cert}), "psbench-ps", {"--tls-cert", "--tls-key"});
  ExpectUsageError(ps({"--tls-key=" + key}), "psbench-ps", {"--tls-cert", "--tls-key"});
  ExpectUsageError(ps({"--tls-cert=" + garbage, "--tls-key=" + key}), "psbench-ps",
                   {"--tls-cert=" + garbage, "not a PEM certificate"});
  ExpectUsageError(ps({"--tls-cert=" + cert, "--tls-key=" + garbage}), "psbench-ps",
                   {"--tls-key=" + garbage, "private key"});
  ExpectUsageError(ps({"--tls-cert=" + cert, "--tls-key=" + client_key}), "psbench-ps",
                   {"--tls-key=" + client_key, "is not the key of"});
  ExpectUsageError(ps({"--tls-ca=" + certs().ca()}), "psbench-ps", {"--tls-ca", "--tls-cert"});
  ExpectUsageError(work({"--tls-ca=" + missing}), "psbench-worker", {"--tls-ca=" + missing});
  ExpectUsageError(work({"--tls-ca=" + garbage}), "psbench-worker",
                   {"--tls-ca=" + garbage, "not a PEM certificate"});
  ExpectUsageError(work({"--tls-cert=" + certs().Path("client.pem")}), "psbench-worker",
                   {"--tls-key"});
  ExpectUsageError(run({"--tls-cert=" + garbage, "--tls-key=" + key, "--tls-ca=" + certs().ca()}), "psbench",
                   {"--tls-cert=" + garbage});
  // What every worker's handshake would find after --connect-timeout, said at once.
  ExpectUsageError(run({"--tls-cert=" + cert, "--tls-key=" + key}), "psbench", {"--tls-cert needs --tls-ca"});
  ExpectUsageError(run({"--tls-cert=" + cert, "--tls-key=" + key, "--tls-ca=" + certs().other_ca()}), "psbench",
                   {"--tls-cert=" + cert, "does not verify against --tls-ca=" + certs().other_ca()});
  const std::string client_cert = certs().Path("client.pem");
  ExpectUsageError(run({"--tls-cert=" + client_cert, "--tls-key=" + client_key, "--tls-ca=" + certs().ca()}), "psbench",
                   {"--tls-cert=" + client_cert, "does not name 127.0.0.1"});
  ExpectUsageError(run({"--tls-cert=" + cert, "--tls-key=" + key, "--tls-ca=" + certs().ca(), "--tls-server-name=ps0.example"}),
                   "psbench", {"does not name ps0.example"});
  // A key OpenSSL would ask a pass phrase for: refused without a prompt (it printed two).
  const std::string locked = certs().Path("locked.key");
  ASSERT_TRUE(certs().Openssl({"openssl", "pkey", "-in", key, "-aes256", "-passout", "pass:secret", "-out", locked}));
  ExpectUsageError(ps({"--tls-cert=" + cert, "--tls-key=" + locked}), "psbench-ps",
                   {"--tls-key=" + locked, "not an unencrypted PEM private key"});
  // A key gRPC's OpenSSL refuses (under 2048 bits): said so, not "cannot listen".
  const std::string weak = certs().Path("weak.pem"), weak_key = certs().Path("weak.key");
  ASSERT_TRUE(certs().Openssl({"openssl", "req", "-x509", "-newkey", "rsa:1024", "-nodes", "-keyout", weak_key, "-out",
                               weak, "-days", "2", "-subj", "/CN=weak", "-addext", "subjectAltName=IP:127.0.0.1"}));
  ExpectUsageError(ps({"--tls-cert=" + weak, "--tls-key=" + weak_key}), "psbench-ps",
                   {"--tls-cert=" + weak, "OpenSSL refuses them for TLS here"});
  ExpectUsageError(ps({"--max-message-size=1"}), "psbench-ps", {"--max-message-size"});
  ExpectUsageError(ps({"--max-connections=0"}), "psbench-ps", {"--max-connections"});
}

// --- limits -----------------------------------------------------------------------------------

// The worker learns the PS's limit when it connects: a payload the PS would refuse is bad
// input, said before anything is sent (the PS's own refusal is the conformance suite's
// OversizedMessage case and psbench_hostile_client's), and the PS serves the next worker.
TEST_F(TlsTest, OversizedPayloadIsBadInputAndThePsServesTheNext) {
  auto ps = PsServer::Start({"--max-message-size=64K"});
  ASSERT_TRUE(ps);
  for (const std::string mode : {"non-serialized", "serialized"}) {
    RunResult big = RunCommand(
        WorkerArgv(ps->address(), {"--benchmark=bandwidth", "--sizes=1M:1M", "--iterations=4",
                                   "--warmup-iterations=0", "--mode=" + mode}),
        seconds(60));
    ExpectOneLineFailure(big, 2, "psbench-worker", {ps->address(), "--max-message-size=64KiB"});
    // At the limit the framing tips it over: found before the sweep's first size is measured.
    RunResult edge = RunCommand(
        WorkerArgv(ps->address(), {"--benchmark=latency", "--sizes=16K:64K", "--iterations=4",
                                   "--warmup-iterations=0", "--mode=" + mode}),
        seconds(60));
    ExpectOneLineFailure(edge, 2, "psbench-worker", {"a 64KiB payload makes a ", "--max-message-size=64KiB"});
    EXPECT_EQ(edge.out.find("16384"), std::string::npos) << "nothing measured\n" << edge.Describe();
    RunResult small = RunCommand(
        WorkerArgv(ps->address(), {"--benchmark=latency", "--sizes=1K:32K", "--iterations=10",
                                   "--warmup-iterations=1", "--mode=" + mode, "--validate"}),
        seconds(60));
    EXPECT_EQ(small.exit_code, 0) << "the PS serves the next worker\n" << small.Describe();
  }
  EXPECT_EQ(ps->process().Stop(SIGTERM), 0);
}

TEST_F(TlsTest, ConnectionLimitRefusesTheExtraWorkerAndFreesItsPlace) {
  auto ps = PsServer::Start({"--max-connections=1"});
  ASSERT_TRUE(ps);
  // The first worker holds the only place for a while.
  auto start_first = [&] {
    return std::make_unique<Process>(WorkerArgv(
        ps->address(), {"--benchmark=latency", "--sizes=1K:1K", "--warmup=0s", "--duration=60s", "--quiet"}));
  };
  std::unique_ptr<Process> first = start_first();
  // Until the first has its place a second one gets in (and while that one runs, the first
  // may be the one refused: then it starts again); keep trying until the extra is refused
  // with the first in place.
  RunResult extra;
  auto deadline = Clock::now() + seconds(30);
  do {
    if (!first->Running()) first = start_first();
    extra = RunCommand(WorkerArgv(ps->address(), {"--benchmark=latency", "--sizes=1K:1K",
                                                  "--iterations=2", "--warmup-iterations=0",
                                                  "--connect-timeout=5s"}),
                       seconds(30));
  } while ((extra.exit_code == 0 || !first->Running()) && Clock::now() < deadline);
  ExpectRefused(extra, ps->address(), {"--max-connections=1"});
  ASSERT_TRUE(first->Running()) << first->Stderr();
  // A worker that dies frees its place.
  first->Signal(SIGKILL);
  first->Wait(seconds(10));
  RunResult next;
  deadline = Clock::now() + seconds(15);
  do {
    next = RunCommand(WorkerArgv(ps->address(), {"--benchmark=latency", "--sizes=1K:1K",
                                                 "--iterations=2", "--warmup-iterations=0"}),
                      seconds(30));
  } while (next.exit_code != 0 && Clock::now() < deadline);
  EXPECT_EQ(next.exit_code, 0) << next.Describe();
  EXPECT_EQ(ps->process().Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace psbench::testing
