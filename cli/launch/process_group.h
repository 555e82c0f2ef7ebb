// Processes a launcher started together (every PS, every worker, or one MPI job of both),
// whose stdout comes back as lines tagged with the member's index: one child (local) or ssh
// client per member, or one srun / mpirun whose output carries each task's rank.
#ifndef PSBENCH_CLI_LAUNCH_PROCESS_GROUP_H_
#define PSBENCH_CLI_LAUNCH_PROCESS_GROUP_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/launch/process.h"

namespace psbench {

class ProcessGroup {
 public:
  struct Line {
    int member = -1;  // -1: the launcher's own output, not one member's
    std::string text;
    bool from_stderr = false;  // a member's stderr, which the launcher tagged or kept apart
  };
  // A member that failed, and how ("exited with status 1", "exited on signal 9 (Killed)").
  struct Failure {
    int member = -1;
    std::string what;
  };
  // A member's last words: psbench-ps and psbench-worker with --fatal-line print their fatal
  // error on stdout as "#fatal CODE MESSAGE" (bench/cli.h), where every launcher brings it
  // back; it is kept here, not passed on as a line.
  struct Fatal {
    int code = 0;
    std::string message;
  };

  virtual ~ProcessGroup() = default;

  // The next line of any member, waiting at most until `deadline` (DeadlineExceeded).
  // nullopt once every pipe the group reads (every member's stdout; a launcher's stderr where
  // it is read apart) has closed.
  virtual absl::StatusOr<std::optional<Line>> ReadLine(absl::Time deadline) = 0;
  // Once every process of the group has exited: the worst exit status (kKilledBySignal +
  // signal for a signal); which member failed, when the launcher can tell, is in
  // FailedMember().
  virtual std::optional<int> Poll() = 0;
  virtual std::optional<Failure> FailedMember() const = 0;
  // Member i's exit status once it has exited, where members are processes of their own
  // (local, ssh) or the launcher reports each (the worker steps of srun and mpirun, which run
  // on when one fails); nullopt while it runs, or always where the launcher ends the whole job
  // at the first failure (the PS steps and MPI jobs of srun and mpirun).
  virtual std::optional<int> MemberStatus(size_t i) { return std::nullopt; }
  // How messages name member i: "worker 1 (pid 4711)", "PS 0 on node2 (pid 812)".
  virtual std::string MemberName(size_t i) const = 0;
  // Sends `sig` to the group's processes, SIGKILL after `grace`; returns the worst status.
  virtual int Stop(int sig, absl::Duration grace) = 0;
  // Whether Stop's status is the members' own: srun and mpirun report their own ending
  // (non-zero when told to stop), ssh passes on the remote process's.
  virtual bool StopStatusIsMembers() const = 0;

  // How a member that ended with `status` ended ("exited with status 1", "killed by SIGKILL",
  // ssh's 255 said as such).
  virtual std::string DescribeStatus(int status) const { return ChildProcess::Describe(status); }

  // Member i's fatal line, once read (ReadLine takes it in).
  const std::optional<Fatal>& FatalOf(size_t i) const;
  // The first member whose fatal line came in, or -1.
  int FirstFatalMember() const { return first_fatal_; }

 protected:
  // Keeps `line` when it is a member's fatal line; true if so (it is then not passed on).
  bool KeepFatal(const Line& line);

 private:
  std::vector<std::optional<Fatal>> fatal_;
  int first_fatal_ = -1;
};

// Every member is a process of its own (local children, ssh clients); ChildProcess::name()
// names it. `describe` says how one ended, from its exit status (ChildProcess::Describe when
// null: an ssh client has its own meaning for 255).
using StatusDescriber = std::function<std::string(int)>;
std::unique_ptr<ProcessGroup> GroupOfChildren(std::vector<ChildProcess> children,
                                              StatusDescriber describe = nullptr);

// What a launcher that runs many members behind one pipe (srun --label, mpirun --tag-output)
// prints, split back into each member's complete lines (cli/launch/demux.h).
class Demux {
 public:
  virtual ~Demux() = default;
  // The lines that `line` of the launcher's output completes: none when it only continued
  // one; member -1 for the launcher's own words.
  virtual std::vector<ProcessGroup::Line> Take(const std::string& line) = 0;
  // The same for a line of the launcher's stderr, where it is read apart from its stdout
  // (srun's worker step): by default the launcher's own words.
  virtual std::vector<ProcessGroup::Line> TakeStderr(const std::string& line) { return {{-1, line}}; }
  // Once the launcher's output has ended: what is left of every member's line, as it is.
  virtual std::vector<ProcessGroup::Line> Flush() = 0;
};

// One launcher process whose stdout (and stderr, where ChildProcess::Io::capture_stderr keeps
// it apart) carries each member's output tagged: `demux` turns what it prints into the
// members' lines.
// `name_failure`, when given, reads the launcher's own (untagged) output for the member
// that failed (mpirun names the rank).
// `member_exits`, when given, reads each line for members that ended and how: the launcher's
// own words (srun: "task 1: Killed") or a member's (the line a rank's wrapper prints under
// mpirun, which is then not passed on). MemberStatus then reports them, and 0 for the others
// once the launcher has exited; Poll and FailedMember count them too.
using FailureNamer = std::function<std::optional<ProcessGroup::Failure>(const std::string&)>;
using MemberExits = std::function<std::vector<std::pair<int, int>>(const ProcessGroup::Line&)>;
std::unique_ptr<ProcessGroup> GroupBehindLauncher(ChildProcess launcher, std::unique_ptr<Demux> demux,
                                                  std::vector<std::string> member_names,
                                                  FailureNamer name_failure = nullptr,
                                                  MemberExits member_exits = nullptr);

}  // namespace psbench

#endif  // PSBENCH_CLI_LAUNCH_PROCESS_GROUP_H_
