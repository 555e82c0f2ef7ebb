// The cluster launchers' parsers: host lists, Slurm's tasks per node, Open MPI's tagged
// output (chunks of long lines, interleaved ranks), srun's labels and shell quoting; and how a
// launcher's child is read (stdout and stderr apart) and stopped (its stdin first).
#include "cli/launch/demux.h"
#include "cli/launch/launchers.h"
#include "cli/launch/process.h"
#include "cli/launch/ps_address.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psbench {
namespace {

// What a launcher dials for each line a PS prints: its address, or its host name when it
// listens on every interface.
TEST(PsDialAddressTest, ReadsTheListeningLine) {
  EXPECT_EQ(PsDialAddress("psbench-ps listening on 127.0.0.1:5000 transport=grpc pid=1"),
            "127.0.0.1:5000");
  EXPECT_EQ(PsDialAddress("psbench-ps listening on [::1]:5000 transport=grpc"), "[::1]:5000");
  EXPECT_EQ(PsDialAddress("psbench-ps listening on 0.0.0.0:5000 pid=1 host=node7"), "node7:5000");
  EXPECT_EQ(PsDialAddress("psbench-ps listening on [::]:5000 host=node7"), "node7:5000");
  EXPECT_EQ(PsDialAddress("psbench-ps listening on 0.0.0.0:5000 host=fe80::1"), "[fe80::1]:5000");
  EXPECT_EQ(PsDialAddress("psbench-ps listening on 0.0.0.0:5000 pid=1"), std::nullopt)
      << "every interface and no host= to dial";
  EXPECT_EQ(PsDialAddress("psbench-ps listening on 127.0.0.1:0"), std::nullopt);
  EXPECT_EQ(PsDialAddress("psbench-ps listening on 127.0.0.1:65536"), std::nullopt);
  EXPECT_EQ(PsDialAddress("psbench-ps listening on ::1:5000"), std::nullopt);
  EXPECT_EQ(PsDialAddress("psbench-ps: warning: something else"), std::nullopt);
}

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string WriteTemp(const std::string& text) {
  char path[] = "/tmp/psbench-hostfile-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  return path;
}

TEST(HostFileTest, OneLinePerSlotAndSlotsEquals) {
  std::string path = WriteTemp("# PBS style\nnode01\nnode01\n\nnode02  # trailing comment\nnode03 slots=2\n");
  auto slots = ReadHostFile(path);
  unlink(path.c_str());
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_THAT(*slots, ElementsAre("node01", "node01", "node02", "node03", "node03"));
}

TEST(HostFileTest, BadFilesNameTheLine) {
  for (const auto& [text, expected] : std::vector<std::pair<std::string, std::string>>{
           {"node01\nnode02 slots=0\n", "line 2"},
           {"node01 cores=4\n", "slots=N"},
           {"-oProxyCommand=x\n", "not a host name"},
           {"# nothing\n\n", "lists no host"},
           {"node01 slots=4097\n", "N in [1, 4096]"},
           {std::string(), "line 17: the file lists over 65536 slots"}}) {
    std::string file = text;  // empty: 17 lines of 4096 slots each
    for (int i = 0; text.empty() && i < 17; ++i) file += "node" + std::to_string(i) + " slots=4096\n";
    std::string path = WriteTemp(file);
    auto slots = ReadHostFile(path);
    unlink(path.c_str());
    ASSERT_FALSE(slots.ok()) << text;
    EXPECT_THAT(std::string(slots.status().message()), HasSubstr(expected)) << text;
  }
  EXPECT_FALSE(ReadHostFile("/nonexistent/hosts").ok());
}

TEST(SlurmTasksPerNodeTest, RepeatsExpand) {
  EXPECT_THAT(*ParseSlurmTasksPerNode("2(x3),1"), ElementsAre(2, 2, 2, 1));
  EXPECT_THAT(*ParseSlurmTasksPerNode("4"), ElementsAre(4));
  // Over a node's most, or more nodes than any allocation: refused, not a vector of 2^31.
  for (const char* bad : {"", "0", "2(x0)", "2(x3", "a", "1,,2", "2147483647", "4097", "1(x65537)",
                          "1(x65536),1", "1(x2147483647)", "4096(x17)", "4096(x65536)"}) {
    EXPECT_FALSE(ParseSlurmTasksPerNode(bad).ok()) << bad;
  }
}

TEST(MpirunTagDemuxTest, WholeLinesPassThrough) {
  auto demux = MpirunTagDemux();
  auto lines = demux->Take("[1,2]<stdout>:{\"a\":[1,2]}");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].member, 2);
  EXPECT_EQ(lines[0].text, "{\"a\":[1,2]}");
}

// Open MPI tags each forwarded chunk: a long line comes in tagged pieces, other ranks' chunks
// may come between them, and a newline ends the line of the rank whose piece came last.
TEST(MpirunTagDemuxTest, ChunksOfOneLineAreJoinedAcrossRanks) {
  auto demux = MpirunTagDemux();
  EXPECT_TRUE(demux->Take("[1,1]<stdout>:{\"x\":555.00[1,1]<stdout>:5,\"y\":[3,4][1,0]<stdout>:listening on a:1").size() == 1);
  auto lines = demux->Take("[1,1]<stdout>:}");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].member, 1);
  EXPECT_EQ(lines[0].text, "{\"x\":555.005,\"y\":[3,4]}");
  // Untagged text (mpirun's own messages) is member -1.
  auto untagged = demux->Take("mpirun noticed that process rank 0 exited");
  ASSERT_EQ(untagged.size(), 1u);
  EXPECT_EQ(untagged[0].member, -1);
}

// srun labels each 1024-byte chunk of a long line as a line of its own and ends the line with
// a shorter chunk (an empty one after 1024 x k bytes); tasks' chunks may interleave.
TEST(SrunLabelDemuxTest, ChunksOfALongLineAreJoinedPerTask) {
  auto demux = SrunLabelDemux();
  const std::string a(3000, 'a'), b(1024, 'b');
  EXPECT_TRUE(demux->Take("1: " + a.substr(0, 1024)).empty());
  EXPECT_TRUE(demux->Take(" 0: " + b).empty());
  EXPECT_TRUE(demux->Take("1: " + a.substr(1024, 1024)).empty());
  auto short_line = demux->Take("12: short");
  ASSERT_EQ(short_line.size(), 1u);
  EXPECT_EQ(short_line[0].member, 12);
  EXPECT_EQ(short_line[0].text, "short");
  auto first = demux->Take("1: " + a.substr(2048));
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].member, 1);
  EXPECT_EQ(first[0].text, a);
  auto second = demux->Take(" 0: ");  // ends a line of exactly 1024 bytes
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].member, 0);
  EXPECT_EQ(second[0].text, b);
  auto own = demux->Take("srun: error: node1: task 1: Killed");
  ASSERT_EQ(own.size(), 1u);
  EXPECT_EQ(own[0].member, -1);
  EXPECT_EQ(own[0].text, "srun: error: node1: task 1: Killed");
  EXPECT_TRUE(demux->Flush().empty());
}

// What is left of a line when the launcher's output ends is passed on, not lost.
TEST(SrunLabelDemuxTest, AHeldChunkIsPassedOnAtTheEnd) {
  auto demux = SrunLabelDemux();
  EXPECT_TRUE(demux->Take("3: " + std::string(1024, 'x')).empty());
  auto left = demux->Flush();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].member, 3);
  EXPECT_EQ(left[0].text, std::string(1024, 'x'));
  EXPECT_TRUE(demux->Flush().empty());
}

// srun labels a task's stderr as it does its stdout; read from srun's stderr apart, a stderr
// line that comes between two chunks of a long stdout line does not end up inside it.
TEST(SrunLabelDemuxTest, AStderrLineBetweenChunksStaysApart) {
  auto demux = SrunLabelDemux();
  const std::string record = "{" + std::string(1500, 'r') + "}";
  EXPECT_TRUE(demux->Take("0: " + record.substr(0, 1024)).empty());
  auto err = demux->TakeStderr("0: a warning");
  ASSERT_EQ(err.size(), 1u);
  EXPECT_EQ(err[0].member, 0);
  EXPECT_TRUE(err[0].from_stderr);
  EXPECT_EQ(err[0].text, "a warning");
  auto own = demux->TakeStderr("srun: error: node1: task 1: Exited with exit code 1");
  ASSERT_EQ(own.size(), 1u);
  EXPECT_EQ(own[0].member, -1);
  EXPECT_TRUE(demux->TakeStderr("0: " + std::string(1024, 'e')).empty());  // a long stderr line
  auto whole = demux->Take("0: " + record.substr(1024));
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].member, 0);
  EXPECT_FALSE(whole[0].from_stderr);
  EXPECT_EQ(whole[0].text, record);
  auto left = demux->Flush();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_TRUE(left[0].from_stderr);
  EXPECT_EQ(left[0].text, std::string(1024, 'e'));
}

// A child read on two pipes: each line says where it came from, and the rest of an
// unterminated last line is passed on before the end.
TEST(ChildProcessTest, ReadsStdoutAndStderrApart) {
  auto child = ChildProcess::Start(
      "sh", {"/bin/sh", "-c", "echo out1; echo err1 >&2; echo out2; printf err-tail >&2; printf out-tail"},
      {.capture_stdout = true, .capture_stderr = true});
  ASSERT_TRUE(child.ok()) << child.status();
  std::vector<std::string> out, err;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (true) {
    auto line = child->ReadOutput(deadline);
    if (!line.ok()) {
      EXPECT_EQ(line.status().code(), absl::StatusCode::kUnavailable) << line.status();
      break;
    }
    (line->from_stderr ? err : out).push_back(line->text);
  }
  EXPECT_THAT(out, ::testing::ElementsAre("out1", "out2", "out-tail"));
  EXPECT_THAT(err, ::testing::ElementsAre("err1", "err-tail"));
  EXPECT_EQ(child->Stop(SIGTERM, absl::Seconds(5)), 0);
}

// A child that closes its stdout still has its stderr read to the end.
TEST(ChildProcessTest, StderrIsReadAfterStdoutCloses) {
  auto child = ChildProcess::Start("sh", {"/bin/sh", "-c", "echo out; exec 1>&-; sleep 0.2; echo late >&2"},
                                   {.capture_stdout = true, .capture_stderr = true});
  ASSERT_TRUE(child.ok()) << child.status();
  std::vector<std::pair<std::string, bool>> lines;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (auto line = child->ReadOutput(deadline); line.ok(); line = child->ReadOutput(deadline)) {
    lines.emplace_back(line->text, line->from_stderr);
  }
  EXPECT_THAT(lines, ::testing::ElementsAre(std::pair<std::string, bool>{"out", false},
                                            std::pair<std::string, bool>{"late", true}));
}

// A launcher that holds its members' stdin (srun's PS step) is stopped by its end first: it
// exits as told, with its own status, and no signal is sent while it does.
TEST(LauncherGroupTest, StopClosesStdinBeforeSignalling) {
  auto child = ChildProcess::Start("sh", {"/bin/sh", "-c", "trap 'exit 9' TERM; cat >/dev/null; echo bye; exit 0"},
                                   {.capture_stdout = true, .hold_stdin = true});
  ASSERT_TRUE(child.ok()) << child.status();
  auto group = GroupBehindLauncher(*std::move(child), SrunLabelDemux(), {"PS 0"});
  const absl::Time start = absl::Now();
  EXPECT_EQ(group->Stop(SIGTERM, absl::Seconds(20)), 0);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "waited out the polite half";
  auto line = group->ReadLine(absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(line.ok()) << line.status();
  ASSERT_TRUE(line->has_value());
  EXPECT_EQ((*line)->text, "bye");
}

TEST(MpirunTagDemuxTest, APartialLineIsPassedOnAtTheEnd) {
  auto demux = MpirunTagDemux();
  EXPECT_TRUE(demux->Take("[1,2]<stderr>:partial[1,0]<stdout>:whole").size() == 1);
  auto left = demux->Flush();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].member, 2);
  EXPECT_TRUE(left[0].from_stderr);
  EXPECT_EQ(left[0].text, "partial");
}

TEST(SrunTaskExitsTest, SignalsExitCodesAndRanges) {
  using Exits = std::vector<std::pair<int, int>>;
  EXPECT_EQ(SrunTaskExits("srun: error: node1: task 1: Killed"), (Exits{{1, kKilledBySignal + SIGKILL}}));
  EXPECT_EQ(SrunTaskExits("srun: error: n2: task 3: Segmentation fault (core dumped)"),
            (Exits{{3, kKilledBySignal + SIGSEGV}}));
  EXPECT_EQ(SrunTaskExits("srun: error: n2: tasks 0-2,5: Exited with exit code 3"),
            (Exits{{0, 3}, {1, 3}, {2, 3}, {5, 3}}));
  // srun's other messages, and a task's own output, are not task exits.
  EXPECT_EQ(SrunTaskExits("srun: error: Unable to create step for job 12: Invalid generic resource"), Exits{});
  EXPECT_EQ(SrunTaskExits("srun: Job step aborted: Waiting up to 32 seconds for job step to finish."), Exits{});
  EXPECT_EQ(SrunTaskExits("1: task 1: Killed"), Exits{});
}

// Under mpirun each worker runs inside a shell that reports its end on the rank's stderr.
TEST(RankExitsTest, ReadsOnlyTheWrappersLine) {
  using Exits = std::vector<std::pair<int, int>>;
  std::vector<std::string> argv = ReportingRank({"/bin/psbench-worker", "--quiet"});
  ASSERT_EQ(argv.size(), 6u);
  EXPECT_EQ(argv[0], "/bin/sh");
  EXPECT_EQ(argv[4], "/bin/psbench-worker");
  EXPECT_EQ(argv[5], "--quiet");
  // The shell's 128 + N is a signal (psbench's programs exit 0-2); low statuses are exits.
  EXPECT_EQ(RankExits({2, "psbench-rank-exit 137", true}), (Exits{{2, kKilledBySignal + SIGKILL}}));
  EXPECT_EQ(RankExits({0, "psbench-rank-exit 0", true}), (Exits{{0, 0}}));
  EXPECT_EQ(RankExits({1, "psbench-rank-exit 2", true}), (Exits{{1, 2}}));
  // On stdout, untagged, malformed or out of range: the member's own text.
  EXPECT_EQ(RankExits({2, "psbench-rank-exit 137", false}), Exits{});
  EXPECT_EQ(RankExits({-1, "psbench-rank-exit 137", true}), Exits{});
  EXPECT_EQ(RankExits({1, "psbench-rank-exit x", true}), Exits{});
  EXPECT_EQ(RankExits({1, "psbench-rank-exit 300", true}), Exits{});
}

// Real processes on the local launcher: a member's "#fatal CODE MESSAGE" line is kept as its
// last words, not passed on; statuses say exits and signals apart, 255 included.
TEST(LocalGroupTest, KeepsLastWordsAndTellsExitsFromSignals) {
  auto launcher = MakeLocalLauncher(4);
  auto group = launcher->Start(
      "workers", {{"localhost", {"/bin/sh", "-c", "echo out; echo '#fatal 2 --x=1: bad input'; exit 2"}, "worker 0"},
                  {"localhost", {"/bin/sh", "-c", "echo fine"}, "worker 1"},
                  {"localhost", {"/bin/sh", "-c", "exit 255"}, "worker 2"},
                  {"localhost", {"/bin/sh", "-c", "kill -9 $$"}, "worker 3"}});
  ASSERT_TRUE(group.ok()) << group.status();
  ProcessGroup& g = **group;
  std::vector<std::string> lines;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    auto line = g.ReadLine(deadline);
    ASSERT_TRUE(line.ok()) << line.status();
    if (!line->has_value()) break;
    lines.push_back((*line)->text);
  }
  EXPECT_THAT(lines, ::testing::UnorderedElementsAre("out", "fine"));
  std::optional<int> worst;
  while (!(worst = g.Poll()) && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_TRUE(worst.has_value());
  EXPECT_EQ(*worst, kKilledBySignal + SIGKILL);
  ASSERT_TRUE(g.FatalOf(0).has_value());
  EXPECT_EQ(g.FatalOf(0)->code, 2);
  EXPECT_EQ(g.FatalOf(0)->message, "--x=1: bad input");
  EXPECT_FALSE(g.FatalOf(1).has_value());
  EXPECT_EQ(g.FirstFatalMember(), 0);
  EXPECT_EQ(g.MemberStatus(0), 2);
  EXPECT_EQ(g.DescribeStatus(2), "exited with status 2");
  EXPECT_EQ(g.MemberStatus(2), 255);
  EXPECT_EQ(g.DescribeStatus(255), "exited with status 255");
  EXPECT_EQ(g.MemberStatus(3), kKilledBySignal + SIGKILL);
  EXPECT_EQ(g.DescribeStatus(kKilledBySignal + SIGKILL), "killed by SIGKILL");
}

TEST(ShellQuoteTest, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(ShellQuote("--listen=ib0"), "--listen=ib0");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("$(rm -rf /)"), "'$(rm -rf /)'");
}

}  // namespace
}  // namespace psbench
