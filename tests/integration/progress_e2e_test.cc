// The live status line of psbench run and of a standalone psbench-worker, on a real
// pseudo-terminal (forkpty): it is drawn, redrawn in place, cleared before any table line,
// and absent when the output is a pipe or a file, or with --quiet.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/integration/pty_run.h"
#include "tests/integration/run_helpers.h"

namespace psbench::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const Argv kShort = {"--benchmark=latency", "--sizes=1:2", "--warmup=1s", "--duration=1s"};

class ProgressTest : public IntegrationTest {};

TEST_F(ProgressTest, PsbenchRunShowsAStatusLineOnATerminalAndClearsIt) {
  PtyResult r = RunOnPty(RunArgv(kShort), seconds(90));
  ASSERT_FALSE(r.timed_out) << r.out;
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // Drawn and redrawn: run i/N, the payload and phase, elapsed, time left, the rate.
  EXPECT_THAT(r.out, HasSubstr("\rrun 1/1 latency sweep | payload 1/2 warm-up | "));
  EXPECT_THAT(r.out, HasSubstr("\rrun 1/1 latency sweep | payload 2/2 measure | "));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("elapsed, ~[0-9]+ s left \\| [0-9]+ op/s [0-9.]+ MB/s\033\\[K"));
  // Cleared before the table, and never part of a line that stays.
  EXPECT_THAT(r.out, HasSubstr(std::string(kClear) + "# psbench latency"));
  for (const std::string& line : VisibleLines(r.out)) EXPECT_THAT(line, Not(HasSubstr("elapsed"))) << r.out;
  EXPECT_THAT(r.out.substr(r.out.find("# psbench latency")), Not(HasSubstr("elapsed")));
}

// A sweep stopped by a signal keeps the payloads every worker finished (it kept none), without
// totals as any failed run's records, and its last line names the sweep (it said the default
// scheme's name).
TEST_F(ProgressTest, AnInterruptedSweepKeepsThePayloadsFinished) {
  TempDir tmp;
  const std::string json = tmp.File("r.jsonl");
  PtyResult r = RunOnPty(RunArgv({"--benchmark=throughput", "--num-workers=2", "--sizes=64:1M", "--warmup=0s",
                                  "--duration=1s", "--json=" + json}),
                         seconds(90), PtySignal{"payload 4/15 measure", SIGTERM});
  ASSERT_FALSE(r.timed_out) << r.out;
  ASSERT_EQ(r.exit_code, 128 + SIGTERM) << r.out;
  EXPECT_THAT(r.out, HasSubstr("psbench: throughput sweep: interrupted by SIGTERM"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("the [0-9]+ of 15 measurements every worker finished are kept"));
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_GE(records.size(), 6u) << "3 payloads or more, each from 2 workers: " << r.out;
  ASSERT_LT(records.size(), 30u) << r.out;
  ASSERT_EQ(records.size() % 2, 0u) << r.out;
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i]["payload_bytes"], 64 << (i / 2)) << records[i].dump();
    EXPECT_EQ(records[i]["worker_index"], i % 2) << records[i].dump();
  }
}

TEST_F(ProgressTest, NoStatusLineWhenTheOutputIsNotATerminal) {
  RunResult r = RunCommand(RunArgv(kShort), seconds(90));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(r.err, "") << r.Describe();
  EXPECT_THAT(r.out, Not(HasSubstr("\r")));
  EXPECT_THAT(r.out, Not(HasSubstr("elapsed")));
}

// Training is long compute: its status line counts steps, warm-up then measured, with the
// time left from the step rate.
TEST_F(ProgressTest, TrainingShowsItsSteps) {
#ifndef PSBENCH_HAVE_TRAINER
  GTEST_SKIP() << "psbench was built without the trainer";
#else
  PtyResult r = RunOnPty(RunArgv({"--trainer=tiny", "--batch=64", "--steps=150"}), seconds(90));
  ASSERT_FALSE(r.timed_out) << r.out;
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\rtraining tiny \\| measure \\| [0-9]+ s elapsed, ~[0-9]+ s left"));
  for (const std::string& line : VisibleLines(r.out)) EXPECT_THAT(line, Not(HasSubstr("elapsed"))) << r.out;
#endif
}

TEST_F(ProgressTest, StandaloneWorkerShowsItUnlessQuietOrPiped) {
  auto ps = PsServer::Start();
  ASSERT_NE(ps, nullptr);
  PtyResult r = RunOnPty(WorkerArgv(ps->address(), kShort), seconds(60));
  ASSERT_FALSE(r.timed_out) << r.out;
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\rpsbench-worker | payload 1/2 "));
  EXPECT_THAT(r.out, HasSubstr("\rpsbench-worker | payload 2/2 "));
  // Each table line prints on a cleared line, and what stays on screen has no status.
  int rows = 0;
  for (const std::string& line : VisibleLines(r.out)) {
    EXPECT_THAT(line, Not(HasSubstr("elapsed"))) << r.out;
    rows += line.find("           1 ") == 0 || line.find("           2 ") == 0;
  }
  EXPECT_EQ(rows, 2) << r.out;

  PtyResult quiet = RunOnPty(WorkerArgv(ps->address(), Concat(kShort, {"--quiet"})), seconds(60));
  ASSERT_EQ(quiet.exit_code, 0) << quiet.out;
  EXPECT_EQ(quiet.out, "");

  RunResult piped = RunCommand(WorkerArgv(ps->address(), kShort), seconds(60));
  ASSERT_EQ(piped.exit_code, 0) << piped.Describe();
  EXPECT_EQ(piped.err, "");
  EXPECT_THAT(piped.out, Not(HasSubstr("elapsed")));
}

}  // namespace
}  // namespace psbench::testing
