// Launchers: where PS and worker processes can run (slots, in order) and how a group of them
// is started there: on this machine (local), over ssh (a host list such as $PBS_NODEFILE),
// with srun inside a Slurm allocation, or with mpirun. They only run the psbench-ps and
// psbench-worker binaries; the driver (cli/launch/job.h) is the same for all of them.
#ifndef PSBENCH_CLI_LAUNCH_LAUNCHERS_H_
#define PSBENCH_CLI_LAUNCH_LAUNCHERS_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/launch/process_group.h"

namespace psbench {

// One process to start: where, what, and how messages name it ("PS 0", "worker 3").
struct LaunchMember {
  std::string host;
  std::vector<std::string> argv;  // argv[0] is a path valid on `host`
  std::string name;
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual std::string name() const = 0;  // "local", "ssh", "slurm", "mpirun"
  // One process per slot, in order: the PS take the first slots, the workers the next ones.
  virtual const std::vector<std::string>& slots() const = 0;
  // Starts every member as one group. `step` ("ps", "workers", "job") names the group in
  // messages and file names.
  virtual absl::StatusOr<std::unique_ptr<ProcessGroup>> Start(
      const std::string& step, const std::vector<LaunchMember>& members) = 0;
  // Whether it can start anything here (mpirun: the launcher is an executable); the one
  // line that says why not.
  virtual absl::Status Check() const { return absl::OkStatus(); }
  // Flags every psbench-ps and psbench-worker gets under this launcher.
  virtual std::vector<std::string> ProcessFlags() const { return {}; }
  // Whether one Start makes one MPI job of all its processes (what grpc+mpi needs).
  virtual bool StartsMpiJobs() const { return false; }
};

// A host list: one host per line, a host once per slot ($PBS_NODEFILE), or "HOST slots=N"
// (an Open MPI hostfile); "#" starts a comment. Errors name the file and line.
absl::StatusOr<std::vector<std::string>> ReadHostFile(const std::string& path);

// Splits "2(x3),1" (SLURM_TASKS_PER_NODE) into tasks per node: {2, 2, 2, 1}.
absl::StatusOr<std::vector<int>> ParseSlurmTasksPerNode(const std::string& text);

// This machine, `slots` processes at most: each member a child process (fork/exec).
std::unique_ptr<Launcher> MakeLocalLauncher(int slots);

// `ssh` is the client command, split on spaces (e.g. "ssh -p 2222 -i key -o BatchMode=yes").
absl::StatusOr<std::unique_ptr<Launcher>> MakeSshLauncher(std::vector<std::string> slots,
                                                                  const std::string& ssh);
// Inside an allocation (SLURM_JOB_ID): slots from SLURM_JOB_NODELIST and
// SLURM_TASKS_PER_NODE. `work_dir` holds the --multi-prog files srun reads.
absl::StatusOr<std::unique_ptr<Launcher>> MakeSlurmLauncher(
    const std::string& srun, const std::vector<std::string>& srun_args, const std::string& work_dir);
absl::StatusOr<std::unique_ptr<Launcher>> MakeMpirunLauncher(
    std::vector<std::string> slots, const std::string& mpirun,
    const std::vector<std::string>& mpirun_args);

// The rank that mpirun's own output names as the cause of a failed job, and what happened
// to it ("exited on signal 9 (Killed)"); nullopt when it names none below `ranks`.
std::optional<ProcessGroup::Failure> FailedRankFromMpirunOutput(const std::string& text, int ranks);

// The tasks that srun's own output line reports as ended badly, with kKilledBySignal + signal
// or the exit code: "srun: error: node1: task 1: Killed" -> {(1, 265)}; none for any other line.
std::vector<std::pair<int, int>> SrunTaskExits(const std::string& line);

// Under mpirun, each worker runs as `ReportingRank(argv)`: a shell that runs it, prints how
// it ended on its stderr and exits 0, so that Open MPI does not end the other workers.
// `RankExits` reads that line back: {(rank, exit status or kKilledBySignal + signal)}; none
// for any other.
std::vector<std::string> ReportingRank(const std::vector<std::string>& argv);
std::vector<std::pair<int, int>> RankExits(const ProcessGroup::Line& line);

// Quotes `word` for a POSIX shell (ssh runs the remote command through the login shell).
std::string ShellQuote(const std::string& word);

}  // namespace psbench

#endif  // PSBENCH_CLI_LAUNCH_LAUNCHERS_H_
