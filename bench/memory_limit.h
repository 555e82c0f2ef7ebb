// How much memory this process may use: the host's physical memory, or less where a cgroup
// limits it (a Slurm job with ConstrainRAMSpace, a container, a systemd slice). A worker sized
// by the host's memory alone is killed by the kernel's OOM killer mid-run inside such a
// limit, with no word of why; sized by this, it refuses the run at start with one line.
#ifndef PSBENCH_BENCH_MEMORY_LIMIT_H_
#define PSBENCH_BENCH_MEMORY_LIMIT_H_

#include <cstdint>
#include <string>

namespace psbench {

struct MemoryLimit {
  uint64_t bytes = 0;       // the smaller of the host's memory and every cgroup limit found
  uint64_t host_bytes = 0;  // physical memory
  // Where `bytes` comes from: "host", or the cgroup whose limit it is, e.g.
  // "cgroup v2 /system.slice/slurmstepd.scope/job_12" or "cgroup v1 memory /job_12".
  std::string source;
};

// Reads /proc/self/cgroup and /proc/self/mountinfo under `root` ("/" on a real system; a
// test points it at a tree of its own) and the limit files of this process's cgroup and of
// every cgroup above it, v2 (memory.max) and v1 (memory.limit_in_bytes) alike. What cannot be
// read or parsed is no limit: the host's memory then stands. This process's own (the
// defaults) is read once and kept.
MemoryLimit ProcessMemoryLimit(const std::string& root = "/", uint64_t host_bytes = 0);

}  // namespace psbench

#endif  // PSBENCH_BENCH_MEMORY_LIMIT_H_
