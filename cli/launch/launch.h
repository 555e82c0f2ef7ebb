// What every psbench launcher (psbench run on one machine; psbench ssh | slurm | mpirun on a
// cluster) needs around the processes it starts: a clean stop on SIGINT/SIGTERM, a bound on
// how long a run may take, and the workers' records merged into the run's results.
#ifndef PSBENCH_CLI_LAUNCH_LAUNCH_H_
#define PSBENCH_CLI_LAUNCH_LAUNCH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/scenario.h"
#include "bench/record.h"
#include "nlohmann/json.hpp"

namespace psbench {

// SIGINT, SIGTERM and SIGHUP set a flag the launcher polls (Interrupted()) so that it stops
// its processes itself; SIGPIPE is ignored.
void StopOnSignals();
bool Interrupted();
// CANCELLED "interrupted by SIGTERM", naming the first signal.
absl::Status InterruptedError();

// The exit status of a command whose run failed with `failure`: 128 + the signal when
// interrupted (130 for SIGINT),
// kExitUsage for bad input (INVALID_ARGUMENT, also when a PS or worker found it), else
// kExitRuntime.
int FailedRunExitCode(const absl::Status& failure);

// How long a run of `s` with `plans` measurements (payload plans x load points) against
// `num_ps` PS may take before the launcher calls it hung (--timeout overrides it).
absl::Duration RunBudget(const Scenario& s, size_t plans, size_t num_ps);

// Per-worker records (per_worker[w][p]: worker w's result for plan p) in the run's order:
// each plan's worker records, then, with `aggregate` (throughput), their total. `names[w]`
// says where worker w's records came from, for the error when it has not one per plan.
absl::StatusOr<std::vector<Record>> MergeWorkerRecords(
    std::vector<std::vector<Record>> per_worker, size_t plans, bool aggregate,
    const std::vector<std::string>& names);

// The end of a run that has its records: appends them to `json_path` (none when empty) and
// says where. Returns the exit status: 0, or kExitRuntime after one line on stderr naming
// `program` when the file could not take them.
int SaveRecords(const char* program, const std::string& json_path,
                const std::vector<Record>& records);

}  // namespace psbench

#endif  // PSBENCH_CLI_LAUNCH_LAUNCH_H_
