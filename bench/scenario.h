// A scenario: everything that defines one benchmark run, from flags or a JSON file. The driver
// resolves flags once and hands workers the same scenario as JSON, so every process of a run
// measures exactly the same thing.
#ifndef PSBENCH_BENCH_SCENARIO_H_
#define PSBENCH_BENCH_SCENARIO_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "bench/load.h"
#include "inputs/input_file.h"
#include "payloads/placement.h"
#include "payloads/spec.h"
#include "transports/transport.h"

namespace psbench {

// kUpdates: the "no lost update" check (worker/updates_worker.h), not a payload measurement.
enum class Benchmark { kLatency, kBandwidth, kThroughput, kUpdates };
absl::string_view BenchmarkName(Benchmark b);
absl::StatusOr<Benchmark> ParseBenchmark(absl::string_view text);
// Whether every worker talks to every PS (throughput, updates); else one worker, one PS.
inline bool EveryWorkerToEveryPs(Benchmark b) {
  return b == Benchmark::kThroughput || b == Benchmark::kUpdates;
}

struct Scenario {
  Benchmark benchmark = Benchmark::kLatency;
  std::string transport = "grpc";
  WireMode mode = WireMode::kNonSerialized;
  PayloadSpec payload;
  // --sizes=MIN:MAX: one single-buffer payload per size, doubling from MIN to MAX.
  std::optional<std::pair<uint64_t, uint64_t>> sweep;

  // Warm-up and measurement: by time, or by operation count when the count is > 0.
  absl::Duration warmup = absl::Seconds(2);
  int64_t warmup_iterations = -1;  // >= 0: warm up by count (0 = none); -1: by time
  absl::Duration duration = absl::Seconds(10);
  int64_t iterations = 0;

  int window = 16;      // bandwidth: payloads outstanding
  int outstanding = 8;  // throughput: payloads outstanding per PS
  // Latency and throughput: the offered load (bench/load.h), or a sweep of it (each rate a
  // measurement), and the most operations a worker has out under an open-loop load.
  LoadSchedule load;
  std::optional<LoadSweep> load_sweep;
  int max_in_flight = kDefaultMaxInFlight;
  bool validate = false;
  bool busy_poll = false;  // the worker spins on completions instead of sleeping
  uint64_t grpc_tx_zerocopy = 0;  // grpc: MSG_ZEROCOPY from this message size; 0 never
  GrpcApi grpc_api = GrpcApi::kCompletionQueue;  // grpc: which gRPC API makes the calls
  RdmaOptions rdma;        // grpc+verbs only
  bool tls = false;        // gRPC TLS on (from the --tls-* flags, not the scenario file)

  // Where the PS are, and this worker's place among the workers (for the start barrier).
  std::vector<std::string> ps;
  int num_workers = 1;
  int worker_index = 0;
  std::string run_id;

  absl::Duration connect_timeout = absl::Seconds(10);
  absl::Duration rpc_timeout = absl::Seconds(60);

  // What the inputs may cost, checked before anything is allocated: the size of a trace file,
  // and the bytes of the payloads of one plan, which a worker holds at once (0: the default,
  // at Plans()).
  uint64_t max_input_size = kDefaultMaxInputBytes;
  uint64_t max_payload_memory = 0;

  // The payload plans this scenario measures, one result row each. INVALID_ARGUMENT when one
  // plan's payloads together exceed max_payload_memory, by default half of what this process
  // may use (the host's memory, or its cgroup's limit). A launcher whose workers run on other
  // hosts checks an explicit max_payload_memory only (kExplicitOnly): each worker checks the
  // default on its own host, inside its own cgroup.
  enum class PayloadMemoryCheck { kThisProcess, kExplicitOnly };
  absl::StatusOr<std::vector<PayloadPlan>> Plans(PayloadMemoryCheck check = PayloadMemoryCheck::kThisProcess) const;
};

// Cross-field checks; errors name the flag ("--window must be at least 1").
absl::Status ValidateScenario(const Scenario& s);

// What a record's "scheme" says of it: "sweep" for --sizes, else the payload scheme's name.
std::string SchemeLabel(const Scenario& s);

// The loads a scenario measures, in order: its sweep's rates, or its one load.
std::vector<LoadSchedule> LoadPoints(const Scenario& s);

// Whether `s` places its payloads' tensors over `num_ps` PS instead of sending each whole to
// every PS: a trace in the throughput benchmark over several PS (a trace is a model).
bool PlacesOverPs(const Scenario& s, size_t num_ps);
// Each payload of `plan` placed over `num_ps` PS by bytes (payloads/placement.h), in the
// payload's order; INVALID_ARGUMENT when one has fewer tensors than PS.
absl::StatusOr<std::vector<std::vector<Shard>>> PlaceOverPs(const PayloadPlan& plan, size_t num_ps);

// INVALID_ARGUMENT when a message of `plans` (a payload sent whole, as latency, bandwidth and
// throughput do, or its part on one PS when placed over `place_over` > 0 PS) is larger than
// a PS accepts, `max_message_bytes` (0: no limit known), or when a payload cannot be placed;
// `whose` names the PS ("PS 10.0.0.1:5000's", "the PS's"). `message_bytes` says what a
// request of buffers of the given sizes counts against that limit (its framing included:
// transports/limit_flags.h LimitedRequestBytes); every message of every plan is checked.
using MessageBytesFn = absl::FunctionRef<uint64_t(const std::vector<uint64_t>& sizes)>;
absl::Status CheckPayloadsFitMessages(const std::vector<PayloadPlan>& plans, uint64_t max_message_bytes,
                                      absl::string_view whose, size_t place_over, MessageBytesFn message_bytes);

// Parses "MIN:MAX" (sizes as ParseSize), MIN <= MAX, both >= 1.
absl::StatusOr<std::pair<uint64_t, uint64_t>> ParseSweep(absl::string_view text);
// The bounds ParseSweep (and ValidateScenario, for a scenario file's) checks: 1 <= MIN <= MAX
// <= 1GiB.
absl::Status CheckSweep(uint64_t lo, uint64_t hi);

nlohmann::json ScenarioToJson(const Scenario& s);
absl::StatusOr<Scenario> ScenarioFromJson(const nlohmann::json& j);

}  // namespace psbench

#endif  // PSBENCH_BENCH_SCENARIO_H_
