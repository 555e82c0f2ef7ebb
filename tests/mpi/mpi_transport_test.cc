// grpc+mpi end to end under a real mpirun: every benchmark and scheme with --validate through
// `psbench run`, the cluster (MPMD) form run by hand, bad launches, corruption caught by
// --validate, ranks that die or stop answering, and a hostile client on the PS's control port
// (those last also carry the label faults; a rank that dies ends the whole MPI job, so unlike
// over grpc the other workers cannot go on). The fixture fails any test that leaves a
// process behind (it is a subreaper: ranks orphaned by mpirun come back to it).
#include <signal.h>

#include <filesystem>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"

namespace psbench::testing {
namespace {

const std::string kTrace = SourcePath("payloads/traces/alexnet.json");

// mpirun as root in CI needs --allow-run-as-root; more ranks than cores, --oversubscribe.
Argv Mpirun() {
  return {PSBENCH_MPIEXEC, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"};
}

// `mpirun ... -np P psbench-ps ARGS : -np W psbench-worker ARGS`: the documented MPMD form.
Argv MpmdArgv(int ps, const Argv& ps_flags, int workers, const Argv& worker_flags) {
  Argv argv = Mpirun();
  if (ps > 0) {
    argv = Concat(argv, {"-np", std::to_string(ps), BinPath("psbench-ps"), "--transport=grpc+mpi",
                         "--listen=127.0.0.1"});
    argv = Concat(argv, ps_flags);
  }
  if (workers > 0) {
    if (ps > 0) argv.push_back(":");
    argv = Concat(argv, {"-np", std::to_string(workers), BinPath("psbench-worker"),
                         "--transport=grpc+mpi", "--connect-timeout=20s"});
    argv = Concat(argv, worker_flags);
  }
  return argv;
}

std::string Find(const RunResult& r, const std::string& text) {
  return r.out.find(text) != std::string::npos || r.err.find(text) != std::string::npos
             ? text
             : "(not found) " + text;
}

class MpiTest : public IntegrationTest {};

// --- every benchmark and scheme, validated, through psbench run -------------------------------

class MpiRunTest : public MpiTest,
                   public ::testing::WithParamInterface<std::tuple<std::string, std::string>> {};

TEST_P(MpiRunTest, ValidatedRunUnderMpirun) {
  const auto& [benchmark, scheme] = GetParam();
  TempDir tmp;
  // A trace payload is a whole model's gradients (tens of MB): fewer of them.
  const int iterations = scheme == "trace" ? 6 : 30;
  Argv flags = {"--transport=grpc+mpi", "--benchmark=" + benchmark, "--scheme=" + scheme,
                "--validate", "--iterations=" + std::to_string(iterations),
                "--warmup-iterations=1", "--json=" + tmp.File("r.jsonl")};
  if (scheme == "trace") flags.push_back("--trace=" + kTrace);
  const bool throughput = benchmark == "throughput";
  if (throughput) flags = Concat(flags, {"--num-ps=2", "--num-workers=2"});
  RunResult r = RunCommand(RunArgv(flags), seconds(90));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::vector<Json> records = ReadJsonLines(tmp.File("r.jsonl"));
  // Throughput: one record per worker and their total.
  ASSERT_EQ(records.size(), throughput ? 3u : 1u) << r.Describe();
  EXPECT_EQ(ExpectAllMovedOver(records, "grpc+mpi"), throughput ? 2u : 1u);
  std::set<int> worker_indexes;
  for (const Json& rec : records) {
    EXPECT_EQ(rec["transport"], "grpc+mpi");
    EXPECT_EQ(rec["benchmark"], benchmark);
    EXPECT_EQ(rec["scheme"], scheme);
    EXPECT_EQ(rec["validate"], true);
    EXPECT_EQ(rec["ps"], throughput ? 2 : 1);
    const Json& ps = rec["placement"]["ps"];
    ASSERT_EQ(ps.size(), throughput ? 2u : 1u) << rec.dump();
    for (const Json& p : ps) {
      EXPECT_EQ(p["transport"], "grpc+mpi");
      EXPECT_NE(p["data_plane"].get<std::string>().find("MPI messages, rank "), std::string::npos)
          << p.dump();
    }
    if (rec["scope"] == "worker") {
      worker_indexes.insert(rec["worker_index"].get<int>());
      // Every PS gets --iterations operations from every worker.
      EXPECT_EQ(rec["iterations"], iterations * (throughput ? 2 : 1)) << rec.dump();
    }
  }
  EXPECT_EQ(worker_indexes.size(), throughput ? 2u : 1u);
  if (throughput) {
    EXPECT_EQ(records.back()["scope"], "total");
    EXPECT_EQ(records.back()["workers"], 2);
    EXPECT_EQ(records.back()["iterations"], iterations * 4);
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, MpiRunTest,
    ::testing::Combine(::testing::Values("latency", "bandwidth", "throughput"),
                       ::testing::Values("uniform", "random", "skew", "trace")),
    [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

TEST_F(MpiTest, SizeSweepFromBytesToMegabytes) {
  TempDir tmp;
  RunResult r = RunCommand(RunArgv({"--transport=grpc+mpi", "--benchmark=latency",
                                    "--sizes=1:4M", "--validate", "--iterations=10",
                                    "--warmup-iterations=1", "--json=" + tmp.File("r.jsonl")}),
                           seconds(90));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::vector<Json> records = ReadJsonLines(tmp.File("r.jsonl"));
  ASSERT_EQ(records.size(), 23u) << r.Describe();  // 1 B .. 4 MiB
  EXPECT_EQ(records.back()["payload_bytes"], 4u << 20);
}

// With a grpc-only option given (it applies to the grpc entry): the grpc+mpi entry runs
// without it, and only the grpc record carries it.
TEST_F(MpiTest, ComparedWithGrpc) {
  TempDir tmp;
  RunResult r = RunCommand(RunArgv({"--transports=grpc,grpc+mpi", "--benchmark=bandwidth",
                                    "--iterations=50", "--warmup-iterations=5",
                                    "--grpc-tx-zerocopy=16K", "--json=" + tmp.File("r.jsonl")}),
                           seconds(90));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("grpc+mpi / grpc"), std::string::npos) << r.Describe();
  int comparisons = 0;
  for (const Json& rec : ReadJsonLines(tmp.File("r.jsonl"))) {
    if (rec.value("kind", "") == "comparison") ++comparisons;
    if (rec.contains("config")) {
      EXPECT_EQ(rec["config"].contains("grpc_tx_zerocopy"), rec.value("transport", "") == "grpc") << rec.dump();
    }
  }
  EXPECT_EQ(comparisons, 1);
}

// Open-loop load over both, 2 workers x 2 PS: a table per transport, every planned operation
// sent and counted in each total.
TEST_F(MpiTest, OpenLoopLoadComparedWithGrpc) {
  TempDir tmp;
  RunResult r = RunCommand(RunArgv({"--transports=grpc,grpc+mpi", "--benchmark=throughput", "--num-ps=2",
                                    "--num-workers=2", "--load=poisson:1000", "--iterations=200",
                                    "--warmup-iterations=10", "--json=" + tmp.File("r.jsonl")}),
                           seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("# open-loop load, grpc/non-serialized"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# open-loop load, grpc+mpi"), std::string::npos) << r.out;
  int totals = 0;
  for (const Json& rec : ReadJsonLines(tmp.File("r.jsonl"))) {
    if (rec.value("scope", "") != "total" || rec.contains("kind")) continue;  // not the comparison
    ++totals;
    EXPECT_EQ(rec["load"]["planned"], 800) << rec.dump();
    EXPECT_EQ(rec["load"]["completed"], 800) << rec.dump();
    EXPECT_EQ(rec["load"]["dropped"], 0);
  }
  EXPECT_EQ(totals, 2);
}

// --- the cluster form: mpirun -np P psbench-ps : -np W psbench-worker -------------------------

TEST_F(MpiTest, MpmdFormFindsThePsAndNumbersTheWorkers) {
  TempDir tmp;
  RunResult r = RunCommand(
      MpmdArgv(2, {}, 2,
               {"--benchmark=throughput", "--iterations=20", "--warmup-iterations=2",
                "--validate", "--quiet", "--json=" + tmp.File("w%w.jsonl")}),
      seconds(90));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  for (int w = 0; w < 2; ++w) {
    std::vector<Json> records = ReadJsonLines(tmp.File("w" + std::to_string(w) + ".jsonl"));
    ASSERT_EQ(records.size(), 1u) << r.Describe();
    EXPECT_EQ(records[0]["worker_index"], w);
    EXPECT_EQ(records[0]["workers"], 2);
    EXPECT_EQ(records[0]["ps"], 2);
    EXPECT_EQ(records[0]["iterations"], 40);
  }
}

// --- bad launches --------------------------------------------------------------------------------

TEST_F(MpiTest, OutsideMpirunSaysHowToLaunch) {
  for (const Argv& argv : {PsArgv({"--transport=grpc+mpi"}),
                           Argv{BinPath("psbench-worker"), "--transport=grpc+mpi",
                                "--benchmark=latency"}}) {
    RunResult r = RunCommand(argv, seconds(30));
    EXPECT_EQ(r.exit_code, 2) << r.Describe();
    EXPECT_EQ(Find(r, "mpirun -np 1 psbench-ps --transport=grpc+mpi"),
              "mpirun -np 1 psbench-ps --transport=grpc+mpi");
    EXPECT_EQ(r.ErrLines().size(), 1u) << r.Describe();
  }
}

TEST_F(MpiTest, JobWithoutWorkersOrWithoutPs) {
  RunResult no_workers = RunCommand(MpmdArgv(2, {}, 0, {}), seconds(60));
  EXPECT_EQ(no_workers.exit_code, 2) << no_workers.Describe();
  EXPECT_EQ(Find(no_workers, "this MPI job has no psbench-worker rank"),
            "this MPI job has no psbench-worker rank");
  RunResult no_ps = RunCommand(MpmdArgv(0, {}, 2, {"--benchmark=latency"}), seconds(60));
  EXPECT_EQ(no_ps.exit_code, 2) << no_ps.Describe();
  EXPECT_EQ(Find(no_ps, "this MPI job has no psbench-ps rank"), "this MPI job has no psbench-ps rank");
}

TEST_F(MpiTest, WorkerCountMustMatchTheJob) {
  RunResult r = RunCommand(
      MpmdArgv(1, {}, 2, {"--benchmark=throughput", "--num-workers=3", "--iterations=5"}),
      seconds(60));
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_EQ(Find(r, "--num-workers=3 but the grpc+mpi job has 2 worker ranks"),
            "--num-workers=3 but the grpc+mpi job has 2 worker ranks");
  RunResult p2p = RunCommand(MpmdArgv(1, {}, 2, {"--benchmark=latency", "--iterations=5"}),
                             seconds(60));
  EXPECT_EQ(p2p.exit_code, 2) << p2p.Describe();
  EXPECT_EQ(Find(p2p, "is point to point, but this grpc+mpi job has 2 worker ranks"),
            "is point to point, but this grpc+mpi job has 2 worker ranks");
}

TEST_F(MpiTest, PsOutsideTheJobIsRefused) {
  auto ps = PsServer::Start();  // plain grpc, not a rank of the job
  ASSERT_TRUE(ps);
  RunResult r = RunCommand(
      Concat(Mpirun(), {"-np", "1", BinPath("psbench-worker"), "--transport=grpc+mpi",
                        "--ps=" + ps->address(), "--benchmark=latency", "--iterations=5"}),
      seconds(60));
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_EQ(Find(r, "serves --transport=grpc, not grpc+mpi"), "serves --transport=grpc, not grpc+mpi");
  EXPECT_EQ(ps->process().Stop(SIGTERM), 0);
}

// --- corrupted bytes are caught -------------------------------------------------------------------

class MpiCorruptionTest : public MpiTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(MpiCorruptionTest, ValidateFailsTheJob) {
  RunResult r = RunCommand(MpmdArgv(1, {"--fault-corrupt-every=3"}, 1,
                                    {"--benchmark=" + GetParam(), "--validate",
                                     "--iterations=30", "--warmup-iterations=0", "--quiet"}),
                           seconds(60));
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_EQ(Find(r, "psbench-worker: validation failed: PS 127.0.0.1:"),
            "psbench-worker: validation failed: PS 127.0.0.1:");
  EXPECT_EQ(Find(r, "checksum"), "checksum");
}

// Pushes are damaged before the PS checks them, echoes after (the worker checks).
INSTANTIATE_TEST_SUITE_P(PushAndEcho, MpiCorruptionTest, ::testing::Values("bandwidth", "latency"));

// --- ranks that die or stop ----------------------------------------------------------------------

// psbench run with a long throughput run, and its mpirun's ranks once they run.
struct RunningJob {
  std::unique_ptr<Process> run;
  std::vector<ProcInfo> ps, workers;
};

void StartJob(RunningJob* job, const Argv& extra = {}) {
  job->run = std::make_unique<Process>(
      RunArgv(Concat({"--transport=grpc+mpi", "--benchmark=throughput", "--num-ps=2",
                      "--num-workers=2", "--warmup=0s", "--duration=60s"},
                     extra)));
  auto mpirun = WaitForChild(job->run->pid(), "mpiexec", seconds(20));
  if (!mpirun) mpirun = WaitForChild(job->run->pid(), "mpirun", seconds(1));
  ASSERT_TRUE(mpirun) << "no mpirun under psbench run: " << job->run->Stderr();
  auto deadline = Clock::now() + seconds(30);
  while (Clock::now() < deadline && (job->ps.size() < 2 || job->workers.size() < 2)) {
    job->ps.clear();
    job->workers.clear();
    for (const ProcInfo& p : ChildrenOf(mpirun->pid)) {
      if (p.state == 'Z') continue;
      if (p.comm == "psbench-ps") job->ps.push_back(p);
      if (p.comm == "psbench-worker") job->workers.push_back(p);
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  ASSERT_EQ(job->ps.size(), 2u);
  ASSERT_EQ(job->workers.size(), 2u);
  std::this_thread::sleep_for(seconds(2));  // mid-run
  ASSERT_TRUE(job->run->Running()) << job->run->Stderr();
}

void ExpectJobEnded(RunningJob& job, double limit_s, const std::string& names) {
  auto since = Clock::now();
  std::optional<int> status = job.run->Wait(seconds(60));
  double took = std::chrono::duration<double>(Clock::now() - since).count();
  ASSERT_TRUE(status) << "psbench run still running 60 s later";
  EXPECT_EQ(*status, 1) << job.run->Stderr();
  EXPECT_LT(took, limit_s);
  for (const auto* group : {&job.ps, &job.workers}) {
    for (const ProcInfo& p : *group) EXPECT_FALSE(Alive(p.pid)) << p.comm << " " << p.pid << " left";
  }
  std::vector<std::string> lines = Lines(job.run->Stderr());
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back().rfind("psbench: throughput uniform: " + names, 0), 0u) << job.run->Stderr();
}

TEST_F(MpiTest, KilledPsEndsTheJobNamingIt) {
  RunningJob job;
  ASSERT_NO_FATAL_FAILURE(StartJob(&job));
  kill(job.ps[0].pid, SIGKILL);
  ExpectJobEnded(job, 15, "PS ");
  EXPECT_NE(job.run->Stderr().find("exited on signal 9"), std::string::npos) << job.run->Stderr();
}

TEST_F(MpiTest, KilledWorkerEndsTheJobNamingIt) {
  RunningJob job;
  ASSERT_NO_FATAL_FAILURE(StartJob(&job));
  kill(job.workers[1].pid, SIGKILL);
  ExpectJobEnded(job, 15, "worker ");
  EXPECT_NE(job.run->Stderr().find("exited on signal 9"), std::string::npos) << job.run->Stderr();
}

TEST_F(MpiTest, StoppedPsIsReportedAfterTheRpcTimeout) {
  RunningJob job;
  ASSERT_NO_FATAL_FAILURE(StartJob(&job, {"--rpc-timeout=2s"}));
  kill(job.ps[1].pid, SIGSTOP);
  ExpectJobEnded(job, 20, "worker ");
  EXPECT_NE(job.run->Stderr().find("no reply within --rpc-timeout=2s"), std::string::npos)
      << job.run->Stderr();
}

TEST_F(MpiTest, KilledLauncherLeavesNoRank) {
  RunningJob job;
  ASSERT_NO_FATAL_FAILURE(StartJob(&job));
  for (const ProcInfo& p : ChildrenOf(job.run->pid())) {
    if (p.comm == "mpiexec" || p.comm == "mpirun") kill(p.pid, SIGKILL);
  }
  ExpectJobEnded(job, 15, "mpirun ");
}

// --- a hostile client on the control port (labels mpi and faults) -------------------------------

class MpiFaultTest : public MpiTest {};

// The PS rank's gRPC control port gets psbench_hostile_client's attacks while a worker rank
// measures; every attack is refused (gRPC's payload methods as unimplemented), the worker
// finishes with a valid record (no peer lost: attackers hold no session) and the job ends 0.
TEST_F(MpiFaultTest, HostileClientOnTheControlPort) {
  TempDir tmp;
  Process job(MpmdArgv(1, {"--max-message-size=64K"}, 1,
                       {"--benchmark=bandwidth", "--sizes=16K:16K", "--warmup=0s", "--duration=8s",
                        "--validate",
                        "--quiet", "--json=" + tmp.File("w%w.jsonl")}));
  std::string address;
  for (auto deadline = Clock::now() + seconds(30); Clock::now() < deadline && address.empty();) {
    std::string out = job.Stdout();
    if (auto at = out.find("psbench-ps listening on "); at != std::string::npos) {
      std::string rest = out.substr(at + 24);
      if (rest.find(' ') != std::string::npos) address = rest.substr(0, rest.find(' '));
    }
    if (!job.Running()) break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_FALSE(address.empty()) << "no listening line from the PS rank: " << job.Stdout()
                                << job.Stderr();
  RunResult attack = RunCommand({BinPath("psbench_hostile_client"), address, "65536"}, seconds(50));
  EXPECT_EQ(attack.exit_code, 0) << attack.Describe();
  EXPECT_NE(attack.out.find("PASS control/mpi-garbage:"), std::string::npos) << attack.Describe();
  EXPECT_NE(attack.out.find("PASS oversized/control:"), std::string::npos) << attack.Describe();
  // gRPC's payload methods are not served here: the bytes can only go over MPI.
  EXPECT_NE(attack.out.find("PASS raw/garbage: 4096 bytes to /psbench.Raw/Push: status 12"), std::string::npos)
      << attack.Describe();
  EXPECT_NE(attack.out.find("PASS serialized/garbage: 4096 bytes to /psbench.wire.PsData/Push: status 12"),
            std::string::npos)
      << attack.Describe();
  EXPECT_NE(attack.out.find("PASS after/still-serving:"), std::string::npos) << attack.Describe();
  auto status = job.Wait(seconds(40));
  ASSERT_TRUE(status) << "the job did not end";
  EXPECT_EQ(*status, 0) << job.Stdout() << job.Stderr();
  std::vector<Json> records = ReadJsonLines(tmp.File("w0.jsonl"));
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].value("peers_lost", -1), 0) << records[0].dump();
  EXPECT_GT(records[0].value("iterations", 0), 0);
}

}  // namespace
}  // namespace psbench::testing
