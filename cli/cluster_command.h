// `psbench ssh`, `psbench slurm` and `psbench mpirun`: one benchmark across cluster nodes.
// PS on the first --num-ps slots, workers on the next ones; the PS addresses they print go to
// the workers; every worker's records come back on its stdout and are gathered into one
// table and one JSON Lines file, as `psbench run` does on one machine.
#ifndef PSBENCH_CLI_CLUSTER_COMMAND_H_
#define PSBENCH_CLI_CLUSTER_COMMAND_H_

#include <string>

namespace psbench {

// True for the commands this handles (argv[1]).
bool IsClusterCommand(const std::string& command);

// Runs the command in argv[1]; `bin_dir` holds this psbench's binaries. Returns the exit
// status (0 success, 1 a process or measurement failed, 2 bad input).
int RunClusterCommand(int argc, char** argv, const std::string& bin_dir);

}  // namespace psbench

#endif  // PSBENCH_CLI_CLUSTER_COMMAND_H_
