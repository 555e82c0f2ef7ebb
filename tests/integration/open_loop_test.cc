// Open-loop load (--load, --load-sweep, --max-in-flight, --hdr-out) with the real binaries:
// a PS paused mid-run shows in the latency from the planned start and not in the one from the
// send; the achieved rate is the offered one well below saturation; a sweep on loopback finds
// its knee; throughput totals merge the workers' histograms; the histograms are written as
// HdrHistogram text; bad schedules exit 2 with one line.
#include <sys/stat.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"

namespace psbench::testing {
namespace {

// A record's "load" for a failure message: without its histograms (thousands of numbers).
std::string Brief(Json load) {
  load.erase("histograms");
  return load.dump();
}

class OpenLoopTest : public IntegrationTest {};

// One worker at 250/s with one operation out at most; the PS stopped for 300 ms mid-run.
// Operations planned during the pause wait for it (and for the one out), so the latency from
// their planned start carries it; each, once sent, is answered as fast as ever, so the latency
// from the send does not. A closed-loop client would report only the latter.
TEST_F(OpenLoopTest, APausedPsShowsInCorrectedLatencyNotInUncorrected) {
  auto ps = PsServer::Start();
  ASSERT_TRUE(ps);
  TempDir tmp;
  const std::string json = tmp.File("r.jsonl");
  Process worker(WorkerArgv(ps->address(), {"--benchmark=latency", "--sizes=64:64", "--load=constant:250", "--max-in-flight=1",
                                            "--warmup-iterations=0", "--duration=3s", "--quiet",
                                            "--progress-file=" + tmp.File("progress"), "--json=" + json}));
  ASSERT_TRUE(WaitUntilMeasuring(tmp.File("progress"), seconds(20))) << worker.Stderr();
  std::this_thread::sleep_for(milliseconds(800));
  ps->process().Signal(SIGSTOP);
  std::this_thread::sleep_for(milliseconds(300));
  ps->process().Signal(SIGCONT);
  ASSERT_EQ(worker.Wait(seconds(60)), std::optional<int>(0)) << worker.Stderr();
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 1u);
  const Json& load = records[0]["load"];
  const double corrected_p99 = load["corrected_us"]["p99"].get<double>();
  const double uncorrected_p99 = load["uncorrected_us"]["p99"].get<double>();
  // About 75 of 750 operations were planned in the pause: the slowest 1 % waited most of it.
  EXPECT_GT(corrected_p99, 150000) << Brief(load);
  EXPECT_LT(uncorrected_p99, corrected_p99 / 4) << Brief(load);
  EXPECT_GT(load["uncorrected_us"]["max"].get<double>(), 250000) << "the one out during the pause";
  EXPECT_GT(load["deferred"].get<uint64_t>(), 40u) << Brief(load);
  EXPECT_GT(load["lag_us"]["p99"].get<double>(), 100000) << "sends fell behind their plan";
  // Sent or dropped, never lost (a slow machine, a sanitizer's, may not catch up in time).
  EXPECT_EQ(load["planned"].get<uint64_t>(), load["completed"].get<uint64_t>() + load["dropped"].get<uint64_t>());
  EXPECT_EQ(records[0]["latency_us"]["p99"], load["corrected_us"]["p99"]);
}

// Well below saturation the worker keeps to the schedule: achieved within 1 % of offered, every
// planned operation sent, over grpc in both wire modes. 400/s is well below what even a
// sanitizer's build carries on a loaded 2-core machine (2000/s was not); 10 s each, so that a
// stall of the machine near the end moves the achieved rate by its share of the run only.
TEST_F(OpenLoopTest, AchievedRateIsTheOfferedOneBelowSaturation) {
  TempDir tmp;
  const std::string json = tmp.File("r.jsonl"), hdr = tmp.File("h");
  for (const char* mode : {"--mode=non-serialized", "--mode=serialized"}) {
    RunResult r = RunCommand(RunArgv({"--benchmark=latency", mode, "--sizes=64:64", "--load=constant:400", "--iterations=4000",
                                      "--warmup-iterations=200", "--json=" + json}),
                             seconds(120));
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    EXPECT_NE(r.out.find("# open-loop load, grpc/"), std::string::npos) << r.out;
  }
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 2u);
  for (const Json& rec : records) {
    const Json& load = rec["load"];
    EXPECT_EQ(load["planned"], 4000);
    EXPECT_EQ(load["completed"], 4000);
    EXPECT_EQ(load["dropped"], 0);
    EXPECT_EQ(load["offered_per_s"], 400.0);
    EXPECT_NEAR(load["achieved_per_s"].get<double>(), 400, 4) << Brief(load);
    EXPECT_EQ(rec["config"]["load"]["kind"], "constant") << "the record says how it was loaded";
    EXPECT_EQ(load["seed"].is_number_unsigned(), true);
  }
}

// A slow Poisson schedule may plan nothing in the tail of --duration: the achieved rate is over
// the whole time offered, not up to the last completion (one operation at the start, answered
// in a millisecond, read as ~1000/s achieved of 2/s offered).
TEST_F(OpenLoopTest, AchievedRateIsOverTheWholeDuration) {
  TempDir tmp;
  const std::string json = tmp.File("r.jsonl");
  RunResult r = RunCommand(RunArgv({"--benchmark=latency", "--sizes=64:64", "--load=poisson:2", "--duration=1s",
                                    "--warmup=0s", "--json=" + json}),
                           seconds(60));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 1u);
  const Json& load = records[0]["load"];
  const double completed = load["completed"].get<double>();
  EXPECT_GE(completed, 1) << "a Poisson schedule plans its first operation at the start";
  EXPECT_GE(records[0]["seconds"].get<double>(), 1.0) << Brief(load);
  EXPECT_LE(load["achieved_per_s"].get<double>(), completed / 1.0) << Brief(load);
}

// Rates from easy to far past what loopback carries: the sweep reports every rate and the
// knee; the histograms of each go to --hdr-out, numbered, as HdrHistogram text.
TEST_F(OpenLoopTest, SweepFindsTheKneeAndWritesHistograms) {
  TempDir tmp;
  const std::string json = tmp.File("r.jsonl"), hdr = tmp.File("h");
  RunResult r = RunCommand(RunArgv({"--benchmark=latency", "--sizes=64:64", "--load-sweep=poisson:500..256000*8", "--duration=0.5s",
                                    "--warmup=0.2s", "--max-in-flight=64", "--json=" + json, "--hdr-out=" + hdr}),
                           seconds(180));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 4u);
  const double rates[] = {500, 4000, 32000, 256000};
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i]["load"]["rate_per_s"], rates[i]);
    EXPECT_EQ(records[i]["load"]["sweep"], "poisson:500..256000*8");
    EXPECT_EQ(records[i]["config"]["load"]["rate"], rates[i]) << "the config is the measurement's own";
    EXPECT_FALSE(records[i]["config"].contains("load_sweep"));
  }
  EXPECT_LT(records[3]["load"]["achieved_per_s"].get<double>(), 0.95 * 256000) << "loopback gRPC cannot carry 256k/s";
  EXPECT_NE(r.out.find("# knee: "), std::string::npos) << r.out;
  for (int n = 1; n <= 4; ++n) {
    for (const char* which : {"corrected", "uncorrected", "lag"}) {
      const std::string path = hdr + "." + std::to_string(n) + "." + which + ".hgrm";
      const std::string text = ReadFile(path);
      EXPECT_NE(text.find("1/(1-Percentile)"), std::string::npos) << path;
      EXPECT_NE(text.find("#[Max     = "), std::string::npos) << path;
    }
  }
  EXPECT_NE(r.out.find("# wrote " + hdr + ".4.{corrected,uncorrected,lag}.hgrm"), std::string::npos) << r.out;
}

// Records that cannot be saved (a full disk) stop the run, exit 1; the histograms of what was
// measured are still written (they were not, by psbench run or the worker).
TEST_F(OpenLoopTest, HistogramsAreWrittenWhenTheRecordsCannotBe) {
  TempDir tmp;
  auto ps = PsServer::Start();
  ASSERT_TRUE(ps);
  const Argv flags = {"--benchmark=latency", "--sizes=1K:1K", "--warmup=0s", "--duration=0.2s", "--load=poisson:500",
                      "--json=/dev/full"};
  for (const auto& [who, argv] : {std::pair{"run", RunArgv(Concat(flags, {"--hdr-out=" + tmp.File("run")}))},
                                  {"worker", WorkerArgv(ps->address(), Concat(flags, {"--hdr-out=" + tmp.File("worker")}))}}) {
    RunResult r = RunCommand(argv, seconds(60));
    EXPECT_EQ(r.exit_code, 1) << r.Describe();
    EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.Describe();
    for (const char* which : {"corrected", "uncorrected", "lag"}) {
      EXPECT_TRUE(std::filesystem::exists(tmp.File(std::string(who) + "." + which + ".hgrm"))) << who << " " << which;
    }
  }
}

// Throughput, 2 workers x 2 PS, Poisson: each worker's schedule is its own (seeded apart);
// the total adds their operations and merges their histograms.
TEST_F(OpenLoopTest, ThroughputTotalMergesTheWorkers) {
  TempDir tmp;
  const std::string json = tmp.File("r.jsonl");
  RunResult r = RunCommand(RunArgv({"--benchmark=throughput", "--sizes=1K:1K", "--num-ps=2", "--num-workers=2", "--load=poisson:1000",
                                    "--iterations=300", "--warmup-iterations=20", "--json=" + json}),
                           seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 3u);
  const Json& total = records[2];
  ASSERT_EQ(total["scope"], "total");
  EXPECT_EQ(total["load"]["completed"], 1200) << "300 per PS from each worker";
  EXPECT_EQ(total["load"]["corrected_us"]["count"], 1200);
  EXPECT_EQ(total["load"]["offered_per_s"], 2000.0);
  EXPECT_NE(records[0]["load"]["seed"], records[1]["load"]["seed"]);
  EXPECT_EQ(total["load"]["workers"], 2);
}

TEST_F(OpenLoopTest, BadSchedulesExitTwoWithOneLine) {
  TempDir tmp;
  // Not the first name --hdr-out writes: the open of a pipe no process reads blocked at the end.
  ASSERT_EQ(mkfifo(tmp.File("pipe.lag.hgrm").c_str(), 0600), 0);
  struct Case {
    Argv flags;
    std::vector<std::string> keywords;
  };
  const std::vector<Case> cases = {
      {{"--benchmark=latency", "--load=poisson:0"}, {"--load=poisson:0", "above 0"}},
      {{"--benchmark=latency", "--load=poisson:-5"}, {"--load", "above 0"}},
      {{"--benchmark=latency", "--load=poisson:fast"}, {"--load", "not a rate"}},
      {{"--benchmark=latency", "--load=poisson"}, {"--load", "give the rate"}},
      {{"--benchmark=latency", "--load=sometimes:5"}, {"--load", "constant:RATE"}},
      {{"--benchmark=latency", "--load-sweep=poisson:1000..500*2"}, {"--load-sweep", "LO is above HI"}},
      {{"--benchmark=latency", "--load-sweep=poisson:10..1000*1"}, {"--load-sweep", "never reaches HI"}},
      {{"--benchmark=latency", "--load-sweep=poisson:10..1000"}, {"--load-sweep", "KIND:LO..HI*FACTOR"}},
      // Three dots read as LO..0.HI (it echoed "1000..0.4*2").
      {{"--benchmark=latency", "--load-sweep=poisson:1000...4000*2"}, {"--load-sweep=poisson:1000...4000*2", "KIND:LO..HI*FACTOR"}},
      {{"--benchmark=latency", "--load=constant:10", "--load-sweep=poisson:10..1000*2"}, {"--load", "not both"}},
      {{"--benchmark=bandwidth", "--load=constant:10"}, {"--load", "--benchmark=latency"}},
      {{"--benchmark=latency", "--load=constant:10", "--max-in-flight=0"}, {"--max-in-flight"}},
      {{"--benchmark=latency", "--max-in-flight=8"}, {"--max-in-flight", "open-loop"}},
      {{"--benchmark=latency", "--hdr-out=" + tmp.File("h")}, {"--hdr-out", "open-loop"}},
      {{"--benchmark=throughput", "--load=constant:10", "--outstanding=4"}, {"--outstanding", "--max-in-flight"}},
      {{"--benchmark=latency", "--load=constant:10", "--hdr-out=" + tmp.File("no/such/dir/h")}, {"--hdr-out", "cannot write"}},
      {{"--benchmark=latency", "--load=constant:10", "--hdr-out=" + tmp.File("pipe")}, {"pipe.lag.hgrm is not a regular file"}},
      // A schedule that plans no operation in the time measured (a record of none read 0 µs).
      {{"--benchmark=latency", "--load=constant:0.5", "--duration=0.5s"}, {"--load=constant:0.5", "offers 0.25 operations"}},
      {{"--benchmark=latency", "--load=poisson:0.5", "--duration=1s"}, {"--load=poisson:0.5", "offers 0.5 operations"}},
      {{"--benchmark=latency", "--load-sweep=constant:0.5..2*2", "--duration=0.5s"},
       {"--load-sweep", "at its lowest rate", "--duration=500ms"}},
  };
  for (const Case& c : cases) ExpectRunAndWorkerRefuse(c.flags, c.keywords);
}

}  // namespace
}  // namespace psbench::testing
