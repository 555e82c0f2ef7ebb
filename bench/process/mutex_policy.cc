#include "bench/process/mutex_policy.h"

#include "absl/synchronization/mutex.h"

namespace psbench {
namespace {

bool& Off() {
  static bool off = false;
  return off;
}

}  // namespace

void TurnOffMutexDeadlockDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  Off() = true;
}

std::string MutexDeadlockDetection() { return Off() ? "off" : "library default"; }

}  // namespace psbench
