// Which flags mean something for a run. A flag given on the command line that would change
// nothing about what the run does (--mode on a transport without wire modes, --window with
// latency, --batch without --trainer) is refused with one line saying where it applies,
// rather than accepted and silently dropped, or worse, recorded as if it had mattered.
#ifndef PSBENCH_BENCH_FLAG_SCOPE_H_
#define PSBENCH_BENCH_FLAG_SCOPE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/scenario.h"

namespace psbench {

// What a run does, as far as flags are concerned.
struct RunShape {
  enum class Kind {
    kTour,       // psbench run with no --benchmark: latency, bandwidth and throughput
    kBenchmark,  // one payload benchmark (`benchmark`)
    kUpdates,    // --benchmark=updates
    kTraining,   // --trainer
  };
  Kind kind = Kind::kBenchmark;
  Benchmark benchmark = Benchmark::kLatency;
  // Every transport the run uses (several with --transports).
  std::vector<std::string> transports;
  // Every payload scheme it runs (the tour runs uniform, random and skew unless given one).
  std::vector<Scheme> schemes;
};

// The shape of a run of `s` (kind from s.benchmark; `training` for --trainer; `tour` for
// psbench run without --benchmark).
RunShape ShapeOf(const Scenario& s, bool training, bool tour = false);

// INVALID_ARGUMENT naming the first flag set (FlagWasSet) that has no effect on `shape`.
absl::Status CheckFlagsApply(const RunShape& shape);
// The part that depends on the transports only (--mode, --rdma-*, the data-plane threads),
// for psbench-ps too, whose data-plane threads flag is --threads (psbench's: --ps-threads).
absl::Status CheckTransportFlagsApply(const std::vector<std::string>& transports,
                                      const std::string& threads_flag = "ps-threads");

}  // namespace psbench

#endif  // PSBENCH_BENCH_FLAG_SCOPE_H_
