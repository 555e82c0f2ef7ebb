// Child processes of a launcher: started with a pipe on stdout (and on stderr, or stdin, when
// asked), killed with the launcher (PR_SET_PDEATHSIG), reaped without blocking.
#ifndef PSBENCH_CLI_LAUNCH_PROCESS_H_
#define PSBENCH_CLI_LAUNCH_PROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace psbench {

// Exit statuses as the launchers keep them: 0-255 is the exit code, kKilledBySignal + N is
// signal N. (The shell's 128 + N cannot tell a signal from an exit code above 128, such as
// the 255 of an ssh that could not connect.)
inline constexpr int kKilledBySignal = 256;

class ChildProcess {
 public:
  struct Io {
    bool capture_stdout = false;  // stdout to a pipe read with ReadLine; else inherited
    // stdin from a pipe held open until this object goes (or we die): a remote launcher's
    // processes (ssh) see its end and exit; else stdin is /dev/null
    bool hold_stdin = false;
    // stderr into the stdout pipe as well (a launcher such as mpirun whose own messages name
    // the rank that failed; capture_stdout only)
    bool stderr_to_stdout = false;
    // stderr to a pipe of its own, read with ReadOutput (a launcher such as srun that forwards
    // its tasks' stdout and stderr alike: merged, a stderr line could fall inside a long
    // stdout line); capture_stdout only
    bool capture_stderr = false;
  };
  // A line of the child's output, and which pipe it came on.
  struct Output {
    std::string text;
    bool from_stderr = false;
  };
  // Starts argv[0] (a path, or a name looked up in PATH) with `argv`; stderr is inherited
  // unless `io` says otherwise.
  static absl::StatusOr<ChildProcess> Start(const std::string& name,
                                            const std::vector<std::string>& argv, const Io& io);
  ChildProcess(ChildProcess&&) noexcept;
  ChildProcess& operator=(ChildProcess&&) noexcept;
  ~ChildProcess();  // kills and reaps a child still running

  const std::string& name() const { return name_; }
  pid_t pid() const { return pid_; }
  // For poll() over several children (whose stderr is not captured: ReadOutput polls both).
  int stdout_fd() const { return stdout_fd_; }
  // Lines already read, waiting in a buffer (poll() cannot see them).
  bool HasBufferedLine() const {
    return buffered_.find('\n') != std::string::npos || stderr_buffered_.find('\n') != std::string::npos;
  }

  // Reads one line from the child's stdout, waiting at most until `deadline`. Unavailable
  // once its stdout (and a captured stderr) is closed (the rest of an unterminated last line
  // comes as a line first).
  // With Io::capture_stderr, stderr's lines come too: ReadOutput tells them apart.
  absl::StatusOr<std::string> ReadLine(absl::Time deadline);
  // ReadLine, saying which pipe each line came on; Unavailable once both are closed.
  absl::StatusOr<Output> ReadOutput(absl::Time deadline);
  // Non-blocking: the exit status (kKilledBySignal + N for signal N) once the child has exited.
  std::optional<int> Poll();
  // Closes the pipe on the child's stdin (Io::hold_stdin): a child that exits at the end of
  // its input (psbench-ps --exit-on-stdin-close over ssh, or behind srun) stops cleanly. False when it had
  // no such pipe (or it is closed already).
  bool CloseStdin();
  // Sends `sig`; if the child is still there after `grace`, SIGKILL. Returns its status.
  int Stop(int sig, absl::Duration grace);

  // A readable description of an exit status: "exited with status 1", "killed by SIGKILL".
  // A SIGKILL after the kernel's out-of-memory killer has struck on this host since the
  // first child started says so: "killed by SIGKILL (the kernel's out-of-memory killer ...)".
  static std::string Describe(int status);

 private:
  ChildProcess() = default;
  std::string name_;
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int stdin_fd_ = -1;
  int stderr_fd_ = -1;
  std::string buffered_, stderr_buffered_;
  bool stdout_ended_ = false, stderr_ended_ = false;
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

// OK when the command a launcher flag names (its first word) can be run here: a path to an
// executable file, or a name found on $PATH; else INVALID_ARGUMENT naming the flag, e.g.
// "--mpirun=/opt/mpi/bin/mpirun: no such program (hint)".
absl::Status CheckProgramFlag(const std::string& flag, const std::string& command,
                              const std::string& hint);

}  // namespace psbench

#endif  // PSBENCH_CLI_LAUNCH_PROCESS_H_
