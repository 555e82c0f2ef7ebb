// The benchmark loops. They see only the transport's Client: start operations, reap
// completions, keep a fixed number outstanding, time every one.
#ifndef PSBENCH_BENCH_RUNNER_H_
#define PSBENCH_BENCH_RUNNER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/histogram.h"
#include "bench/scenario.h"
#include "bench/sysinfo.h"
#include "transports/transport.h"

namespace psbench {

struct Measurement {
  Histogram latency;          // per-operation round trip, ns
  uint64_t ops = 0;           // operations completed in the measurement
  uint64_t bytes = 0;         // payload bytes those operations carried (one way)
  double seconds = 0;         // first start to last completion
  std::vector<uint64_t> ops_per_ps;
  CpuTimes worker_cpu;        // this process, during the measurement
  std::vector<CpuTimes> ps_cpu;         // each PS process, during the measurement
  std::vector<ServerInfo> ps_info;      // each PS, at the end
  // What each PS itself counted during the measurement (all workers together).
  std::vector<uint64_t> ps_rpcs;
  std::vector<uint64_t> ps_bytes;
  // Worker sessions each PS lost during the measurement (workers that ended without a
  // goodbye: killed, crashed, failed or cut off; this worker's peers).
  std::vector<uint64_t> ps_sessions_lost;
  // Wall-clock bounds of the measurement, to combine workers' windows.
  absl::Time start, end;
};

// Runs warm-up, then measurement, of `scenario.benchmark` with the registered payloads
// `payload_ids` (operation i carries payload i % size). Every operation issued in the
// measurement is waited for and counted: time runs from the first start to the last
// completion, so no byte is left out and none counted twice. With several workers, all
// start warm-up together and all start measuring together (barriers on PS 0 named after
// the scenario's run_id and `plan_index`).
absl::StatusOr<Measurement> RunBenchmark(const Scenario& scenario, Client& client,
                                         const std::vector<int>& payload_ids,
                                         const std::vector<uint64_t>& payload_bytes,
                                         size_t plan_index);

// Waits at barrier `name` on PS 0 with the scenario's other workers until `deadline`; after
// 2 s, and every 10 s after, says on stderr which workers it waits for. At the deadline,
// DEADLINE_EXCEEDED naming them.
absl::Status AwaitPeers(Client& client, const Scenario& s, const std::string& name, absl::Time deadline);

}  // namespace psbench

#endif  // PSBENCH_BENCH_RUNNER_H_
