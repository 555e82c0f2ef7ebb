// psbench under a real Slurm: each test starts a one-node cluster of its own
// (tests/slurm/slurm_cluster.sh: munged, slurmctld, slurmd, all state in the test's temp dir)
// and stops it after, then checks that no process of it is left. Covered: the cluster itself
// (srun), `psbench slurm` inside an allocation, the sbatch script, --ps-interface, and the
// refusals outside an allocation. The fixture is a child subreaper (IntegrationTest): daemons,
// slurmstepd and job tasks all come back to it, so anything left fails the test.
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

#include "tests/integration/run_helpers.h"

extern char** environ;

namespace psbench::testing {
namespace {

namespace fs = std::filesystem;

const std::string kClusterScript = SourcePath("tests/slurm/slurm_cluster.sh");
const std::string kSbatchScript = SourcePath("deploy/slurm/psbench.sbatch");

// A program on PATH, as a path (Process execs argv[0] as given).
std::string Which(const std::string& name) {
  const char* path = getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t at = 0; at <= dirs.size();) {
    size_t end = dirs.find(':', at);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = dirs.substr(at, end - at) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    at = end + 1;
  }
  return "/usr/bin/" + name;
}

std::string ShortHostname() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  std::string host = name;
  return host.substr(0, host.find('.'));
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Every SLURM_* variable of this process's environment: a test run inside a real Slurm job
// must not hand that job's id or nodes to the test cluster's commands.
void UnsetSlurmEnvironment() {
  std::vector<std::string> names;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    if (entry.rfind("SLURM_", 0) == 0) names.push_back(entry.substr(0, entry.find('=')));
  }
  for (const auto& name : names) unsetenv(name.c_str());
}

// A cluster of the script's in `dir` (created here), with a watchdog on this process.
RunResult StartCluster(const std::string& dir) {
  fs::create_directories(dir);
  return RunCommand({kClusterScript, "start", dir, std::to_string(getpid())}, seconds(60));
}
RunResult StopCluster(const std::string& dir) {
  return RunCommand({kClusterScript, "stop", dir}, seconds(60));
}
// Exit 0 when no process of the cluster in `dir` is left; else 1 and a list of them.
RunResult ClusterProcesses(const std::string& dir) {
  return RunCommand({kClusterScript, "procs", dir}, seconds(30));
}

// The pids `procs` lists ("  pid N (comm): cmdline").
std::vector<pid_t> ListedPids(const std::string& procs_output) {
  std::vector<pid_t> pids;
  static const std::regex kPid(R"(^\s*pid (\d+) )");
  for (const auto& line : Lines(procs_output)) {
    std::smatch m;
    if (std::regex_search(line, m, kPid)) pids.push_back(std::stoi(m[1]));
  }
  return pids;
}

// No cluster: SLURM_* cleared, so commands behave as outside any allocation.
class SlurmNoClusterTest : public IntegrationTest {
 protected:
  void SetUp() override {
    IntegrationTest::SetUp();
    UnsetSlurmEnvironment();
  }
};

// A running cluster (SLURM_CONF points at it) and PSBENCH_BIN_DIR naming this build's binaries.
class SlurmTest : public IntegrationTest {
 protected:
  void SetUp() override {
    IntegrationTest::SetUp();
    UnsetSlurmEnvironment();
    cluster_ = tmp_.File("cluster");
    RunResult start = StartCluster(cluster_);
    ASSERT_EQ(start.exit_code, 0) << start.Describe();
    setenv("SLURM_CONF", (cluster_ + "/slurm.conf").c_str(), 1);
    setenv("PSBENCH_BIN_DIR", PSBENCH_BIN_DIR, 1);
  }

  void TearDown() override {
    RunResult stop = StopCluster(cluster_);
    EXPECT_EQ(stop.exit_code, 0) << stop.Describe();
    RunResult left = ClusterProcesses(cluster_);
    EXPECT_EQ(left.exit_code, 0) << "processes of the test cluster left running:\n" << left.out;
    unsetenv("SLURM_CONF");
    unsetenv("PSBENCH_BIN_DIR");
    IntegrationTest::TearDown();
  }

  // Where a failed job's daemons said why.
  std::string ClusterLogs() const {
    std::string logs;
    for (const char* log : {"log/slurmctld.log", "log/slurmd.log"}) {
      logs += std::string("--- ") + log + " (tail) ---\n";
      auto lines = Lines(ReadFile(cluster_ + "/" + log));
      for (size_t i = lines.size() > 30 ? lines.size() - 30 : 0; i < lines.size(); ++i) {
        logs += lines[i] + "\n";
      }
    }
    return logs;
  }

  TempDir tmp_;
  std::string cluster_;
};

// The scenario every psbench job here runs: short, by count.
const Argv kThroughput = {"--num-ps=1", "--benchmark=throughput", "--warmup-iterations=1",
                          "--iterations=20", "--connect-timeout=20s"};

// `psbench slurm` inside `salloc -n 3`.
Argv SallocPsbench(const Argv& flags) {
  return Concat({Which("salloc"), "--quiet", "-n", "3", "--time=5", BinPath("psbench"), "slurm"},
                flags);
}

// The JSON Lines of a 1 PS x 2 worker throughput run: one record per worker and the total.
void ExpectOnePsTwoWorkers(const std::vector<Json>& records, const std::string& context) {
  ASSERT_EQ(records.size(), 3u) << context;
  std::set<int> workers;
  for (const Json& r : records) {
    EXPECT_EQ(r["benchmark"], "throughput") << r.dump();
    EXPECT_EQ(r["transport"], "grpc") << r.dump();
    EXPECT_EQ(r["ps"], 1) << r.dump();
    EXPECT_EQ(r["workers"], 2) << r.dump();
    ASSERT_EQ(r["placement"]["ps"].size(), 1u) << r.dump();
    if (r["scope"] == "worker") {
      workers.insert(r["worker_index"].get<int>());
      EXPECT_EQ(r["iterations"], 20) << r.dump();
      EXPECT_GT(r["rpc_per_s"].get<double>(), 0) << r.dump();
    }
  }
  EXPECT_EQ(workers, (std::set<int>{0, 1})) << context;
  EXPECT_EQ(records.back()["scope"], "total") << context;
  EXPECT_EQ(records.back()["iterations"], 40) << context;
}

// The throughput table: its header and the total row.
void ExpectThroughputTable(const std::string& out, const std::string& context) {
  EXPECT_TRUE(Contains(out, "RPC/s")) << context;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"((^|\n) *total +\d+ +40 )"))) << context;
}

// --- the cluster -----------------------------------------------------------------------------

TEST_F(SlurmTest, ClusterRunsThreeTasks) {
  RunResult r = RunCommand({Which("srun"), "-n", "3", "hostname", "-s"}, seconds(30));
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << ClusterLogs();
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.Describe();
  for (const auto& line : lines) EXPECT_EQ(line, ShortHostname());
}

// A crashed earlier run leaves daemons running or killed mid-way, with its state on disk; a
// new cluster (own directory, ports, munge socket) works beside them, and so does the fixture's.
TEST_F(SlurmTest, CrashedClustersDoNotBreakTheNext) {
  const std::string alive = tmp_.File("left-running"), killed = tmp_.File("killed");
  RunResult a = StartCluster(alive);
  ASSERT_EQ(a.exit_code, 0) << a.Describe();
  RunResult k = StartCluster(killed);
  ASSERT_EQ(k.exit_code, 0) << k.Describe();
  for (pid_t pid : ListedPids(ClusterProcesses(killed).out)) kill(pid, SIGKILL);

  const std::string next = tmp_.File("next");
  RunResult n = StartCluster(next);
  EXPECT_EQ(n.exit_code, 0) << n.Describe();
  for (const auto& dir : {next, cluster_}) {
    setenv("SLURM_CONF", (dir + "/slurm.conf").c_str(), 1);
    RunResult r = RunCommand({Which("srun"), "-n", "3", "true"}, seconds(30));
    EXPECT_EQ(r.exit_code, 0) << dir << "\n" << r.Describe();
  }
  setenv("SLURM_CONF", (cluster_ + "/slurm.conf").c_str(), 1);
  for (const auto& dir : {alive, killed, next}) {
    RunResult stop = StopCluster(dir);
    EXPECT_EQ(stop.exit_code, 0) << stop.Describe();
    EXPECT_EQ(ClusterProcesses(dir).exit_code, 0) << dir;
  }
}

// --- psbench slurm ---------------------------------------------------------------------------

TEST_F(SlurmTest, OnePsTwoWorkersInAnAllocation) {
  const std::string json = tmp_.File("r.jsonl");
  RunResult r = RunCommand(SallocPsbench(Concat(kThroughput, {"--json=" + json})), seconds(90));
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << ClusterLogs();
  ExpectOnePsTwoWorkers(ReadJsonLines(json), r.Describe());
  ExpectThroughputTable(r.out, r.Describe());
  // The PS step ends as told (the end of its stdin), not cancelled: srun has no error to
  // print after a run that went well.
  for (const char* cancelled : {"srun: error", "forcing job termination", "Job step aborted", "CANCELLED", "Killed"}) {
    EXPECT_FALSE(Contains(r.err, cancelled)) << r.Describe();
  }
}

// srun forwards a task's stderr labelled as its stdout is. Workers here write each long
// record in two parts with a stderr line between them (srun sends the first 1024 bytes and
// holds the rest for its newline): every record still comes as written, and the stderr line
// is passed on as the worker's.
TEST_F(SlurmTest, AStderrLineInsideARecordDoesNotBreakIt) {
  const std::string bin = tmp_.File("bin");
  fs::create_directories(bin);
  fs::create_symlink(BinPath("psbench-ps"), bin + "/psbench-ps");
  const std::string worker = bin + "/psbench-worker";
  {
    std::ofstream script(worker);
    script << "#!/bin/bash\nset -o pipefail\n'" << BinPath("psbench-worker") << "' \"$@\" | python3 -c '\n"
           << "import sys, time\n"
           << "for line in sys.stdin:\n"
           << "    if line.startswith(\"{\") and len(line) > 1100:\n"
           << "        sys.stdout.write(line[:1100]); sys.stdout.flush(); time.sleep(0.3)\n"
           << "        sys.stderr.write(\"a warning between the chunks\\n\"); sys.stderr.flush(); time.sleep(0.3)\n"
           << "        line = line[1100:]\n"
           << "    sys.stdout.write(line); sys.stdout.flush()\n"
           << "'\n";
  }
  fs::permissions(worker, fs::perms::owner_all);
  const std::string json = tmp_.File("r.jsonl");
  RunResult r = RunCommand(SallocPsbench(Concat(kThroughput, {"--remote-bin-dir=" + bin, "--json=" + json})),
                           seconds(90));
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << ClusterLogs();
  std::vector<Json> records = ReadJsonLines(json);
  ExpectOnePsTwoWorkers(records, r.Describe());
  // Merged into one stream, the line had landed inside a record, and in a key of it: a record
  // that still parsed ("busy_a warning between the chunkspoll").
  for (const Json& rec : records) {
    EXPECT_FALSE(Contains(rec.dump(), "a warning")) << rec.dump();
    EXPECT_TRUE(rec["config"].contains("busy_poll")) << rec.dump();
  }
  EXPECT_TRUE(Contains(r.err, "worker 0: a warning between the chunks")) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "worker 1: a warning between the chunks")) << r.Describe();
}

TEST_F(SlurmTest, PsInterfaceLoListensOnLoopback) {
  const std::string json = tmp_.File("r.jsonl");
  RunResult r = RunCommand(
      SallocPsbench(Concat(kThroughput, {"--ps-interface=lo", "--json=" + json})), seconds(90));
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << ClusterLogs();
  std::vector<Json> records = ReadJsonLines(json);
  ExpectOnePsTwoWorkers(records, r.Describe());
  for (const Json& rec : records) {
    for (const Json& ps : rec["placement"]["ps"]) {
      EXPECT_EQ(ps["address"].get<std::string>().rfind("127.0.0.1:", 0), 0u) << ps.dump();
    }
  }
  EXPECT_TRUE(Contains(r.out + r.err, "listening on 127.0.0.1:")) << r.Describe();
}

// grpc+mpi: one srun step (--multi-prog, PMIx) makes the PS and workers one MPI job.
TEST_F(SlurmTest, GrpcMpiIsOneSrunStep) {
  const std::string json = tmp_.File("r.jsonl");
  RunResult r = RunCommand(
      SallocPsbench(Concat(kThroughput, {"--transport=grpc+mpi", "--json=" + json})), seconds(90));
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << ClusterLogs();
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 3u) << r.Describe();
  EXPECT_EQ(ExpectAllMovedOver(records, "grpc+mpi"), 2u);
  for (const Json& rec : records) {
    EXPECT_EQ(rec["transport"], "grpc+mpi");
    EXPECT_EQ(rec["cluster"]["launcher"], "slurm");
  }
  EXPECT_EQ(records[2]["scope"], "total");
}

// --- parity with psbench run ---------------------------------------------------------------

// `psbench slurm` inside `salloc -n N`.
Argv SallocPsbenchN(int tasks, const Argv& flags) {
  return Concat({Which("salloc"), "--quiet", "-n", std::to_string(tasks), "--time=5", BinPath("psbench"), "slurm"},
                flags);
}

TEST_F(SlurmTest, LatencyIsPointToPoint) {
  const std::string json = tmp_.File("r.jsonl");
  RunResult r = RunCommand(SallocPsbenchN(2, {"--benchmark=latency", "--warmup-iterations=1", "--iterations=20",
                                              "--connect-timeout=20s", "--json=" + json}),
                           seconds(90));
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << ClusterLogs();
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 1u) << r.Describe();
  EXPECT_EQ(records[0]["benchmark"], "latency");
  EXPECT_EQ(records[0]["cluster"]["launcher"], "slurm");
}

// grpc as two srun steps (PS, workers), grpc+mpi as one (one MPI job), in one table.
TEST_F(SlurmTest, TransportsComparesGrpcWithGrpcMpi) {
#ifndef PSBENCH_MPIEXEC
  GTEST_SKIP() << "psbench was built without MPI";
#else
  const std::string json = tmp_.File("r.jsonl");
  RunResult r = RunCommand(SallocPsbenchN(3, Concat(kThroughput, {"--transports=grpc,grpc+mpi", "--json=" + json})),
                           seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << ClusterLogs();
  EXPECT_TRUE(Contains(r.out, "grpc+mpi / grpc")) << r.Describe();
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 7u) << "3 per transport, then the comparison\n" << r.Describe();
  EXPECT_EQ(records[0]["transport"], "grpc");
  EXPECT_EQ(records[3]["transport"], "grpc+mpi");
  EXPECT_EQ(records[6]["kind"], "comparison");
  for (int i : {0, 1}) ExpectMovedOver(records[i], "grpc");
  for (int i : {3, 4}) ExpectMovedOver(records[i], "grpc+mpi");
#endif
}

// Through srun steps, as psbench run: an open-loop load (every planned operation sent and
// counted) and a captured step replayed as timed (every parameter exact).
TEST_F(SlurmTest, OpenLoopLoadAndTimedReplay) {
  const std::string open = tmp_.File("open.jsonl"), timed = tmp_.File("timed.jsonl");
  RunResult r = RunCommand(SallocPsbenchN(2, {"--benchmark=latency", "--sizes=1K:1K", "--load=poisson:500",
                                              "--warmup-iterations=10", "--iterations=200", "--connect-timeout=20s",
                                              "--json=" + open}),
                           seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << ClusterLogs();
  std::vector<Json> records = ReadJsonLines(open);
  ASSERT_EQ(records.size(), 1u) << r.Describe();
  EXPECT_EQ(records[0]["load"]["completed"], 200) << r.Describe();
  EXPECT_EQ(records[0]["cluster"]["launcher"], "slurm");
  r = RunCommand(SallocPsbenchN(4, {"--benchmark=updates", "--scheme=trace", "--trace=" + WriteTimedTrace(tmp_),
                                    "--replay=timed", "--num-ps=2", "--steps=3", "--connect-timeout=20s",
                                    "--json=" + timed}),
                 seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << ClusterLogs();
  records = ReadJsonLines(timed);
  ASSERT_EQ(records.size(), 2u) << r.Describe();
  for (const Json& rec : records) {
    EXPECT_EQ(rec["result"], "exact") << rec.dump();
    EXPECT_EQ(rec["replay"]["mode"], "timed");
    EXPECT_EQ(rec["cluster"]["launcher"], "slurm");
  }
}

TEST_F(SlurmTest, UpdatesTwoWorkersTwoPsAreExact) {
  for (const char* mode : {"--sync", "--async"}) {
    SCOPED_TRACE(mode);
    const std::string json = tmp_.File(std::string(mode + 2) + ".jsonl");
    RunResult r = RunCommand(SallocPsbenchN(4, {"--benchmark=updates", mode, "--num-ps=2", "--steps=10",
                                                "--buffers=4", "--connect-timeout=20s", "--json=" + json}),
                             seconds(120));
    ASSERT_EQ(r.exit_code, 0) << r.Describe() << ClusterLogs();
    std::vector<Json> records = ReadJsonLines(json);
    ASSERT_EQ(records.size(), 2u) << r.Describe();
    for (const Json& rec : records) {
      EXPECT_EQ(rec["kind"], "updates") << rec.dump();
      EXPECT_EQ(rec["result"], "exact") << rec.dump();
      EXPECT_EQ(rec["cluster"]["launcher"], "slurm");
    }
  }
}

TEST_F(SlurmTest, TrainsAlexnetSyncAndAsync) {
#ifndef PSBENCH_HAVE_TRAINER
  GTEST_SKIP() << "psbench was built without the trainer";
#else
  for (const char* mode : {"--sync", "--async"}) {
    SCOPED_TRACE(mode);
    const std::string json = tmp_.File(std::string(mode + 2) + ".jsonl");
    RunResult r = RunCommand(SallocPsbenchN(3, {"--trainer=alexnet", mode, "--num-ps=1", "--batch=1", "--steps=2",
                                                "--warmup-steps=0", "--threads=1", "--connect-timeout=20s",
                                                "--json=" + json}),
                             seconds(240));
    ASSERT_EQ(r.exit_code, 0) << r.Describe() << ClusterLogs();
    std::vector<Json> records = ReadJsonLines(json);
    ASSERT_EQ(records.size(), 3u) << "2 workers and the total\n" << r.Describe();
    EXPECT_GT(records[0].value("images_per_s", 0.0), 0);
    EXPECT_GT(records[1].value("images_per_s", 0.0), 0);
    EXPECT_EQ(records[2]["kind"], "train_total");
    EXPECT_EQ(records[2]["sync"], std::string(mode) == "--sync");
  }
#endif
}

// A live psbench-worker of this test's cluster (its environment names our slurm.conf) whose
// command line holds `cmdline_has`; srun's tasks are not our descendants.
std::optional<pid_t> ClusterWorker(const std::string& slurm_conf, const std::string& cmdline_has) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    const std::string dir = entry.path().string();
    if (ReadFile(dir + "/comm") != "psbench-worker\n" || !Alive(pid)) continue;
    std::string cmdline = ReadFile(dir + "/cmdline"), environ = ReadFile(dir + "/environ");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    std::replace(environ.begin(), environ.end(), '\0', '\n');
    if (cmdline.find(cmdline_has) != std::string::npos &&
        ("\n" + environ).find("\nSLURM_CONF=" + slurm_conf + "\n") != std::string::npos) {
      return pid;
    }
  }
  return std::nullopt;
}

// A worker killed mid-run: srun keeps the other worker's task running, as every launcher
// does; psbench names the lost worker, exits 1 and keeps the survivor's record.
TEST_F(SlurmTest, KeepsTheSurvivorsRecordWhenAWorkerIsKilled) {
  const std::string json = tmp_.File("r.jsonl");
  Process run(SallocPsbench({"--num-ps=1", "--benchmark=throughput", "--warmup=0s", "--duration=6s",
                             "--sizes=4K:4K", "--connect-timeout=20s", "--json=" + json}));
  std::optional<pid_t> victim;
  for (auto deadline = Clock::now() + seconds(30); Clock::now() < deadline && !victim;) {
    victim = ClusterWorker(cluster_ + "/slurm.conf", "--worker-index=1 ");
    if (!victim) std::this_thread::sleep_for(milliseconds(100));
  }
  ASSERT_TRUE(victim) << run.Stderr() << ClusterLogs();
  std::this_thread::sleep_for(milliseconds(2500));  // mid-measurement
  ASSERT_TRUE(run.Running()) << run.Stderr();
  kill(*victim, SIGKILL);
  auto status = run.Wait(seconds(60));
  ASSERT_TRUE(status) << "psbench slurm still running 60 s later";
  EXPECT_EQ(*status, 1) << run.Stderr();
  std::vector<std::string> lines = Lines(run.Stderr());
  ASSERT_FALSE(lines.empty());
  EXPECT_TRUE(Contains(lines.back(), "worker 1 on ")) << run.Stderr();
  EXPECT_TRUE(Contains(lines.back(), "killed by SIGKILL")) << run.Stderr();
  EXPECT_TRUE(Contains(lines.back(), "1 of 2 workers finished")) << run.Stderr();
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 1u) << run.Stdout() << run.Stderr();
  EXPECT_EQ(records[0].value("scope", ""), "worker") << "no total";
  EXPECT_EQ(records[0].value("worker_index", -1), 0);
  EXPECT_EQ(records[0].value("peers_lost", -1), 1) << records[0].dump();
  EXPECT_GT(records[0].value("iterations", 0), 0);
  EXPECT_EQ(records[0]["cluster"].value("launcher", ""), "slurm");
}

TEST_F(SlurmTest, UnknownPsInterfaceFailsClearly) {
  RunResult r = RunCommand(SallocPsbench(Concat(kThroughput, {"--ps-interface=nosuch0"})),
                           seconds(90));
  EXPECT_FALSE(r.timed_out) << r.Describe();
  EXPECT_TRUE(r.exit_code == 1 || r.exit_code == 2) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "nosuch0")) << r.Describe();
}

// srun forwards a line longer than 1 KiB in labelled chunks: the PS's fatal line, here over
// 2 KiB for the name it could not resolve, still reaches the user whole, as one line.
TEST_F(SlurmTest, AFatalLineLongerThanSrunsChunksComesWhole) {
  const std::string name(2500, 'n');
  RunResult r = RunCommand(SallocPsbench(Concat(kThroughput, {"--ps-interface=" + name})), seconds(90));
  EXPECT_FALSE(r.timed_out) << r.Describe();
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  std::vector<std::string> lines = Lines(r.err);
  auto whole = std::find_if(lines.begin(), lines.end(), [&](const std::string& l) {
    return Contains(l, "--listen=" + name + " is not an address");
  });
  EXPECT_NE(whole, lines.end()) << r.Describe();
  for (const std::string& l : lines) EXPECT_FALSE(absl::StartsWith(l, "PS 0: nnn")) << "a chunk passed on alone";
}

TEST_F(SlurmNoClusterTest, OutsideAnAllocationSaysHowToSubmit) {
  RunResult r = RunCommand({BinPath("psbench"), "slurm", "--num-ps=1"}, seconds(30));
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  // The two ways in: the batch script (with sbatch) or salloc.
  EXPECT_TRUE(Contains(r.err, "deploy/slurm/psbench.sbatch")) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "sbatch ")) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "salloc")) << r.Describe();
}

// --- grpc+mpi: mpirun inside the allocation --------------------------------------------------

// Open MPI takes its slots from the allocation: 3 ranks on this 2-core machine without
// --oversubscribe only start because Slurm granted 3 tasks.
TEST_F(SlurmTest, GrpcMpiUnderMpirunInAnAllocation) {
#ifndef PSBENCH_MPIEXEC
  GTEST_SKIP() << "psbench was built without MPI";
#else
  RunResult r = RunCommand(
      {Which("salloc"), "--quiet", "-n", "3", "--time=5", PSBENCH_MPIEXEC, "--allow-run-as-root",
       "--bind-to", "none", "-np", "1", BinPath("psbench-ps"), "--transport=grpc+mpi",
       "--listen=lo", ":", "-np", "2", BinPath("psbench-worker"), "--transport=grpc+mpi",
       "--benchmark=throughput", "--warmup-iterations=1", "--iterations=20",
       "--connect-timeout=20s", "--quiet", "--json=" + tmp_.File("w%w.jsonl")},
      seconds(90));
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << ClusterLogs();
  for (int w = 0; w < 2; ++w) {
    std::vector<Json> records = ReadJsonLines(tmp_.File("w" + std::to_string(w) + ".jsonl"));
    ASSERT_EQ(records.size(), 1u) << r.Describe();
    EXPECT_EQ(records[0]["transport"], "grpc+mpi");
    ExpectMovedOver(records[0], "grpc+mpi");
    EXPECT_EQ(records[0]["worker_index"], w);
    EXPECT_EQ(records[0]["workers"], 2);
    EXPECT_EQ(records[0]["iterations"], 20);
  }
#endif
}

// --- the sbatch script -----------------------------------------------------------------------

TEST_F(SlurmTest, SbatchScriptRunsOnePsTwoWorkers) {
  // Run from the job's working directory: the relative --json lands there.
  RunResult r = RunCommand(
      Concat({Which("sbatch"), "--wait", "--ntasks=3", "--chdir=" + tmp_.path(),
              "--output=" + tmp_.File("job-%j.out"), kSbatchScript},
             Concat(kThroughput, {"--json=r.jsonl"})),
      seconds(90));
  std::string output;
  for (const auto& entry : fs::directory_iterator(tmp_.path())) {
    if (entry.path().filename().string().rfind("job-", 0) == 0) output += ReadFile(entry.path());
  }
  const std::string context = r.Describe() + "\n--- job output ---\n" + output;
  ASSERT_EQ(r.exit_code, 0) << context << ClusterLogs();
  EXPECT_TRUE(Contains(output, "psbench.sbatch: " + BinPath("psbench") + " slurm '--num-ps=1'"))
      << context;
  ExpectOnePsTwoWorkers(ReadJsonLines(tmp_.File("r.jsonl")), context);
  ExpectThroughputTable(output, context);
}

// sbatch runs a copy of the script from its spool directory: without PSBENCH_BIN_DIR the script
// still finds build/bin of the checkout it was submitted from (here a fake checkout whose
// psbench only echoes), by the path it was submitted as, relative to where sbatch ran.
TEST_F(SlurmTest, SbatchScriptFindsItsCheckoutsBinaries) {
  const std::string checkout = tmp_.File("checkout");
  fs::create_directories(checkout + "/deploy/slurm");
  fs::create_directories(checkout + "/build/bin");
  fs::create_directories(tmp_.File("elsewhere"));
  fs::copy_file(kSbatchScript, checkout + "/deploy/slurm/psbench.sbatch");
  const std::string fake = tmp_.Write("checkout/build/bin/psbench",
                                      "#!/bin/sh\necho \"fake psbench: $*\"\n");
  chmod(fake.c_str(), 0755);
  unsetenv("PSBENCH_BIN_DIR");
  RunResult r = RunCommand(
      {"/bin/sh", "-c",
       "cd " + tmp_.File("elsewhere") + " && exec " + Which("sbatch") +
           " --wait --ntasks=1 --output=job.out ../checkout/deploy/slurm/psbench.sbatch"
           " --num-ps=1 --label='two words'"},
      seconds(60));
  const std::string output = ReadFile(tmp_.File("elsewhere/job.out"));
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << "\n--- job output ---\n" << output;
  EXPECT_TRUE(Contains(output, "psbench.sbatch: " + fake + " slurm '--num-ps=1' '--label=two words'"))
      << output;
  EXPECT_TRUE(Contains(output, "fake psbench: slurm --num-ps=1 --label=two words")) << output;
}

TEST_F(SlurmNoClusterTest, SbatchScriptOutsideSlurmSaysHowToSubmit) {
  RunResult r = RunCommand({kSbatchScript, "--num-ps=1"}, seconds(30));
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "submit this script with sbatch")) << r.Describe();
}

}  // namespace
}  // namespace psbench::testing
