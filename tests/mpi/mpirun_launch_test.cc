// psbench mpirun: a host list launched with a real Open MPI mpirun, over grpc (a PS job, then
// a worker job, PS addresses passed between them) and grpc+mpi (one MPMD job).
#include <signal.h>

#include <fstream>
#include <optional>
#include <thread>
#include <string>

#include "absl/time/clock.h"
#include "cli/launch/launchers.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/pty_run.h"
#include "tests/integration/run_helpers.h"

namespace psbench::testing {
namespace {

using nlohmann::json;

class MpirunLaunchTest : public IntegrationTest, public ::testing::WithParamInterface<std::string> {
 protected:
  std::string HostFile(const std::string& text) {
    std::string path = tmp_.File("hosts");
    std::ofstream(path) << text;
    return path;
  }
  TempDir tmp_;
};

TEST_P(MpirunLaunchTest, OnePsTwoWorkersFromAHostFile) {
  std::string out = tmp_.File("r.jsonl");
  RunResult r = RunCommand(
      {BinPath("psbench"), "mpirun", "--hostfile=" + HostFile("localhost slots=3\n"),
       "--mpirun=" PSBENCH_MPIEXEC, "--transport=" + GetParam(), "--num-ps=1",
       "--benchmark=throughput", "--warmup-iterations=1", "--iterations=20", "--validate",
       "--connect-timeout=20s", "--ps-interface=lo", "--label=loopback", "--json=" + out},
      seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("total"), std::string::npos) << r.Describe();
  auto records = ReadJsonLines(out);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(ExpectAllMovedOver(records, GetParam()), 2u);
  for (int i = 0; i < 3; ++i) {
    const json& rec = records[i];
    EXPECT_EQ(rec["scope"], i < 2 ? "worker" : "total");
    EXPECT_EQ(rec["transport"], GetParam());
    EXPECT_EQ(rec["label"], "loopback");
    EXPECT_EQ(rec["cluster"]["launcher"], "mpirun");
    EXPECT_EQ(rec["iterations"], i < 2 ? 20 : 40);
    if (i < 2) {
      EXPECT_EQ(rec["worker_index"], i);
      // --ps-interface=lo: the PS listened on loopback's address and the worker dialed it.
      EXPECT_EQ(rec["placement"]["ps"][0]["address"].get<std::string>().rfind("127.0.0.1:", 0), 0u)
          << rec["placement"].dump();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, MpirunLaunchTest, ::testing::Values("grpc", "grpc+mpi"),
                         [](const auto& info) { return info.param == "grpc" ? std::string("grpc") : std::string("grpc_mpi"); });

// Parity with psbench run: a --transports comparison, each entry a fresh set of processes
// on the same slots (grpc: a PS job then a worker job; grpc+mpi: one job), and the updates
// check with 2 workers x 2 PS on each transport.
TEST_F(MpirunLaunchTest, TransportsComparesGrpcWithGrpcMpi) {
  std::string out = tmp_.File("r.jsonl");
  RunResult r = RunCommand(
      {BinPath("psbench"), "mpirun", "--hostfile=" + HostFile("localhost slots=2\n"),
       "--mpirun=" PSBENCH_MPIEXEC, "--benchmark=latency", "--transports=grpc,grpc+mpi",
       "--warmup-iterations=1", "--iterations=20", "--connect-timeout=20s", "--json=" + out},
      seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("grpc+mpi / grpc"), std::string::npos) << r.Describe();
  auto records = ReadJsonLines(out);
  ASSERT_EQ(records.size(), 3u) << r.Describe();
  EXPECT_EQ(records[0]["transport"], "grpc");
  EXPECT_EQ(records[1]["transport"], "grpc+mpi");
  ExpectMovedOver(records[0], "grpc");
  ExpectMovedOver(records[1], "grpc+mpi");
  EXPECT_EQ(records[2]["kind"], "comparison");
  for (int i = 0; i < 2; ++i) EXPECT_EQ(records[i]["cluster"]["launcher"], "mpirun");
}

TEST_P(MpirunLaunchTest, UpdatesTwoWorkersTwoPsAreExact) {
  std::string out = tmp_.File("r.jsonl");
  RunResult r = RunCommand(
      {BinPath("psbench"), "mpirun", "--hostfile=" + HostFile("localhost slots=4\n"),
       "--mpirun=" PSBENCH_MPIEXEC, "--transport=" + GetParam(), "--num-ps=2",
       "--benchmark=updates", "--async", "--steps=10", "--buffers=4", "--connect-timeout=20s",
       "--json=" + out},
      seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  auto records = ReadJsonLines(out);
  ASSERT_EQ(records.size(), 2u) << r.Describe();
  EXPECT_EQ(ExpectAllMovedOver(records, GetParam()), 2u);
  for (const json& rec : records) {
    EXPECT_EQ(rec["kind"], "updates") << rec.dump();
    EXPECT_EQ(rec["result"], "exact") << rec.dump();
    EXPECT_EQ(rec["transport"], GetParam());
  }
}

// The status line on a terminal under mpirun, over both transports: the ranks' progress lines
// come back tagged through mpirun's --tag-output, and are drawn and cleared as under psbench run.
TEST_P(MpirunLaunchTest, ProgressLineOnATerminal) {
  PtyResult r = RunOnPty({BinPath("psbench"), "mpirun", "--hostfile=" + HostFile("localhost slots=2\n"),
                          "--mpirun=" PSBENCH_MPIEXEC, "--transport=" + GetParam(), "--benchmark=latency",
                          "--sizes=1:2", "--warmup=1s", "--duration=1s", "--connect-timeout=20s"},
                         seconds(120));
  ASSERT_FALSE(r.timed_out) << r.out;
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\rrun 1/1 latency sweep | payload 2/2 measure | "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(std::string(kClear) + "# psbench latency"), std::string::npos) << r.out;
  int rows = 0;
  for (const std::string& line : VisibleLines(r.out)) {
    EXPECT_EQ(line.find("elapsed"), std::string::npos) << r.out;
    rows += line.find("           1 ") == 0 || line.find("           2 ") == 0;
  }
  EXPECT_EQ(rows, 2) << r.out;
}

// Every process under `root`, at any depth (mpirun's ranks run under a shell it started).
std::vector<ProcInfo> DescendantsOf(pid_t root) {
  std::vector<ProcInfo> out;
  std::vector<pid_t> frontier = {root};
  while (!frontier.empty()) {
    pid_t parent = frontier.back();
    frontier.pop_back();
    for (ProcInfo& p : ChildrenOf(parent)) {
      frontier.push_back(p.pid);
      out.push_back(std::move(p));
    }
  }
  return out;
}

// A worker killed mid-run: under mpirun too the other worker runs on (Open MPI would end the
// job, so each worker rank reports its own end); psbench names the lost worker, exits 1 and
// keeps the survivor's record.
TEST_F(MpirunLaunchTest, KeepsTheSurvivorsRecordWhenAWorkerIsKilled) {
  const std::string out = tmp_.File("r.jsonl");
  Process run({BinPath("psbench"), "mpirun", "--hostfile=" + HostFile("localhost slots=3\n"),
               "--mpirun=" PSBENCH_MPIEXEC, "--num-ps=1", "--benchmark=throughput", "--warmup=0s",
               "--duration=6s", "--sizes=4K:4K", "--connect-timeout=20s", "--json=" + out});
  std::optional<ProcInfo> victim;
  std::vector<ProcInfo> workers;
  for (auto deadline = Clock::now() + seconds(30); Clock::now() < deadline && workers.size() < 2;) {
    workers.clear();
    for (const ProcInfo& p : DescendantsOf(run.pid())) {
      if (p.comm == "psbench-worker" && p.state != 'Z' && p.cmdline.find("--scenario-base64=") != std::string::npos) {
        workers.push_back(p);
        if (p.cmdline.find("--worker-index=1 ") != std::string::npos) victim = p;
      }
    }
    if (workers.size() < 2) std::this_thread::sleep_for(milliseconds(100));
  }
  ASSERT_EQ(workers.size(), 2u) << run.Stderr();
  ASSERT_TRUE(victim);
  std::this_thread::sleep_for(milliseconds(2500));  // mid-measurement
  ASSERT_TRUE(run.Running()) << run.Stderr();
  kill(victim->pid, SIGKILL);
  auto status = run.Wait(seconds(60));
  ASSERT_TRUE(status) << "psbench mpirun still running 60 s later";
  EXPECT_EQ(*status, 1) << run.Stderr();
  std::vector<std::string> lines = Lines(run.Stderr());
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.back().find("worker 1 (MPI rank 1) killed by SIGKILL"), std::string::npos) << run.Stderr();
  EXPECT_NE(lines.back().find("1 of 2 workers finished"), std::string::npos) << run.Stderr();
  EXPECT_EQ(run.Stderr().find("psbench-rank-exit"), std::string::npos) << "the wrapper's report is read, not shown";
  for (const ProcInfo& w : workers) EXPECT_FALSE(Alive(w.pid)) << "worker " << w.pid << " left";
  std::vector<Json> records = ReadJsonLines(out);
  ASSERT_EQ(records.size(), 1u) << run.Stdout() << run.Stderr();
  EXPECT_EQ(records[0].value("scope", ""), "worker") << "no total";
  EXPECT_EQ(records[0].value("worker_index", -1), 0);
  EXPECT_EQ(records[0].value("peers_lost", -1), 1) << records[0].dump();
  EXPECT_GT(records[0].value("iterations", 0), 0);
  EXPECT_EQ(records[0]["cluster"].value("launcher", ""), "mpirun");
}

// A rank's last words come back through mpirun's tagged output, and its exit status through
// the rank wrapper, while the other rank runs to its end.
TEST_F(MpirunLaunchTest, KeepsARanksLastWords) {
  auto launcher = MakeMpirunLauncher({"localhost", "localhost"}, PSBENCH_MPIEXEC, {});
  ASSERT_TRUE(launcher.ok()) << launcher.status();
  auto group = (*launcher)->Start(
      "workers", {{"localhost", {"/bin/sh", "-c", "echo '#fatal 2 --x=1: bad input'; exit 2"}, "worker 0"},
                  {"localhost", {"/bin/sh", "-c", "sleep 1; echo fine"}, "worker 1"}});
  ASSERT_TRUE(group.ok()) << group.status();
  ProcessGroup& g = **group;
  std::vector<std::string> lines;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    auto line = g.ReadLine(deadline);
    ASSERT_TRUE(line.ok()) << line.status();
    if (!line->has_value()) break;
    if ((*line)->member >= 0) lines.push_back((*line)->text);
  }
  EXPECT_EQ(lines, std::vector<std::string>{"fine"});
  ASSERT_TRUE(g.FatalOf(0).has_value());
  EXPECT_EQ(g.FatalOf(0)->code, 2);
  EXPECT_EQ(g.FatalOf(0)->message, "--x=1: bad input");
  EXPECT_EQ(g.MemberStatus(0), 2);
  EXPECT_EQ(g.MemberStatus(1), 0);
  EXPECT_EQ(g.DescribeStatus(2), "exited with status 2");
}

TEST_F(MpirunLaunchTest, TooFewSlotsOrNoLauncherForMpiAreUsageErrors) {
  RunResult r = RunCommand({BinPath("psbench"), "mpirun", "--hostfile=" + HostFile("localhost\n"),
                            "--benchmark=throughput"},
                           seconds(30));
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_NE(r.err.find("no slot is left for a worker"), std::string::npos) << r.Describe();
  r = RunCommand({BinPath("psbench"), "ssh", "--hostfile=" + HostFile("localhost slots=2\n"),
                  "--transport=grpc+mpi", "--benchmark=latency"},
                 seconds(30));
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_NE(r.err.find("one MPI job"), std::string::npos) << r.Describe();
}

}  // namespace
}  // namespace psbench::testing
