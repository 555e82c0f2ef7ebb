// How a process's large allocations behave, fixed at start-up. glibc's malloc serves blocks
// above an adaptive threshold (128 KiB at first) with fresh mmap'd pages and moves that
// threshold up as such blocks are freed, so whether a 1 MiB receive buffer costs page faults
// depends on the process's allocation history: two runs of one benchmark could differ by the
// allocator's state alone. psbench's processes and its floors fix the policy instead: blocks
// up to the largest threshold glibc accepts come from the heap and are reused, and freed
// memory is kept. A user who tunes malloc with GLIBC_TUNABLES keeps their tuning. Every record
// says which policy its process ran with.
#ifndef PSBENCH_BENCH_ALLOC_ALLOC_POLICY_H_
#define PSBENCH_BENCH_ALLOC_ALLOC_POLICY_H_

#include "nlohmann/json.hpp"

namespace psbench {

// Call first in main, before any thread starts.
void FixAllocatorPolicy();

// {"policy": "fixed", "mmap_threshold": B, "trim_threshold": B}, {"policy": "GLIBC_TUNABLES",
// "tunables": "..."}, {"policy": "not fixed: mallopt refused"} (another allocator stands in
// for glibc's), or {"policy": "glibc default"} before FixAllocatorPolicy.
nlohmann::json AllocatorPolicy();

}  // namespace psbench

#endif  // PSBENCH_BENCH_ALLOC_ALLOC_POLICY_H_
