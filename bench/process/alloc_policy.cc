#include "bench/process/alloc_policy.h"

#include <malloc.h>

#include <cstdlib>
#include <string>

namespace psbench {
namespace {

// glibc's ceiling for M_MMAP_THRESHOLD on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX): 32 MiB.
constexpr int kMmapThreshold = 32 << 20;
// Freed memory at the top of the heap stays mapped up to this much.
constexpr int kTrimThreshold = 1 << 30;

nlohmann::json& Policy() {
  static nlohmann::json policy = {{"policy", "glibc default"}};
  return policy;
}

}  // namespace

void FixAllocatorPolicy() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::string(tunables).find("glibc.malloc.") != std::string::npos) {
    Policy() = {{"policy", "GLIBC_TUNABLES"}, {"tunables", tunables}};
    return;
  }
  // Setting either threshold also ends glibc's adjusting of both.
  if (mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1) {
    Policy() = {{"policy", "fixed"}, {"mmap_threshold", kMmapThreshold}, {"trim_threshold", kTrimThreshold}};
  } else {
    // Another allocator stands in for glibc's (a sanitizer's, or one preloaded).
    Policy() = {{"policy", "not fixed: mallopt refused"}};
  }
}

nlohmann::json AllocatorPolicy() { return Policy(); }

}  // namespace psbench
