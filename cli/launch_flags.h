// The flags of every command that launches PS and workers (psbench run, ssh, slurm, mpirun),
// declared once, in launch_flags.cc, and read through LaunchOptions.
#ifndef PSBENCH_CLI_LAUNCH_FLAGS_H_
#define PSBENCH_CLI_LAUNCH_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/launch/job.h"

namespace psbench {

inline constexpr char kLaunchFlagsFile[] = "/cli/launch_flags.cc";
// The workers one run starts, given (--num-workers) or derived from a host list's slots.
inline constexpr int kMaxWorkers = 256;

// The flags' values, checked: ranges, CPU lists, --tls-* and the PS limits. `command` is
// the psbench command line. num_workers is --num-workers as given (its default when not
// set; a cluster command fills it from its slots). `one_machine`: psbench run, whose PS and
// workers share this machine (the TLS certificate then names 127.0.0.1).
absl::StatusOr<LaunchOptions> LaunchOptionsFromFlags(const std::vector<std::string>& command, bool one_machine);

std::string JsonFlag();           // --json: where the records are appended ("" = nowhere)
std::string TransportsFlag();     // --transports, as given
std::string MpirunFlag();         // --mpirun: the MPI launcher
std::vector<std::string> MpirunArgsFlag();  // --mpirun-args, split on spaces

}  // namespace psbench

#endif  // PSBENCH_CLI_LAUNCH_FLAGS_H_
