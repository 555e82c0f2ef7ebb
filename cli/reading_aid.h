// The end of the default tour: what a newcomer needs to judge its figures. Under psbench run,
// the floors psbench ships (a plain TCP socket loop and the plain gRPC unary echo a user would
// write) run briefly now, on loopback with the tour's CPUs, for one message of each payload's
// size, and their figures stand beside the tour's; on a cluster, a pointer to running them.
#ifndef PSBENCH_CLI_READING_AID_H_
#define PSBENCH_CLI_READING_AID_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench/record.h"
#include "cli/launch/job.h"

namespace psbench {

// One payload scheme of the tour: its figures (NaN where not measured).
struct TourRow {
  std::string scheme;
  std::string payload;  // "3x1MiB 3x10KiB 4x10B"
  uint64_t bytes = 0;   // of one payload
  double latency_p50_us, bandwidth_mb_per_s, throughput_rpc_per_s;
};

// The tour's summary table, payload sizes included.
void PrintTourSummary(const std::string& transport, const std::vector<TourRow>& rows, int repetitions);

// Runs the floors for each row's payload size and prints them beside the tour's figures
// (psbench run only: `local` false prints where to find them instead). Returns the floors'
// records ("kind": "floor") for --json.
std::vector<Record> PrintReadingAid(const LaunchOptions& o, bool local,
                                            const std::vector<TourRow>& rows);

}  // namespace psbench

#endif  // PSBENCH_CLI_READING_AID_H_
