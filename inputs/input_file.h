// Files the user names: read only when they are regular files of a bounded size, and never
// written over by the same invocation's outputs.
//
// A trace, scenario, report input or host file is read whole and parsed. Without bounds,
// /dev/zero grows until the process is killed, a FIFO waits forever for a writer, and a
// directory fails with a message about reading. Each input is checked before a byte is read.
#ifndef PSBENCH_INPUTS_INPUT_FILE_H_
#define PSBENCH_INPUTS_INPUT_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace psbench {

// The default cap on a text input (--max-input-size): far above any trace, scenario or
// results file psbench writes, far below what parsing it would make a problem.
inline constexpr uint64_t kDefaultMaxInputBytes = uint64_t{64} << 20;

// Reads `path` whole. `what` names the input in errors, a flag ("--hostfile": "--hostfile=PATH: ")
// or words ("trace file": "trace file 'PATH': "):
//   INVALID_ARGUMENT "WHAT 'PATH': is a FIFO, not a regular file" (also for directories,
//   devices, sockets: opened without blocking, so a FIFO is refused at once);
//   INVALID_ARGUMENT "WHAT 'PATH': is N bytes, over the M limit (raise it with
//   --max-input-size)" (`limit_flag` names the flag; empty for a fixed limit);
//   the open or read error (NOT_FOUND, PERMISSION_DENIED, ...) "WHAT 'PATH': cannot open: ...".
absl::StatusOr<std::string> ReadInputFile(const std::string& path, absl::string_view what,
                                          uint64_t max_bytes,
                                          absl::string_view limit_flag = "--max-input-size");

// An input of this invocation, for CheckOutputSpares.
struct NamedPath {
  std::string flag;  // as the user gave it: "--trace", "the report input"
  std::string path;
};

// INVALID_ARGUMENT naming both when `output` (written by `output_flag`) is the same file as one
// of `inputs`: by device and inode when it exists (a second name or a link is caught too),
// else by canonical path (two outputs of one invocation).
absl::Status CheckOutputSpares(absl::string_view output_flag, const std::string& output,
                               const std::vector<NamedPath>& inputs);

// How long an output that is a named pipe waits for a process to read it.
inline constexpr absl::Duration kFifoReaderWait = absl::Seconds(10);

// Opens output `path` as open(2) with O_WRONLY | O_CLOEXEC | `flags` (mode 0666 less the
// umask). A named pipe (mkfifo, or /dev/stdout into a pipe) is opened without blocking,
// waiting up to kFifoReaderWait for a reader: -1 with errno ENXIO when none came (open(2)
// would wait forever). The descriptor then blocks as any pipe's.
int OpenOutput(const std::string& path, int flags);

// OK when `path` can be written as output `flag` (checked before a run, so that a long run
// does not end in "cannot write"): an existing file is opened for append (nothing written or
// truncated), a named pipe is only checked for write permission (an open would hand a
// waiting reader its end of file), a path not there is created and removed. Else
// INVALID_ARGUMENT "FLAG=PATH: cannot write: REASON" ("Is a directory", "No such file or
// directory", ...).
absl::Status CheckOutputWritable(absl::string_view flag, const std::string& path);

// Writes all of `text` to `fd`, retrying short writes and EINTR: 0, or the errno that stopped
// it (ENOSPC for a write that took nothing).
int WriteAll(int fd, absl::string_view text);
// The same to a non-blocking fd (a named pipe), giving up with ETIMEDOUT once `stall` passes
// without a byte taken; *written says how much went.
int WriteAllWithin(int fd, absl::string_view text, absl::Duration stall, size_t* written);

// Writes `text` as the whole of output `path` (created or truncated; a named pipe waited on as
// by OpenOutput): INVALID_ARGUMENT "cannot write: WHY" when it cannot be opened (bad input),
// UNAVAILABLE "cannot write: WHY" when a write fails (a full disk: a runtime failure).
absl::Status WriteOutputFile(const std::string& path, absl::string_view text);

// Why OpenOutput(path) failed with `err`: "a named pipe no process reads (waited 10s for a
// reader)" for a named pipe's ENXIO, else strerror(err).
std::string OpenOutputError(const std::string& path, int err);

}  // namespace psbench

#endif  // PSBENCH_INPUTS_INPUT_FILE_H_
