// Faults: processes killed, stopped or interrupted mid-run. Whoever is left must fail within
// its deadline with one clear line (or keep serving), and nothing may be left running.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"

namespace psbench::testing {
namespace {

// How long the tests let a run go before they break something: enough to be mid-measurement.
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
  const Argv bandwidth = {"--benchmark=bandwidth", "--warmup=0s", "--quiet"};
  Process a(WorkerArgv(ps->address(), Concat(bandwidth, {"--duration=3s"})));
  Process b(WorkerArgv(ps->address(), Concat(bandwidth, {"--duration=30s"})));
  std::this_thread::sleep_for(kMidRun);
  ASSERT_TRUE(b.Running()) << b.Stderr();
  b.Signal(SIGKILL);
  EXPECT_EQ(b.Wait(seconds(5)), 128 + SIGKILL);

  std::optional<int> status_a = a.Wait(seconds(30));
  ASSERT_TRUE(status_a) << "worker A did not finish its 3 s run";
  EXPECT_EQ(*status_a, 0) << a.Stderr();
  EXPECT_EQ(a.Stderr(), "");

  RunResult c = RunCommand(WorkerArgv(ps->address(), {"--benchmark=bandwidth", "--validate",
                                                      "--warmup=0s", "--iterations=20"}));
  EXPECT_EQ(c.exit_code, 0) << c.Describe();
  EXPECT_TRUE(ps->process().Running()) << "the PS died";
  EXPECT_EQ(ps->process().Stop(SIGTERM), 0) << "and it still shuts down cleanly";
}

// A worker whose PS is SIGKILLed mid-run.
class PsKilledTest : public IntegrationTest,
                     public ::testing::WithParamInterface<std::tuple<std::string, std::string>> {};

TEST_P(PsKilledTest, WorkerFailsNamingThePs) {
  const auto& [benchmark, mode] = GetParam();
  auto ps = PsServer::Start();
  ASSERT_TRUE(ps);
  Process worker(WorkerArgv(ps->address(), {"--benchmark=" + benchmark, "--mode=" + mode,
                                            "--warmup=0s", "--duration=30s", "--rpc-timeout=5s",
                                            "--quiet"}));
  std::this_thread::sleep_for(kMidRun);
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
  Process worker(WorkerArgv(ps->address(), {"--benchmark=bandwidth", "--warmup=0s",
                                            "--duration=30s", "--rpc-timeout=2s", "--quiet"}));
  std::this_thread::sleep_for(kMidRun);
  ASSERT_TRUE(worker.Running()) << worker.Stderr();
  auto stopped = Clock::now();
  ps->process().Signal(SIGSTOP);  // alive, connected, silent
  // Operations time out after --rpc-timeout=2s.
  ExpectWorkerFailed(worker, ps->address(), stopped, 8);
  EXPECT_NE(worker.Stderr().find("Deadline"), std::string::npos) << worker.Stderr();
  ps->process().Signal(SIGCONT);
}

TEST_F(FaultTest, PsShutsDownCleanlyMidRun) {
  auto ps = PsServer::Start();
  ASSERT_TRUE(ps);
  Process worker(WorkerArgv(ps->address(), {"--benchmark=latency", "--mode=serialized",
                                            "--warmup=0s", "--duration=30s", "--quiet"}));
  std::this_thread::sleep_for(kMidRun);
  ASSERT_TRUE(worker.Running()) << worker.Stderr();
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
  std::string work_dir;  // where psbench keeps the scenario files it hands its workers
};

void StartDriver(const Argv& flags, RunningDriver* d) {
  d->run = std::make_unique<Process>(RunArgv(flags));
  auto ps = WaitForChild(d->run->pid(), "psbench-ps", seconds(20), "--port=0");
  ASSERT_TRUE(ps) << "psbench run started no psbench-ps: " << d->run->Stderr();
  auto worker = WaitForChild(d->run->pid(), "psbench-worker", seconds(20), "--scenario=");
  ASSERT_TRUE(worker) << "psbench run started no psbench-worker: " << d->run->Stderr();
  d->ps = *ps;
  d->worker = *worker;
  // "... --scenario=/tmp/psbench-run-XXXXXX/scenario-0-0.json ..."
  size_t at = d->worker.cmdline.find("--scenario=");
  ASSERT_NE(at, std::string::npos) << d->worker.cmdline;
  std::string path = d->worker.cmdline.substr(at + 11);
  path = path.substr(0, path.find(' '));
  d->work_dir = std::filesystem::path(path).parent_path();
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
  EXPECT_FALSE(std::filesystem::exists(d.work_dir)) << d.work_dir << " was left behind";
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

class RunSignalTest : public IntegrationTest, public ::testing::WithParamInterface<int> {};

TEST_P(RunSignalTest, RunStopsPromptlyAndCleansUp) {
  RunningDriver d;
  ASSERT_NO_FATAL_FAILURE(
      StartDriver({"--benchmark=bandwidth", "--warmup=0s", "--duration=20s"}, &d));
  auto signalled = Clock::now();
  d.run->Signal(GetParam());
  ExpectDriverFailedCleanly(d, signalled, 10);
  EXPECT_NE(d.run->Stderr().find("interrupted"), std::string::npos) << d.run->Stderr();
}

INSTANTIATE_TEST_SUITE_P(Signals, RunSignalTest, ::testing::Values(SIGTERM, SIGINT),
                         [](const auto& info) {
                           return std::string(info.param == SIGTERM ? "SIGTERM" : "SIGINT");
                         });

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
