// Running a command on a real pseudo-terminal (forkpty), for what psbench draws only when its
// output is a terminal: the live status line.
#ifndef PSBENCH_TESTS_INTEGRATION_PTY_RUN_H_
#define PSBENCH_TESTS_INTEGRATION_PTY_RUN_H_

#include <csignal>
#include <optional>
#include <string>
#include <vector>

#include "tests/integration/run_helpers.h"

namespace psbench::testing {

// What the status line clears a terminal line with.
inline constexpr char kClear[] = "\r\033[K";

struct PtyResult {
  int exit_code = -1;
  bool timed_out = false;
  std::string out;  // everything written to the terminal (stdout and stderr)
};

// Sends `sig` to the command once what it wrote to the terminal contains `when`.
struct PtySignal {
  std::string when;
  int sig = SIGTERM;
};

// Runs argv on a fresh pseudo-terminal 160 columns wide; kills it after `timeout`.
PtyResult RunOnPty(const Argv& argv, milliseconds timeout, std::optional<PtySignal> signal = std::nullopt);

// What stays visible of each terminal line: the text after its last clear or carriage
// return (the terminal adds \r to every \n).
std::vector<std::string> VisibleLines(const std::string& out);

}  // namespace psbench::testing

#endif  // PSBENCH_TESTS_INTEGRATION_PTY_RUN_H_
