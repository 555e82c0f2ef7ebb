// Cluster launchers: where PS and worker processes can run (slots, in order) and how a group
// of them is started there: over ssh (a host list such as $PBS_NODEFILE), with srun inside a
// Slurm allocation, or with mpirun. They only run the psbench-ps and psbench-worker binaries.
#ifndef PSBENCH_DEPLOY_CLUSTER_LAUNCHERS_H_
#define PSBENCH_DEPLOY_CLUSTER_LAUNCHERS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "deploy/cluster/process_group.h"

namespace psbench {

class ClusterLauncher {
 public:
  virtual ~ClusterLauncher() = default;
  virtual std::string name() const = 0;  // "ssh", "slurm", "mpirun"
  // One process per slot, in order: the PS take the first slots, the workers the next ones.
  virtual const std::vector<std::string>& slots() const = 0;
  // Starts argvs[i] on hosts[i] (argv[0] is a path valid on that host). `role` ("PS",
  // "worker", "job") names the group in messages and file names.
  virtual absl::StatusOr<std::unique_ptr<ProcessGroup>> Start(
      const std::string& role, const std::vector<std::string>& hosts,
      const std::vector<std::vector<std::string>>& argvs) = 0;
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

// `ssh` is the client command, split on spaces (e.g. "ssh -p 2222 -i key -o BatchMode=yes").
absl::StatusOr<std::unique_ptr<ClusterLauncher>> MakeSshLauncher(std::vector<std::string> slots,
                                                                  const std::string& ssh);
// Inside an allocation (SLURM_JOB_ID): slots from SLURM_JOB_NODELIST and
// SLURM_TASKS_PER_NODE. `work_dir` holds the --multi-prog files srun reads.
absl::StatusOr<std::unique_ptr<ClusterLauncher>> MakeSlurmLauncher(
    const std::string& srun, const std::vector<std::string>& srun_args, const std::string& work_dir);
absl::StatusOr<std::unique_ptr<ClusterLauncher>> MakeMpirunLauncher(
    std::vector<std::string> slots, const std::string& mpirun,
    const std::vector<std::string>& mpirun_args);

// Reassembles Open MPI's --tag-output stream into each rank's lines (exposed for its test).
std::function<std::vector<ProcessGroup::Line>(const std::string&)> MpirunTagDemux();

// Quotes `word` for a POSIX shell (ssh runs the remote command through the login shell).
std::string ShellQuote(const std::string& word);

}  // namespace psbench

#endif  // PSBENCH_DEPLOY_CLUSTER_LAUNCHERS_H_
