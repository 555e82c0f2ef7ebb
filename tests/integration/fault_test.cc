// Faults (labels integration and faults): processes killed, stopped or interrupted mid-run, and
// --json to a disk that cannot take it. Whoever is left must fail within its deadline with one
// clear line (or keep serving, and say what it lost), and nothing may be left running.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"

namespace psbench::testing {
namespace {

// How long the tests let a `psbench run` go before they break something: enough to be
// mid-measurement. Its worker prints no progress without a terminal, so time stands in for
// the progress file that the tests of a lone worker wait on.
constexpr milliseconds kMidRun(1000);

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Waits for a worker started in the background; expects it to fail (exit 1) with one line on
// stderr naming `ps_address`, within `limit` of `since`.
void ExpectWorkerFailed(Process& worker, const std::string& ps_address, Clock::time_point since,
                        double limit_s) {
  std::optional<int> status = worker.Wait(seconds(30));
  const double took = SecondsSince(since);
  const std::string err = worker.Stderr();
  ASSERT_TRUE(status) << "worker still running 30 s later: " << worker.Command();
  EXPECT_EQ(*status, 1) << err;
  EXPECT_LT(took, limit_s) << "the worker took " << took << " s to give up";
  ASSERT_EQ(Lines(err).size(), 1u) << "one line on stderr:\n" << err;
  EXPECT_EQ(err.rfind("psbench-worker: ", 0), 0u) << err;
  EXPECT_NE(err.find(ps_address), std::string::npos) << "names the PS " << ps_address << ": "
                                                      << err;
}

class FaultTest : public IntegrationTest {};

TEST_F(FaultTest, PsKeepsServingAfterLosingAWorker) {
  auto ps = PsServer::Start();
  ASSERT_TRUE(ps);
  TempDir tmp;
  const Argv bandwidth = {"--benchmark=bandwidth", "--warmup=0s", "--quiet"};
  // B measures first; A starts after it and B dies once A measures too, so A's 3 s window
  // always spans the loss however slowly a sanitized worker starts.
  Process b(WorkerArgv(ps->address(), Concat(bandwidth, {"--duration=30s",
                                                         "--progress-file=" + tmp.File("b")})));
  ASSERT_TRUE(WaitUntilMeasuring(tmp.File("b"), seconds(20))) << b.Stderr();
  Process a(WorkerArgv(ps->address(),
                       Concat(bandwidth, {"--duration=3s", "--json=" + tmp.File("a.jsonl"),
                                          "--progress-file=" + tmp.File("a")})));
  ASSERT_TRUE(WaitUntilMeasuring(tmp.File("a"), seconds(20))) << a.Stderr();
  ASSERT_TRUE(b.Running()) << b.Stderr();
  b.Signal(SIGKILL);
  EXPECT_EQ(b.Wait(seconds(5)), 128 + SIGKILL);

  std::optional<int> status_a = a.Wait(seconds(30));
  ASSERT_TRUE(status_a) << "worker A did not finish its 3 s run";
  EXPECT_EQ(*status_a, 0) << a.Stderr();
  // A's figures are its own and valid; its record and a warning say that a peer was lost.
  std::vector<Json> records = ReadJsonLines(tmp.File("a.jsonl"));
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].value("peers_lost", -1), 1) << records[0].dump();
  EXPECT_EQ(records[0]["ps_counted"][0].value("sessions_lost", -1), 1);
  EXPECT_GT(records[0].value("iterations", 0), 0);
  ASSERT_EQ(Lines(a.Stderr()).size(), 1u) << a.Stderr();
  EXPECT_NE(a.Stderr().find("psbench-worker: warning: 1 other worker left the PS"),
            std::string::npos) << a.Stderr();

  TempDir tmp_c;
  RunResult c = RunCommand(WorkerArgv(ps->address(), {"--benchmark=bandwidth", "--validate",
                                                      "--warmup=0s", "--iterations=20",
                                                      "--json=" + tmp_c.File("c.jsonl")}));
  EXPECT_EQ(c.exit_code, 0) << c.Describe();
  EXPECT_EQ(c.err, "") << "no peer lost during C's run";
  records = ReadJsonLines(tmp_c.File("c.jsonl"));
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].value("peers_lost", -1), 0) << "A said goodbye: " << records[0].dump();
  EXPECT_TRUE(ps->process().Running()) << "the PS died";
  EXPECT_EQ(ps->process().Stop(SIGTERM), 0) << "and it still shuts down cleanly";
}

// Throughput, 3 workers x 2 PS: one is killed mid-measurement. The other two finish with
// valid records (every PS kept serving them) that say one peer was lost, at every PS.
TEST_F(FaultTest, ThroughputSurvivorsSayAPeerWasLost) {
  auto ps0 = PsServer::Start();
  auto ps1 = PsServer::Start();
  ASSERT_TRUE(ps0 && ps1);
  const std::string ps_list = ps0->address() + "," + ps1->address();
  TempDir tmp;
  std::vector<std::unique_ptr<Process>> workers;
  for (int w = 0; w < 3; ++w) {
    workers.push_back(std::make_unique<Process>(WorkerArgv(
        ps_list, {"--benchmark=throughput", "--num-workers=3", "--worker-index=" + std::to_string(w),
                  "--run-id=lost", "--warmup=0s", "--duration=" + std::string(w == 2 ? "30s" : "4s"),
                  "--sizes=4K:4K", "--quiet", "--json=" + tmp.File("w" + std::to_string(w) + ".jsonl"),
                  "--progress-file=" + tmp.File("p" + std::to_string(w))})));
  }
  for (int w = 0; w < 3; ++w) {  // all three past the start barriers
    ASSERT_TRUE(WaitUntilMeasuring(tmp.File("p" + std::to_string(w)), seconds(20)))
        << workers[w]->Stderr();
  }
  ASSERT_TRUE(workers[2]->Running()) << workers[2]->Stderr();
  workers[2]->Signal(SIGKILL);
  EXPECT_EQ(workers[2]->Wait(seconds(5)), 128 + SIGKILL);
  for (int w = 0; w < 2; ++w) {
    auto status = workers[w]->Wait(seconds(30));
    ASSERT_TRUE(status) << "worker " << w << " still running";
    EXPECT_EQ(*status, 0) << workers[w]->Stderr();
    EXPECT_NE(workers[w]->Stderr().find("warning: 1 other worker left the PS"), std::string::npos)
        << workers[w]->Stderr();
    std::vector<Json> records = ReadJsonLines(tmp.File("w" + std::to_string(w) + ".jsonl"));
    ASSERT_EQ(records.size(), 1u);
    const Json& r = records[0];
    EXPECT_EQ(r.value("peers_lost", -1), 1) << r.dump();
    ASSERT_EQ(r["ps_counted"].size(), 2u);
    for (const Json& c : r["ps_counted"]) EXPECT_EQ(c.value("sessions_lost", -1), 1) << c.dump();
    ASSERT_EQ(r["rpc_per_ps"].size(), 2u);
    EXPECT_GT(r["rpc_per_ps"][0].get<uint64_t>(), 0u);
    EXPECT_GT(r["rpc_per_ps"][1].get<uint64_t>(), 0u);
    EXPECT_EQ(r.value("bytes", uint64_t{0}), r.value("iterations", uint64_t{0}) * 4096);
  }
  EXPECT_EQ(ps0->process().Stop(SIGTERM), 0);
  EXPECT_EQ(ps1->process().Stop(SIGTERM), 0);
}

// A worker whose PS is SIGKILLed mid-run.
class PsKilledTest : public IntegrationTest,
                     public ::testing::WithParamInterface<std::tuple<std::string, std::string>> {};

TEST_P(PsKilledTest, WorkerFailsNamingThePs) {
  const auto& [benchmark, mode] = GetParam();
  auto ps = PsServer::Start();
  ASSERT_TRUE(ps);
  TempDir tmp;
  Process worker(WorkerArgv(ps->address(), {"--benchmark=" + benchmark, "--mode=" + mode,
                                            "--warmup=0s", "--duration=30s", "--rpc-timeout=5s",
                                            "--quiet", "--progress-file=" + tmp.File("progress")}));
  // Mid-measurement, however long starting took (under TSan, more than a second).
  ASSERT_TRUE(WaitUntilMeasuring(tmp.File("progress"), seconds(20))) << worker.Stderr();
  ASSERT_TRUE(worker.Running()) << worker.Stderr();
  auto killed = Clock::now();
  ps->process().Signal(SIGKILL);
  ExpectWorkerFailed(worker, ps->address(), killed, 10);
}

INSTANTIATE_TEST_SUITE_P(
    Benchmarks, PsKilledTest,
    ::testing::Values(std::make_tuple("bandwidth", "non-serialized"),
                      std::make_tuple("latency", "serialized"),
                      std::make_tuple("throughput", "non-serialized")),
    [](const auto& info) {
      std::string name = std::get<0>(info.param) + "_" + std::get<1>(info.param);
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

TEST_F(FaultTest, WorkerFailsWhenItsPsStopsAnswering) {
  auto ps = PsServer::Start();
  ASSERT_TRUE(ps);
  TempDir tmp;
  Process worker(WorkerArgv(ps->address(), {"--benchmark=bandwidth", "--warmup=0s",
                                            "--duration=30s", "--rpc-timeout=2s", "--quiet",
                                            "--progress-file=" + tmp.File("progress")}));
  // Stopped while its data calls run, not while it is still starting (its control calls
  // have their own deadline): under ThreadSanitizer a fixed second was not always enough.
  ASSERT_TRUE(WaitUntilMeasuring(tmp.File("progress"), seconds(20))) << worker.Stderr();
  auto stopped = Clock::now();
  ps->process().Signal(SIGSTOP);  // alive, connected, silent
  // Operations time out after --rpc-timeout=2s.
  ExpectWorkerFailed(worker, ps->address(), stopped, 8);
  EXPECT_NE(worker.Stderr().find("no reply within --rpc-timeout=2s"), std::string::npos) << worker.Stderr();
  ps->process().Signal(SIGCONT);
}

// One PS of two stops answering while the other keeps answering: the worker's completions never
// stop, yet the stopped PS's oldest call must still fail at its --rpc-timeout, on either API.
class OnePsStopsTest : public IntegrationTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(OnePsStopsTest, WorkerFailsNamingTheSilentPs) {
  auto silent = PsServer::Start();
  auto busy = PsServer::Start();
  ASSERT_TRUE(silent && busy);
  TempDir tmp;
  Process worker(WorkerArgv(silent->address() + "," + busy->address(),
                            {"--benchmark=throughput", "--grpc-api=" + GetParam(), "--warmup=0s",
                             "--duration=30s", "--rpc-timeout=2s", "--quiet",
                             "--progress-file=" + tmp.File("progress")}));
  ASSERT_TRUE(WaitUntilMeasuring(tmp.File("progress"), seconds(20))) << worker.Stderr();
  auto stopped = Clock::now();
  silent->process().Signal(SIGSTOP);
  ExpectWorkerFailed(worker, silent->address(), stopped, 8);
  EXPECT_NE(worker.Stderr().find("no reply within --rpc-timeout=2s"), std::string::npos) << worker.Stderr();
  EXPECT_EQ(worker.Stderr().find(busy->address()), std::string::npos) << worker.Stderr();
  silent->process().Signal(SIGCONT);
}

INSTANTIATE_TEST_SUITE_P(GrpcApis, OnePsStopsTest, ::testing::Values("cq", "callback"));

TEST_F(FaultTest, PsShutsDownCleanlyMidRun) {
  auto ps = PsServer::Start();
  ASSERT_TRUE(ps);
  TempDir tmp;
  Process worker(WorkerArgv(ps->address(), {"--benchmark=latency", "--mode=serialized",
                                            "--warmup=0s", "--duration=30s", "--quiet",
                                            "--progress-file=" + tmp.File("progress")}));
  ASSERT_TRUE(WaitUntilMeasuring(tmp.File("progress"), seconds(20))) << worker.Stderr();
  auto stopped = Clock::now();
  EXPECT_EQ(ps->process().Stop(SIGTERM, seconds(10)), 0) << "psbench-ps exits 0 on SIGTERM";
  EXPECT_LT(SecondsSince(stopped), 5) << "and promptly, with a worker connected";
  ExpectWorkerFailed(worker, ps->address(), stopped, 10);
}

// --- psbench run --------------------------------------------------------------------------------

// A `psbench run` in the background, seen once it has started its PS and its worker.
struct RunningDriver {
  std::unique_ptr<Process> run;
  ProcInfo ps;
  ProcInfo worker;
};

void StartDriver(const Argv& flags, RunningDriver* d) {
  d->run = std::make_unique<Process>(RunArgv(flags));
  auto ps = WaitForChild(d->run->pid(), "psbench-ps", seconds(20), "--port=0");
  ASSERT_TRUE(ps) << "psbench run started no psbench-ps: " << d->run->Stderr();
  auto worker = WaitForChild(d->run->pid(), "psbench-worker", seconds(20), "--scenario-base64=");
  ASSERT_TRUE(worker) << "psbench run started no psbench-worker: " << d->run->Stderr();
  d->ps = *ps;
  d->worker = *worker;
  std::this_thread::sleep_for(kMidRun);
  ASSERT_TRUE(d->run->Running()) << d->run->Stderr();
}

// psbench run exited (non-zero) within `limit_s` of `since`, and took its processes and its
// work directory with it.
void ExpectDriverFailedCleanly(RunningDriver& d, Clock::time_point since, double limit_s,
                               int* status_out = nullptr) {
  std::optional<int> status = d.run->Wait(seconds(30));
  const double took = SecondsSince(since);
  ASSERT_TRUE(status) << "psbench run still running 30 s later";
  EXPECT_NE(*status, 0);
  EXPECT_LT(took, limit_s) << "psbench run took " << took << " s to stop";
  if (status_out) *status_out = *status;
  EXPECT_FALSE(Alive(d.ps.pid)) << "psbench-ps " << d.ps.pid << " is still running";
  EXPECT_FALSE(Alive(d.worker.pid)) << "psbench-worker " << d.worker.pid << " is still running";
  // Its own last line says what went wrong.
  std::vector<std::string> lines = Lines(d.run->Stderr());
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back().rfind("psbench: bandwidth uniform: ", 0), 0u) << d.run->Stderr();
}

TEST_F(FaultTest, RunFailsWhenItsPsIsKilled) {
  RunningDriver d;
  ASSERT_NO_FATAL_FAILURE(
      StartDriver({"--benchmark=bandwidth", "--warmup=0s", "--duration=20s"}, &d));
  auto killed = Clock::now();
  kill(d.ps.pid, SIGKILL);
  int status = 0;
  ExpectDriverFailedCleanly(d, killed, 10, &status);
  EXPECT_EQ(status, 1) << d.run->Stderr();
}

TEST_F(FaultTest, RunFailsWhenItsWorkerIsKilled) {
  RunningDriver d;
  ASSERT_NO_FATAL_FAILURE(
      StartDriver({"--benchmark=bandwidth", "--warmup=0s", "--duration=20s"}, &d));
  auto killed = Clock::now();
  kill(d.worker.pid, SIGKILL);
  int status = 0;
  ExpectDriverFailedCleanly(d, killed, 10, &status);
  EXPECT_EQ(status, 1) << d.run->Stderr();
  EXPECT_NE(d.run->Stderr().find("worker 0 (pid " + std::to_string(d.worker.pid) +
                                 ") killed by SIGKILL"),
            std::string::npos)
      << d.run->Stderr();
}

// psbench run, 3 throughput workers: one is killed mid-run. The run fails (exit 1, naming the
// worker), but the two others finish and their records, which say a peer was lost, are
// printed and written; no total (it would be missing a worker), nothing left running.
TEST_F(FaultTest, RunKeepsTheSurvivorsRecordsWhenAWorkerIsKilled) {
  TempDir tmp;
  Process run(RunArgv({"--benchmark=throughput", "--num-ps=1", "--num-workers=3", "--warmup=0s",
                       "--duration=5s", "--sizes=4K:4K", "--json=" + tmp.File("r.jsonl")}));
  std::vector<ProcInfo> workers;
  for (auto deadline = Clock::now() + seconds(20); Clock::now() < deadline && workers.size() < 3;) {
    workers.clear();
    for (const ProcInfo& p : ChildrenOf(run.pid())) {
      if (p.comm == "psbench-worker" && p.state != 'Z' &&
          p.cmdline.find("--scenario-base64=") != std::string::npos) {
        workers.push_back(p);
      }
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_EQ(workers.size(), 3u) << run.Stderr();
  auto victim = std::find_if(workers.begin(), workers.end(), [](const ProcInfo& p) {
    return p.cmdline.find("--worker-index=1 ") != std::string::npos;
  });
  ASSERT_NE(victim, workers.end());
  std::this_thread::sleep_for(milliseconds(2000));  // mid-measurement
  ASSERT_TRUE(run.Running()) << run.Stderr();
  kill(victim->pid, SIGKILL);
  auto status = run.Wait(seconds(30));
  ASSERT_TRUE(status) << "psbench run still running 30 s later";
  EXPECT_EQ(*status, 1) << run.Stderr();
  std::vector<std::string> lines = Lines(run.Stderr());
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.back().find("worker 1 (pid " + std::to_string(victim->pid) + ") killed by SIGKILL"),
            std::string::npos) << run.Stderr();
  EXPECT_NE(lines.back().find("2 of 3 workers finished"), std::string::npos) << run.Stderr();
  for (const ProcInfo& w : workers) EXPECT_FALSE(Alive(w.pid)) << "worker " << w.pid << " left";
  std::vector<Json> records = ReadJsonLines(tmp.File("r.jsonl"));
  ASSERT_EQ(records.size(), 2u) << run.Stdout();
  std::set<int> indexes;
  for (const Json& r : records) {
    EXPECT_EQ(r.value("scope", ""), "worker") << "no total record";
    EXPECT_EQ(r.value("peers_lost", -1), 1) << r.dump();
    EXPECT_GT(r.value("iterations", 0), 0);
    indexes.insert(r.value("worker_index", -1));
  }
  EXPECT_EQ(indexes, (std::set<int>{0, 2}));
  EXPECT_NE(run.Stdout().find("throughput"), std::string::npos) << "their table rows printed";
}

// --- --json to a disk that cannot take it ---------------------------------------------------------

// The records that could not be saved are counted in the message; the table (stdout) still
// has the figures, so nothing measured is lost silently.
TEST_F(FaultTest, WorkerJsonToAFullDisk) {
  auto ps = PsServer::Start();
  ASSERT_TRUE(ps);
  RunResult r = RunCommand(WorkerArgv(ps->address(), {"--benchmark=latency", "--warmup-iterations=2",
                                                      "--iterations=20", "--json=/dev/full"}));
  ExpectOneLineFailure(r, 1, "psbench-worker",
                       {"--json=/dev/full", "No space left on device", "1 record not saved"});
  EXPECT_NE(r.out.find("latency"), std::string::npos) << "the table row is printed: " << r.out;
  EXPECT_TRUE(ps->process().Running());
}

TEST_F(FaultTest, RunJsonToAFullDisk) {
  RunResult r = RunCommand(RunArgv({"--benchmark=latency", "--warmup-iterations=2",
                                    "--iterations=20", "--json=/dev/full"}));
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  ASSERT_EQ(r.ErrLines().size(), 1u) << r.Describe();
  EXPECT_NE(r.err.find("psbench: --json=/dev/full: write failed: No space left on device (1 record "
                       "not saved)"),
            std::string::npos) << r.Describe();
  EXPECT_NE(r.out.find("latency"), std::string::npos) << r.Describe();
}

// A named pipe: with no reader, a bounded wait and one line (it hung at start-up); with one,
// every record reaches it (closing the pipe after the start-up check gave the reader its
// end-of-file, and the records then waited for a reader forever).
TEST_F(FaultTest, JsonToANamedPipe) {
  TempDir tmp;
  const std::string fifo = tmp.File("records");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  ClosedPort nobody;
  RunResult alone = RunCommand(WorkerArgv(nobody.address(), {"--benchmark=latency", "--json=" + fifo}), seconds(30));
  ExpectOneLineFailure(alone, 2, "psbench-worker", {"--json=" + fifo, "a named pipe no process reads", "waited 10s"});
  Process reader({"/bin/cat", fifo});
  RunResult r = RunCommand(RunArgv({"--benchmark=latency", "--sizes=64:128", "--warmup-iterations=2", "--iterations=20",
                                    "--json=" + fifo}),
                           seconds(60));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  ASSERT_EQ(reader.Wait(seconds(10)), std::optional<int>(0)) << "the pipe is closed when psbench ends";
  const std::vector<std::string> lines = Lines(reader.Stdout());
  ASSERT_GE(lines.size(), 2u) << reader.Stdout();
  EXPECT_NE(lines[0].find("\"payload_bytes\":64"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("\"payload_bytes\":128"), std::string::npos) << lines[1];
}

// A reader that holds the pipe open but stops reading: psbench gave up nothing, said nothing
// and ignored SIGTERM, for ever. It waits 30 s for the reader to take something, then fails.
TEST_F(FaultTest, JsonToANamedPipeNobodyReads) {
  TempDir tmp;
  const std::string fifo = tmp.File("records");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  Process holder({"/bin/sh", "-c", "exec sleep 120 < " + fifo});
  // 21 records of about 4 KiB: more than the pipe's 64 KiB.
  RunResult r = RunCommand(RunArgv({"--benchmark=latency", "--sizes=1:1M", "--warmup-iterations=0", "--iterations=2",
                                    "--json=" + fifo}),
                           seconds(120));
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("--json=" + fifo + ": write failed: its reader took nothing for 30s"), std::string::npos)
      << r.Describe();
  EXPECT_LT(r.seconds, 90) << r.Describe();
  holder.Signal(SIGKILL);
}

// A --json path of bytes that are not UTF-8 (a legal Linux name): the records, whose command
// line holds it, were lost to an exception at the end of the run (exit 134). The byte is
// recorded as U+FFFD.
TEST_F(FaultTest, JsonPathThatIsNotUtf8KeepsItsRecords) {
  TempDir tmp;
  const std::string json = tmp.File("r\xff.jsonl");
  RunResult r = RunCommand(RunArgv({"--benchmark=latency", "--sizes=64:128", "--warmup-iterations=2", "--iterations=20",
                                    "--json=" + json}),
                           seconds(60));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_NE(records[0]["command"].dump().find("r\xef\xbf\xbd.jsonl"), std::string::npos) << records[0]["command"].dump();
}

// A read-only disk: a tmpfs mounted read-only in a private mount namespace (as root, a chmod
// would not stop the write). Found before measuring: exit 1 (the disk, not the flag, is wrong),
// at once.
class ReadOnlyDiskTest : public FaultTest {
 protected:
  void SetUp() override {
    FaultTest::SetUp();
    if (geteuid() != 0) GTEST_SKIP() << "mounting a read-only tmpfs needs root (CI runs as root)";
  }
  // `sh -c SCRIPT` in a private mount namespace, where $D is a directory of the test's.
  RunResult InMountNamespace(const std::string& script, milliseconds timeout = seconds(60)) {
    return RunCommand({"/usr/bin/unshare", "--mount", "--propagation", "private", "env", "D=" + dir_.path(),
                       "sh", "-c", script},
                      timeout);
  }
  static std::string Quote(const Argv& argv) {
    std::string out;
    for (const std::string& a : argv) out += "'" + a + "' ";
    return out;
  }
  TempDir dir_;
};

TEST_F(ReadOnlyDiskTest, WorkerAndRunRefuseAtOnce) {
  auto ps = PsServer::Start();
  ASSERT_TRUE(ps);
  const std::string mount = "mount -t tmpfs -o ro tmpfs $D && exec ";
  RunResult w = InMountNamespace(
      mount + Quote(WorkerArgv(ps->address(), {"--benchmark=latency", "--iterations=20"})) +
      "--json=$D/r.jsonl");
  ExpectOneLineFailure(w, 1, "psbench-worker", {"r.jsonl", "Read-only file system"});
  EXPECT_LT(w.seconds, 10) << "before measuring";
  RunResult r = InMountNamespace(mount + Quote(RunArgv({"--benchmark=latency", "--iterations=20"})) +
                                 "--json=$D/r.jsonl");
  ExpectOneLineFailure(r, 1, "psbench", {"r.jsonl", "Read-only file system"});
  EXPECT_TRUE(ps->process().Running());
}

// The disk turns read-only while the worker measures: its record cannot be saved, and it
// says so (exit 1) rather than exiting 0 with nothing written.
TEST_F(ReadOnlyDiskTest, DiskTurnsReadOnlyMidRun) {
  auto ps = PsServer::Start();
  ASSERT_TRUE(ps);
  RunResult w = InMountNamespace(
      "mount -t tmpfs tmpfs $D || exit 99; " +
      Quote(WorkerArgv(ps->address(), {"--benchmark=bandwidth", "--warmup=0s", "--duration=3s"})) +
      "--json=$D/r.jsonl & sleep 1; mount -o remount,ro $D || exit 98; wait $!");
  ExpectOneLineFailure(w, 1, "psbench-worker",
                       {"r.jsonl", "Read-only file system", "1 record not saved"});
  EXPECT_NE(w.out.find("bandwidth"), std::string::npos) << "the table row is printed: " << w.out;
  EXPECT_TRUE(ps->process().Running());
}

// The disk fills in the middle of a record: the file is cut back to its last whole record, so
// the next run's record is not glued to half of this one (psbench report then refused it).
TEST_F(ReadOnlyDiskTest, DiskFullMidRecordLeavesWholeLines) {
  auto ps = PsServer::Start();
  ASSERT_TRUE(ps);
  TempDir outside;  // $D is the tmpfs
  // Four pages: one for a filler, three for the records (a latency record is about 3 KiB).
  RunResult w = InMountNamespace(
      "mount -t tmpfs -o size=16k tmpfs $D || exit 99; head -c 4096 /dev/zero > $D/filler; " +
      Quote(WorkerArgv(ps->address(), {"--benchmark=latency", "--sizes=1:64", "--warmup-iterations=1",
                                       "--iterations=5"})) +
      "--json=$D/r.jsonl; status=$?; cp $D/r.jsonl " + outside.File("kept.jsonl") + "; exit $status");
  ASSERT_EQ(w.exit_code, 1) << w.Describe();
  EXPECT_NE(w.err.find("No space left on device"), std::string::npos) << w.Describe();
  const std::string kept = ReadFile(outside.File("kept.jsonl"));
  ASSERT_FALSE(kept.empty()) << "the first records fit";
  EXPECT_EQ(kept.back(), '\n') << kept.substr(kept.size() - std::min<size_t>(kept.size(), 80));
  for (const std::string& line : Lines(kept)) {
    EXPECT_FALSE(Json::parse(line, nullptr, false).is_discarded()) << line.substr(0, 80);
  }
  EXPECT_TRUE(ps->process().Running());
}

class RunSignalTest : public IntegrationTest, public ::testing::WithParamInterface<int> {};

TEST_P(RunSignalTest, RunStopsPromptlyAndCleansUp) {
  RunningDriver d;
  ASSERT_NO_FATAL_FAILURE(
      StartDriver({"--benchmark=bandwidth", "--warmup=0s", "--duration=20s"}, &d));
  auto signalled = Clock::now();
  d.run->Signal(GetParam());
  int status = 0;
  ExpectDriverFailedCleanly(d, signalled, 10, &status);
  EXPECT_EQ(status, 128 + GetParam()) << "128 + the signal, as a shell reports it";
  const std::string name = std::string("SIG") + sigabbrev_np(GetParam());
  EXPECT_NE(d.run->Stderr().find("interrupted by " + name), std::string::npos) << d.run->Stderr();
}

INSTANTIATE_TEST_SUITE_P(Signals, RunSignalTest, ::testing::Values(SIGTERM, SIGINT, SIGHUP),
                         [](const auto& info) { return std::string("SIG") + sigabbrev_np(info.param); });

// SIGKILL cannot be caught. What psbench run started dies with it (the kernel sends each child
// SIGTERM), and the scratch directory it held (here the floors' of the tour's reading aid)
// is removed by the next psbench, whatever it runs.
class RunKilledTest : public IntegrationTest {};

// The tour's floors ran on through a SIGTERM to psbench, which then exited 0.
TEST_F(RunKilledTest, SigtermDuringTheFloorsStopsThem) {
  TempDir tmp;
  Process run(RunArgv({"--iterations=5", "--warmup-iterations=0", "--json=" + tmp.File("r.jsonl")}));
  auto floor_running = [&run] {
    for (const ProcInfo& p : ChildrenOf(run.pid())) {
      if (p.comm.rfind("psbench-floor", 0) == 0) return true;
    }
    return false;
  };
  for (auto until = Clock::now() + seconds(120); !floor_running() && run.Running() && Clock::now() < until;) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_TRUE(floor_running()) << run.Stderr();
  auto signalled = Clock::now();
  run.Signal(SIGTERM);
  EXPECT_EQ(run.Wait(seconds(30)), 128 + SIGTERM) << run.Stderr();
  EXPECT_LT(Clock::now() - signalled, seconds(15));
  EXPECT_NE(run.Stderr().find("interrupted by SIGTERM"), std::string::npos) << run.Stderr();
  EXPECT_GE(ReadJsonLines(tmp.File("r.jsonl")).size(), 9u) << "the tour's records are kept";
}

TEST_F(RunKilledTest, LeavesNothingTheNextPsbenchKeeps) {
  TempDir tmpdir;
  const char* old = getenv("TMPDIR");
  const std::string saved = old != nullptr ? old : "";
  setenv("TMPDIR", tmpdir.path().c_str(), 1);
  auto run = std::make_unique<Process>(RunArgv({"--warmup=0s", "--duration=0.3s"}));
  std::string scratch;
  for (auto deadline = Clock::now() + seconds(60); scratch.empty() && Clock::now() < deadline;) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(tmpdir.path(), ec)) {
      if (e.path().filename().string().rfind("psbench-scratch-floor.", 0) == 0) scratch = e.path();
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_FALSE(scratch.empty()) << "the tour never ran its floors: " << run->Stderr();
  const std::vector<ProcInfo> children = ChildrenOf(run->pid());
  EXPECT_FALSE(children.empty()) << "a floor runs";
  run->Signal(SIGKILL);
  EXPECT_EQ(run->Wait(seconds(5)), 128 + SIGKILL);
  for (const ProcInfo& c : children) {
    auto deadline = Clock::now() + seconds(10);
    while (Alive(c.pid) && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(20));
    EXPECT_FALSE(Alive(c.pid)) << c.comm << " (pid " << c.pid << ") outlived psbench";
  }
  EXPECT_TRUE(std::filesystem::exists(scratch)) << "SIGKILL leaves it, until the next psbench";
  RunResult next = RunCommand({BinPath("psbench"), "--help"}, seconds(10));
  EXPECT_EQ(next.exit_code, 0) << next.Describe();
  EXPECT_FALSE(std::filesystem::exists(scratch)) << scratch;
  if (old != nullptr) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
}

}  // namespace
}  // namespace psbench::testing

namespace psbench::testing {
namespace {

// Throughput workers meet at barriers on PS 0. A worker that died while waiting must not be
// counted, and two live workers with one index are an error, not a silent half-run.
class BarrierTest : public IntegrationTest {
 protected:
  Argv Worker(const std::string& ps, int index) {
    return WorkerArgv(ps, {"--benchmark=throughput", "--num-workers=2",
                           "--worker-index=" + std::to_string(index), "--iterations=20",
                           "--warmup-iterations=0", "--quiet", "--connect-timeout=2s"});
  }
};

TEST_F(BarrierTest, DeadWorkerIsNotCounted) {
  auto ps = PsServer::Start();
  ASSERT_TRUE(ps);
  {
    Process dying(Worker(ps->address(), 1));
    std::this_thread::sleep_for(milliseconds(500));
    ASSERT_TRUE(dying.Running()) << dying.Stderr();
    dying.Signal(SIGKILL);
    EXPECT_EQ(dying.Wait(seconds(5)), 128 + SIGKILL);
  }
  std::this_thread::sleep_for(seconds(1));
  // Alone, worker 0 must wait (the dead worker 1 does not count); with a new worker 1 the
  // pair runs.
  Process zero(Worker(ps->address(), 0));
  std::this_thread::sleep_for(milliseconds(700));
  EXPECT_TRUE(zero.Running()) << "worker 0 passed the barrier alone: " << zero.Stderr();
  RunResult one = RunCommand(Worker(ps->address(), 1), seconds(30));
  EXPECT_EQ(one.exit_code, 0) << one.Describe();
  EXPECT_EQ(zero.Wait(seconds(30)), 0) << zero.Stderr();
}

// A worker whose peers never come is not silent: it names them after 2 s, and at the first
// barrier fails once --connect-timeout + 10 s have passed, naming them again.
TEST_F(BarrierTest, LoneWorkerNamesWhoItWaitsForAndGivesUp) {
  auto ps = PsServer::Start();
  ASSERT_TRUE(ps);
  RunResult r = RunCommand(
      WorkerArgv(ps->address(), {"--benchmark=throughput", "--num-workers=3", "--worker-index=1",
                                 "--iterations=20", "--warmup-iterations=0", "--quiet",
                                 "--connect-timeout=1s"}),
      seconds(40));
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_GE(r.seconds, 10) << r.Describe();
  EXPECT_LT(r.seconds, 25) << r.Describe();
  std::vector<std::string> lines = r.ErrLines();
  ASSERT_GE(lines.size(), 2u) << r.Describe();
  EXPECT_NE(lines.front().find("waiting 2 s so far"), std::string::npos) << r.Describe();
  for (const std::string& line : lines) {
    EXPECT_NE(line.find("only 1 of the 3 workers reached barrier"), std::string::npos) << r.Describe();
    EXPECT_NE(line.find("(missing: workers 0, 2)"), std::string::npos) << r.Describe();
  }
  EXPECT_NE(lines.back().find("after 11s"), std::string::npos) << r.Describe();
  EXPECT_EQ(ps->process().Stop(SIGTERM), 0);
}

TEST_F(BarrierTest, DuplicateWorkerIndexIsAnError) {
  auto ps = PsServer::Start();
  ASSERT_TRUE(ps);
  Process a(Worker(ps->address(), 0));
  Process b(Worker(ps->address(), 0));
  // Whichever sees the other first fails; the survivor may be the real worker 0 and waits.
  Process* failed = nullptr;
  for (auto deadline = Clock::now() + seconds(10); !failed && Clock::now() < deadline;) {
    if (!a.Running()) failed = &a;
    else if (!b.Running()) failed = &b;
    else std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_NE(failed, nullptr) << "neither worker noticed the duplicate index";
  EXPECT_EQ(failed->Poll(), 1);
  std::string err = failed->Stderr();
  EXPECT_EQ(Lines(err).size(), 1u) << err;
  EXPECT_NE(err.find("--worker-index=0"), std::string::npos) << err;
}

}  // namespace
}  // namespace psbench::testing
