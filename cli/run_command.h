// `psbench run`: PS and workers on this machine (cli/run_command.cc).
#ifndef PSBENCH_CLI_RUN_COMMAND_H_
#define PSBENCH_CLI_RUN_COMMAND_H_

#include <string>

namespace psbench {

// Parses its flags (argv[1] is "run") and runs; `bin_dir` holds psbench-ps and
// psbench-worker. Returns the exit status (0 success, 1 a run failed, 2 bad input).
int RunRunCommand(int argc, char** argv, const std::string& bin_dir);

}  // namespace psbench

#endif  // PSBENCH_CLI_RUN_COMMAND_H_
