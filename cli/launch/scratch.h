// A private directory for one psbench's working files, under $TMPDIR (else /tmp), named
// psbench-scratch-WHAT.XXXXXX and removed when psbench is done with it. psbench holds a lock on it
// (flock) while it lives, which the kernel releases however psbench ends: one left behind by a
// psbench killed with SIGKILL is removed by the next psbench that starts (SweepStaleScratch).
#ifndef PSBENCH_CLI_LAUNCH_SCRATCH_H_
#define PSBENCH_CLI_LAUNCH_SCRATCH_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psbench {

class ScratchDir {
 public:
  // `what` is a short word naming the user ("cluster", "floor").
  static absl::StatusOr<std::unique_ptr<ScratchDir>> Create(absl::string_view what);
  ~ScratchDir();  // removes the directory and everything in it
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  ScratchDir(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;  // the directory, locked
};

// $TMPDIR when set and not empty, else /tmp.
std::string TempRoot();

// Removes the scratch directories of psbench processes that are gone (their lock is free),
// this user's only. Returns how many it removed.
int SweepStaleScratch();

}  // namespace psbench

#endif  // PSBENCH_CLI_LAUNCH_SCRATCH_H_
