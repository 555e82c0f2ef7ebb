// Processes a cluster launcher started together (every PS, or every worker), whose stdout
// comes back as lines tagged with the member's index: one ssh client per member, or one
// srun / mpirun whose output carries each task's rank.
#ifndef PSBENCH_DEPLOY_CLUSTER_PROCESS_GROUP_H_
#define PSBENCH_DEPLOY_CLUSTER_PROCESS_GROUP_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "deploy/local/process.h"

namespace psbench {

class ProcessGroup {
 public:
  struct Line {
    int member = -1;  // -1: the launcher's own output, not one member's
    std::string text;
  };

  virtual ~ProcessGroup() = default;

  // The next stdout line of any member, waiting at most until `deadline` (DeadlineExceeded).
  // nullopt once every member's stdout has closed.
  virtual absl::StatusOr<std::optional<Line>> ReadLine(absl::Time deadline) = 0;
  // Once every process of the group has exited: the worst exit status (128+signal for a
  // signal); which member failed, when the launcher can tell, is in FailedMember().
  virtual std::optional<int> Poll() = 0;
  virtual std::optional<int> FailedMember() const = 0;
  // Sends `sig` to the group's processes, SIGKILL after `grace`; returns the worst status.
  virtual int Stop(int sig, absl::Duration grace) = 0;
  // Whether Stop's status is the members' own: srun and mpirun report their own ending
  // (non-zero when told to stop), ssh passes on the remote process's.
  virtual bool StopStatusIsMembers() const = 0;
};

// Every member is a process of its own (ssh clients).
std::unique_ptr<ProcessGroup> GroupOfChildren(std::vector<ChildProcess> children);

// One launcher process (srun --label, mpirun --tag-output) whose stdout carries each
// member's output tagged: `demux` turns each line the launcher prints into the members'
// complete lines (none, when it only continued a line; member -1 for untagged text).
using Demux = std::function<std::vector<ProcessGroup::Line>(const std::string&)>;
std::unique_ptr<ProcessGroup> GroupBehindLauncher(ChildProcess launcher, Demux demux);

}  // namespace psbench

#endif  // PSBENCH_DEPLOY_CLUSTER_PROCESS_GROUP_H_
