// The benchmark loops. They see only the transport's Client: start operations, reap
// completions, keep a fixed number outstanding, time every one.
#ifndef PSBENCH_BENCH_RUNNER_H_
#define PSBENCH_BENCH_RUNNER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/histogram.h"
#include "bench/load.h"
#include "bench/moved.h"
#include "bench/scenario.h"
#include "bench/sysinfo.h"
#include "payloads/payload.h"
#include "payloads/placement.h"
#include "transports/transport.h"

namespace psbench {

// The steady clock in ns: what the loops time operations with.
inline uint64_t SteadyNowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// What an open-loop measurement adds (bench/open_loop.h).
struct OpenLoopFigures {
  LoadSchedule schedule;
  uint64_t seed = 0;       // of the measurement's schedule
  int max_in_flight = 0;
  Histogram uncorrected;   // ns, from each operation's actual send to its completion
  Histogram lag;           // ns, each actual send behind its planned start
  uint64_t planned = 0;    // operations the schedule planned: sent or dropped
  uint64_t deferred = 0;   // operations that found --max-in-flight out at their planned start
  uint64_t dropped = 0;    // planned within the time, still kept back when it was up
};

struct Measurement {
  // Per-operation round trip, ns; under open-loop load from each one's planned start.
  Histogram latency;
  uint64_t ops = 0;           // operations completed in the measurement
  uint64_t bytes = 0;         // payload bytes those operations carried (one way)
  double seconds = 0;         // first start to last completion (open loop by time: at least the span)
  std::vector<uint64_t> ops_per_ps;
  CpuTimes worker_cpu;        // this process, during the measurement
  std::vector<CpuTimes> ps_cpu;         // each PS process, during the measurement
  std::vector<ServerInfo> ps_info;      // each PS, at the end
  // Both sides' data-plane counts around the measurement (bench/moved.h).
  MovedSnapshot moved_before, moved_after;
  // What each PS itself counted during the measurement (all workers together).
  std::vector<uint64_t> ps_rpcs;
  std::vector<uint64_t> ps_bytes;
  // Worker sessions each PS lost during the measurement (workers that ended without a
  // goodbye: killed, crashed, failed or cut off; this worker's peers).
  std::vector<uint64_t> ps_sessions_lost;
  // Wall-clock bounds of the measurement, to combine workers' windows.
  absl::Time start, end;
  std::optional<OpenLoopFigures> open_loop;
};

// The registered payloads a benchmark sends, and their bytes: one list for every PS, or (a
// trace placed over the PS by bytes) one list per PS. The i-th operation to a PS carries its
// list's payload i % size.
struct PayloadSet {
  std::vector<std::vector<int>> ids;
  std::vector<std::vector<uint64_t>> bytes;
  // Placed: per PS, the tensors and bytes it holds, over all the plan's payloads.
  std::vector<Shard> shards;

  size_t list(size_t server) const { return ids.size() == 1 ? 0 : server; }
  std::vector<int> all_ids() const;
};

// Registers `plan`'s payloads with `client`, their memory kept in `owned`. Each goes whole to
// every PS, except a trace's in the throughput benchmark over several PS: its tensors are
// placed over the PS by bytes (payloads/placement.h), as a model's variables are, and each PS
// gets its own part. A trace with fewer tensors than PS is bad input.
absl::StatusOr<PayloadSet> RegisterPayloads(const Scenario& scenario, Client& client, const PayloadPlan& plan,
                                            std::vector<std::unique_ptr<Payload>>* owned);

// Runs warm-up, then measurement, of `scenario.benchmark` with `payloads`. Every operation
// issued in the measurement is waited for and counted: time runs from the first start to the
// last completion, so no byte is left out and none counted twice. With several workers, all
// start warm-up together and all start measuring together (barriers on PS 0 named after
// the scenario's run_id and `plan_index`).
absl::StatusOr<Measurement> RunBenchmark(const Scenario& scenario, Client& client,
                                         const PayloadSet& payloads, size_t plan_index);

// Waits at barrier `name` on PS 0 with the scenario's other workers until `deadline`; after
// 2 s, and every 10 s after, says on stderr which workers it waits for. At the deadline,
// DEADLINE_EXCEEDED naming them.
absl::Status AwaitPeers(Client& client, const Scenario& s, const std::string& name, absl::Time deadline);

}  // namespace psbench

#endif  // PSBENCH_BENCH_RUNNER_H_
