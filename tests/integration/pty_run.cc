#include "tests/integration/pty_run.h"

#include <poll.h>
#include <pty.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include <gtest/gtest.h>

namespace psbench::testing {

PtyResult RunOnPty(const Argv& argv, milliseconds timeout, std::optional<PtySignal> signal) {
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
    if (signal && r.out.find(signal->when) != std::string::npos) {
      kill(pid, signal->sig);
      signal.reset();
    }
  }
  int st = 0;
  waitpid(pid, &st, 0);
  close(master);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

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

}  // namespace psbench::testing
