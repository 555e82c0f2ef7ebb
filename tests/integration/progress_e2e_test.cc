// The live status line of psbench run and of a standalone psbench-worker, on a real
// pseudo-terminal (forkpty): it is drawn, redrawn in place, cleared before any table line,
// and absent when the output is a pipe or a file, or with --quiet.
#include <poll.h>
#include <pty.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"

namespace psbench::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kClear[] = "\r\033[K";

struct PtyResult {
  int exit_code = -1;
  bool timed_out = false;
  std::string out;  // everything written to the terminal (stdout and stderr)
};

// Runs argv on a fresh pseudo-terminal 160 columns wide; kills it after `timeout`.
PtyResult RunOnPty(const Argv& argv, milliseconds timeout) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  winsize ws{};
  ws.ws_col = 160;
  ws.ws_row = 50;
  int master = -1;
  pid_t parent = getpid();
  pid_t pid = forkpty(&master, nullptr, nullptr, &ws);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    execv(args[0], args.data());
    _exit(127);
  }
  PtyResult r;
  if (pid < 0) {
    ADD_FAILURE() << "forkpty: " << std::strerror(errno);
    return r;
  }
  auto deadline = Clock::now() + timeout;
  char buf[4096];
  while (true) {
    if (Clock::now() > deadline) {
      r.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd p{master, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    ssize_t n = read(master, buf, sizeof(buf));
    if (n <= 0) break;  // EIO: every process on the terminal has closed it
    r.out.append(buf, static_cast<size_t>(n));
  }
  int st = 0;
  waitpid(pid, &st, 0);
  close(master);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

// What stays visible of each terminal line: the text after its last clear or carriage
// return (the terminal adds \r to every \n).
std::vector<std::string> VisibleLines(const std::string& out) {
  std::vector<std::string> lines;
  for (std::string line : Lines(out)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (auto at = line.rfind('\r'); at != std::string::npos) line = line.substr(at + 1);
    if (line.rfind("\033[K", 0) == 0) line = line.substr(3);
    lines.push_back(line);
  }
  return lines;
}

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

TEST_F(ProgressTest, NoStatusLineWhenTheOutputIsNotATerminal) {
  RunResult r = RunCommand(RunArgv(kShort), seconds(90));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(r.err, "") << r.Describe();
  EXPECT_THAT(r.out, Not(HasSubstr("\r")));
  EXPECT_THAT(r.out, Not(HasSubstr("elapsed")));
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
