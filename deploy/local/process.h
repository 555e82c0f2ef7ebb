// Child processes for the one-machine launcher: started with a pipe on stdout, killed with
// the launcher (PR_SET_PDEATHSIG), reaped without blocking.
#ifndef PSBENCH_DEPLOY_LOCAL_PROCESS_H_
#define PSBENCH_DEPLOY_LOCAL_PROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace psbench {

class ChildProcess {
 public:
  // Starts argv[0] (a path) with `argv`. stdout goes to a pipe when capture_stdout, else
  // it is inherited; stderr is inherited. With `log_file`, stdout and stderr both go to
  // that file instead (for a launcher whose output is read once it is done).
  static absl::StatusOr<ChildProcess> Start(const std::string& name,
                                            const std::vector<std::string>& argv,
                                            bool capture_stdout,
                                            const std::string& log_file = "");
  ChildProcess(ChildProcess&&) noexcept;
  ChildProcess& operator=(ChildProcess&&) noexcept;
  ~ChildProcess();  // kills and reaps a child still running

  const std::string& name() const { return name_; }
  pid_t pid() const { return pid_; }

  // Reads one line from the child's stdout, waiting at most until `deadline`.
  absl::StatusOr<std::string> ReadLine(absl::Time deadline);
  // Non-blocking: the exit status (128+signal for a signal) once the child has exited.
  std::optional<int> Poll();
  // Sends `sig`; if the child is still there after `grace`, SIGKILL. Returns its status.
  int Stop(int sig, absl::Duration grace);

  // A readable description of an exit status: "exited with status 1", "killed by SIGKILL".
  static std::string Describe(int status);

 private:
  ChildProcess() = default;
  std::string name_;
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffered_;
  std::optional<int> status_;
};

// Makes this process the reaper of its orphaned descendants (PR_SET_CHILD_SUBREAPER), so
// ranks whose launcher died come back to us instead of to init.
void AdoptOrphans();

// Reaps every child left once the tracked ones are done: waits up to `grace` for them to
// exit (ranks killed by PR_SET_PDEATHSIG still need a moment to tear down), then SIGKILLs
// and reaps what remains, so the launcher never exits while a process of its run lives.
// Returns how many were reaped.
int ReapOrphans(absl::Duration grace);

}  // namespace psbench

#endif  // PSBENCH_DEPLOY_LOCAL_PROCESS_H_
