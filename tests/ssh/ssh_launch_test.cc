// `psbench ssh` against a real sshd on loopback (Sshd: keys made by the test): every PS and
// worker is started as `<ssh command> HOST <remote command>`, so these runs go through sshd's
// authentication, sessions and teardown exactly as on a cluster, only with one host.
// Registered in tests/CMakeLists.txt together with psbench ssh (deploy/cluster), label ssh:
//   psbench_test(NAME SOURCES ssh/NAME.cc ssh/sshd_fixture.cc [netns/netns_hosts.cc]
//                ${PSBENCH_INTEGRATION_HELPERS} LABELS ssh LINK nlohmann_json::nlohmann_json)
//   add_dependencies(NAME psbench-ps psbench-worker psbench)
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/integration/pty_run.h"
#include "tests/integration/run_helpers.h"
#include "tests/ssh/sshd_fixture.h"

namespace psbench::testing {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A short throughput run by count: 1 PS x 2 workers on three slots.
const Argv kThroughput = {"--num-ps=1", "--benchmark=throughput", "--validate",
                          "--warmup-iterations=1", "--iterations=20", "--connect-timeout=20s"};
const std::string kThreeSlots = "# three slots on one host, as $PBS_NODEFILE lists them\n"
                                "127.0.0.1\n127.0.0.1\n\n127.0.0.1\n";

class SshLaunchTest : public IntegrationTest {
 protected:
  void SetUp() override {
    IntegrationTest::SetUp();
    sshd_ = Sshd::Start();
    ASSERT_TRUE(sshd_);
    logins_at_start_ = AllLogins();  // the fixture's own readiness check logged in
  }

  void TearDown() override {
    if (sshd_) {
      EXPECT_TRUE(sshd_->Sessions().empty()) << "sshd sessions left when the test ended";
      sshd_->Stop();
    }
    IntegrationTest::TearDown();  // and nothing reparented to the test is left either
  }

  // psbench ssh with this sshd's client command and the binaries of this build.
  Argv PsbenchSsh(const std::string& hostfile, const Argv& flags, const std::string& ssh = "") {
    return Concat({BinPath("psbench"), "ssh", "--hostfile=" + hostfile,
                   "--ssh=" + (ssh.empty() ? sshd_->SshCommand() : ssh),
                   "--remote-bin-dir=" + std::string(PSBENCH_BIN_DIR)},
                  flags);
  }

  // How many sessions sshd accepted so far (-e: its log is its stderr).
  int Logins() const { return AllLogins() - logins_at_start_; }
  int AllLogins() const {
    const std::string log = sshd_->Log();
    int n = 0;
    for (size_t at = 0; (at = log.find("Accepted publickey", at)) != std::string::npos; ++at) ++n;
    return n;
  }

  std::unique_ptr<Sshd> sshd_;
  int logins_at_start_ = 0;
  TempDir tmp_;
};

TEST_F(SshLaunchTest, OnePsTwoWorkersOverSsh) {
  const std::string hostfile = tmp_.Write("hosts", kThreeSlots), json = tmp_.File("out.jsonl");
  RunResult r = RunCommand(PsbenchSsh(hostfile, Concat(kThroughput, {"--json=" + json})), seconds(90));
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << "\n--- sshd ---\n" << sshd_->Log();
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 3u) << "2 worker records + 1 total\n" << r.Describe();
  std::set<int> workers;
  for (const Json& rec : records) {
    SCOPED_TRACE(rec.dump().substr(0, 1500));
    EXPECT_EQ(rec.value("benchmark", ""), "throughput");
    EXPECT_EQ(rec.value("ps", 0), 1);
    EXPECT_EQ(rec.value("workers", 0), 2);
    EXPECT_EQ(rec.value("validate", false), true);
    if (rec.value("scope", "") == "worker") {
      workers.insert(rec.value("worker_index", -1));
      EXPECT_EQ(rec.value("iterations", 0), 20);
    }
  }
  EXPECT_EQ(workers, (std::set<int>{0, 1}));
  EXPECT_EQ(records.back().value("scope", ""), "total");
  EXPECT_EQ(records.back().value("iterations", 0), 40);
  // The table: its header and the total row.
  EXPECT_TRUE(Contains(r.out, "RPC/s")) << r.Describe();
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"((^|\n) *total +\d+ +40 )"))) << r.Describe();
  // Every process came through sshd: one PS and two workers (more if the launcher also probes).
  EXPECT_GE(Logins(), 3) << sshd_->Log();
}

// --- parity with psbench run: every kind of run through sshd ---------------------------------

std::string Slots(int n) {
  std::string text;
  for (int i = 0; i < n; ++i) text += "127.0.0.1\n";
  return text;
}

TEST_F(SshLaunchTest, LatencyAndBandwidthArePointToPoint) {
  const std::string hostfile = tmp_.Write("hosts", Slots(3));
  for (const char* benchmark : {"latency", "bandwidth"}) {
    SCOPED_TRACE(benchmark);
    const std::string json = tmp_.File(std::string(benchmark) + ".jsonl");
    // Three slots, no --num-workers: a point-to-point benchmark takes one PS and one worker.
    RunResult r = RunCommand(PsbenchSsh(hostfile, {std::string("--benchmark=") + benchmark, "--sizes=1K:4K",
                                                   "--warmup-iterations=1", "--iterations=20",
                                                   "--connect-timeout=20s", "--json=" + json}),
                             seconds(90));
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    std::vector<Json> records = ReadJsonLines(json);
    ASSERT_EQ(records.size(), 3u) << "1K, 2K, 4K\n" << r.Describe();
    for (const Json& rec : records) {
      EXPECT_EQ(rec.value("benchmark", ""), benchmark);
      EXPECT_EQ(rec.value("iterations", 0), 20);
      EXPECT_EQ(rec["cluster"].value("launcher", ""), "ssh");
    }
  }
}

TEST_F(SshLaunchTest, UpdatesTwoWorkersTwoPsAreExact) {
  const std::string hostfile = tmp_.Write("hosts", Slots(4));
  for (const char* mode : {"--sync", "--async"}) {
    SCOPED_TRACE(mode);
    const std::string json = tmp_.File(std::string(mode + 2) + ".jsonl");
    RunResult r = RunCommand(PsbenchSsh(hostfile, {"--benchmark=updates", mode, "--num-ps=2", "--steps=10",
                                                   "--buffers=4", "--connect-timeout=20s", "--json=" + json}),
                             seconds(90));
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    std::vector<Json> records = ReadJsonLines(json);
    ASSERT_EQ(records.size(), 2u) << r.Describe();
    for (const Json& rec : records) {
      EXPECT_EQ(rec.value("kind", ""), "updates") << rec.dump();
      EXPECT_EQ(rec.value("result", ""), "exact") << rec.dump();
      EXPECT_EQ(rec["placement"].size(), 2u) << rec.dump();
      EXPECT_EQ(rec["cluster"].value("launcher", ""), "ssh");
    }
  }
}

// Through the launch path, as psbench run: an open-loop load (every planned operation sent and
// counted) and a captured step replayed as timed (every parameter exact).
TEST_F(SshLaunchTest, OpenLoopLoadAndTimedReplay) {
  const std::string hostfile = tmp_.Write("hosts", Slots(4));
  const std::string open = tmp_.File("open.jsonl"), timed = tmp_.File("timed.jsonl");
  RunResult r = RunCommand(PsbenchSsh(hostfile, {"--benchmark=latency", "--sizes=1K:1K", "--load=poisson:500",
                                                 "--warmup-iterations=10", "--iterations=200",
                                                 "--connect-timeout=20s", "--json=" + open}),
                           seconds(90));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::vector<Json> records = ReadJsonLines(open);
  ASSERT_EQ(records.size(), 1u) << r.Describe();
  EXPECT_EQ(records[0]["load"]["completed"], 200) << r.Describe();
  EXPECT_EQ(records[0]["cluster"].value("launcher", ""), "ssh");
  r = RunCommand(PsbenchSsh(hostfile, {"--benchmark=updates", "--scheme=trace", "--trace=" + WriteTimedTrace(tmp_),
                                       "--replay=timed", "--num-ps=2", "--steps=3", "--connect-timeout=20s",
                                       "--json=" + timed}),
                 seconds(90));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  records = ReadJsonLines(timed);
  ASSERT_EQ(records.size(), 2u) << r.Describe();
  for (const Json& rec : records) {
    EXPECT_EQ(rec.value("result", ""), "exact") << rec.dump();
    EXPECT_EQ(rec["replay"]["mode"], "timed");
    EXPECT_EQ(rec["cluster"].value("launcher", ""), "ssh");
  }
}

TEST_F(SshLaunchTest, TransportsComparesTwoModes) {
  const std::string hostfile = tmp_.Write("hosts", Slots(2)), json = tmp_.File("r.jsonl");
  RunResult r = RunCommand(PsbenchSsh(hostfile, {"--benchmark=latency", "--transports=grpc/serialized,grpc",
                                                 "--warmup-iterations=1", "--iterations=20",
                                                 "--connect-timeout=20s", "--json=" + json}),
                           seconds(90));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "grpc/non-serialized / grpc/serialized")) << r.Describe();
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 3u) << "one run per entry, then the comparison\n" << r.Describe();
  EXPECT_EQ(records[0].value("mode", ""), "serialized");
  EXPECT_EQ(records[1].value("mode", ""), "non-serialized");
  EXPECT_EQ(records[2].value("kind", ""), "comparison");
  EXPECT_EQ(records[2]["ratios"]["p50_us"].size(), 2u) << records[2].dump();
}

// The status line on psbench ssh's terminal: the workers' progress comes back through their ssh
// sessions' stdout, mixed with their records, and is drawn and cleared as under psbench run.
TEST_F(SshLaunchTest, ProgressLineOnATerminal) {
  const std::string hostfile = tmp_.Write("hosts", Slots(2));
  PtyResult r = RunOnPty(PsbenchSsh(hostfile, {"--benchmark=latency", "--sizes=1:2", "--warmup=1s",
                                               "--duration=1s", "--connect-timeout=20s"}),
                         seconds(90));
  ASSERT_FALSE(r.timed_out) << r.out;
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Contains(r.out, "\rrun 1/1 latency sweep | payload 1/2 warm-up | ")) << r.out;
  EXPECT_TRUE(Contains(r.out, "\rrun 1/1 latency sweep | payload 2/2 measure | ")) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("elapsed, ~[0-9]+ s left \\| [0-9]+ op/s"))) << r.out;
  EXPECT_TRUE(Contains(r.out, std::string(kClear) + "# psbench latency")) << r.out;
  for (const std::string& line : VisibleLines(r.out)) EXPECT_FALSE(Contains(line, "elapsed")) << r.out;
  // Both sizes made it into the table: progress lines did not swallow a record.
  int rows = 0;
  for (const std::string& line : VisibleLines(r.out)) rows += line.find("           1 ") == 0 || line.find("           2 ") == 0;
  EXPECT_EQ(rows, 2) << r.out;
}

TEST_F(SshLaunchTest, TrainsAlexnetSyncAndAsync) {
#ifndef PSBENCH_HAVE_TRAINER
  GTEST_SKIP() << "psbench was built without the trainer";
#else
  const std::string hostfile = tmp_.Write("hosts", Slots(3));
  for (const char* mode : {"--sync", "--async"}) {
    SCOPED_TRACE(mode);
    const std::string json = tmp_.File(std::string(mode + 2) + ".jsonl");
    RunResult r = RunCommand(PsbenchSsh(hostfile, {"--trainer=alexnet", mode, "--num-ps=1", "--batch=1",
                                                   "--steps=2", "--warmup-steps=0", "--threads=1",
                                                   "--connect-timeout=20s", "--json=" + json}),
                             seconds(240));
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    std::vector<Json> records = ReadJsonLines(json);
    ASSERT_EQ(records.size(), 3u) << "2 workers and the total\n" << r.Describe();
    for (int w = 0; w < 2; ++w) {
      EXPECT_EQ(records[w].value("worker_index", -1), w);
      EXPECT_GT(records[w].value("images_per_s", 0.0), 0) << records[w].dump().substr(0, 800);
    }
    EXPECT_EQ(records[2].value("kind", ""), "train_total");
    EXPECT_EQ(records[2]["sync"], std::string(mode) == "--sync");
    EXPECT_EQ(records[2]["cluster"].value("launcher", ""), "ssh");
    EXPECT_TRUE(Contains(r.out, "images/s")) << r.Describe();
  }
#endif
}

TEST_F(SshLaunchTest, RefusingHostFailsNamingIt) {
  ClosedPort nobody;  // ssh to a port that refuses: the host is "down"
  std::string ssh = sshd_->SshCommand();
  ssh = std::regex_replace(ssh, std::regex(" -p \\d+ "), " -p " + std::to_string(nobody.port()) + " ");
  ASSERT_TRUE(Contains(ssh, std::to_string(nobody.port()))) << ssh;
  const std::string hostfile = tmp_.Write("hosts", kThreeSlots);
  RunResult r = RunCommand(PsbenchSsh(hostfile, kThroughput, ssh), seconds(60));
  EXPECT_FALSE(r.timed_out) << r.Describe();
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_LT(r.seconds, 30) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "127.0.0.1")) << "names the host\n" << r.Describe();
  // ssh's own failure is said as such, not as a signal.
  EXPECT_TRUE(Contains(r.err, "ssh's status 255")) << r.Describe();
  EXPECT_FALSE(Contains(r.err, "SIG")) << r.Describe();
}

// Bad input that a remote worker finds comes back in its own words, and exits 2.
TEST_F(SshLaunchTest, RemoteBadInputKeepsItsWordsAndExitTwo) {
  const std::string hostfile = tmp_.Write("hosts", kThreeSlots);
  // Only the worker finds this one: a PS would refuse to parse so many tiny buffers.
  RunResult r = RunCommand(PsbenchSsh(hostfile, {"--benchmark=latency", "--buffers=20000", "--categories=S",
                                                 "--small=1", "--mode=serialized", "--iterations=3",
                                                 "--warmup=0s"}),
                           seconds(60));
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  std::vector<std::string> lines = r.ErrLines();
  ASSERT_FALSE(lines.empty()) << r.Describe();
  EXPECT_TRUE(Contains(lines.back(), "exited with status 2: ")) << r.Describe();
  EXPECT_TRUE(Contains(lines.back(), "20000 buffers in a 60000-byte serialized message")) << r.Describe();
}

// A hostfile that cannot hold the run is a usage error, said before anything starts.
struct BadHostfile {
  std::string name;
  std::string content;             // written unless the case is "missing"
  Argv flags;                      // beside kThroughput
  std::vector<std::string> says;   // parts of the message
};

void PrintTo(const BadHostfile& b, std::ostream* os) { *os << b.name; }

class SshBadHostfileTest : public SshLaunchTest, public ::testing::WithParamInterface<BadHostfile> {};

TEST_P(SshBadHostfileTest, ExitsTwo) {
  const BadHostfile& bad = GetParam();
  std::string path = tmp_.File("hosts");
  if (bad.name != "missing") tmp_.Write("hosts", bad.content);
  RunResult r = RunCommand(PsbenchSsh(path, Concat(kThroughput, bad.flags)), seconds(30));
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_LT(r.seconds, 10) << r.Describe();
  ASSERT_EQ(r.ErrLines().size(), 1u) << "one line\n" << r.Describe();
  EXPECT_EQ(r.err.rfind("psbench: ", 0), 0u) << r.Describe();
  for (const std::string& part : bad.says) {
    EXPECT_TRUE(Contains(r.err, part)) << "says '" << part << "'\n" << r.Describe();
  }
  EXPECT_EQ(Logins(), 0) << "nothing was launched\n" << sshd_->Log();
}

INSTANTIATE_TEST_SUITE_P(
    Hostfiles, SshBadHostfileTest,
    ::testing::Values(
        BadHostfile{"missing", "", {}, {"--hostfile=", "hosts", "cannot open", "No such file"}},
        BadHostfile{"empty", "# only a comment\n\n", {}, {"--hostfile=", "no host"}},
        // 1 PS + 2 workers asked for, two slots given.
        BadHostfile{"two_slots_for_three", "127.0.0.1\n127.0.0.1\n", {"--num-workers=2"},
                    {"3 slots", "gives 2"}}),
    [](const auto& info) { return info.param.name; });

// psbench ssh killed mid-run (politely, then not): no remote PS or worker may outlive it, and
// sshd's sessions end.
class SshKilledTest : public SshLaunchTest, public ::testing::WithParamInterface<int> {};

TEST_P(SshKilledTest, LeavesNoRemoteProcess) {
  const int sig = GetParam();
  const std::string hostfile = tmp_.Write("hosts", kThreeSlots);
  Process run(PsbenchSsh(hostfile, {"--num-ps=1", "--benchmark=throughput", "--warmup=0s",
                                    "--duration=60s", "--connect-timeout=20s"}));
  // Wait until sshd runs the PS and both workers.
  std::vector<ProcInfo> remote;
  auto deadline = Clock::now() + seconds(40);
  while (Clock::now() < deadline) {
    remote.clear();
    for (const ProcInfo& p : sshd_->Sessions()) {
      if (p.comm == "psbench-ps" || p.comm == "psbench-worker") remote.push_back(p);
    }
    if (remote.size() == 3 || !run.Running()) break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_EQ(remote.size(), 3u) << "PS + 2 workers under sshd\n" << run.Stderr() << "\n--- sshd ---\n" << sshd_->Log();
  std::this_thread::sleep_for(milliseconds(500));  // mid-run
  ASSERT_TRUE(run.Running()) << run.Stderr();
  run.Signal(sig);
  ASSERT_TRUE(run.Wait(seconds(20))) << "psbench ssh still running 20 s after signal " << sig;
  // The remote side notices: sessions close and their processes end.
  deadline = Clock::now() + seconds(15);
  auto left = [&] {
    std::vector<pid_t> alive;
    for (const ProcInfo& p : remote) {
      if (Alive(p.pid)) alive.push_back(p.pid);
    }
    return alive;
  };
  while ((!left().empty() || !sshd_->Sessions().empty()) && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  for (pid_t pid : left()) {
    std::string cmd = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    ADD_FAILURE() << "remote process left 15 s after psbench ssh died: " << pid << " " << cmd;
  }
  for (const ProcInfo& p : sshd_->Sessions()) {
    ADD_FAILURE() << "sshd session left: " << p.pid << " (" << p.comm << ") " << p.cmdline;
  }
}

INSTANTIATE_TEST_SUITE_P(Signals, SshKilledTest, ::testing::Values(SIGTERM, SIGKILL),
                         [](const auto& info) { return info.param == SIGTERM ? "SIGTERM" : "SIGKILL"; });

}  // namespace
}  // namespace psbench::testing
