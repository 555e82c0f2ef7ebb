// One result, typed: what every worker writes, every launcher gathers and stamps, and every
// table (terminal, --transports, psbench report) reads. On disk a record is one JSON object
// per line (docs/records.md is its schema); in code it is this type, and the field names of
// the JSON appear in record.cc only.
//
// A field the type names is parsed into its member (a missing field stays empty, a field of
// the wrong type is an error naming it); every other field, and a typed field that is null, is
// kept as written in `extra`, so a record read and written back is the record that was read,
// whatever wrote it, but for keys psbench does not know inside the typed objects (latency_us,
// step, ...), which are dropped.
#ifndef PSBENCH_BENCH_RECORD_H_
#define PSBENCH_BENCH_RECORD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace psbench {

// A latency histogram's summary, in µs. p50, p99 and mean are always there (the figures every
// table shows); the rest are written by psbench's own histograms and may be absent from a
// record written by something else (the floors write no p999 or stdev).
struct LatencySummary {
  double p50 = 0, p99 = 0, mean = 0;
  std::optional<uint64_t> count;
  std::optional<double> min, p90, p999, p9999, max, stdev;
};

// Seconds per step (or per pass) of a training run: the mean always, the rest where written.
struct StepStats {
  double mean_s = 0;
  std::optional<double> median_s, min_s, max_s;
  // psbench train's passes only.
  std::optional<uint64_t> iterations;
  std::optional<double> images_per_s, gflops, fraction_of_peak;
};

// How a measurement was taken, from the record's "config" (the scenario it ran).
struct RecordSettings {
  double warmup_s = 0;
  int64_t warmup_iterations = -1;  // -1: warm-up by time
  double duration_s = 0;
  int64_t iterations = 0;          // 0: measured by time
  int64_t window = 0, outstanding = 0;
  bool busy_poll = false;
  std::string run_id;
  std::string grpc_api;           // "" (not grpc), "cq" or "callback"
  double grpc_tx_zerocopy = 0;    // bytes; 0: off
};

struct Record {
  // --- what it is --------------------------------------------------------------------------
  // Absent for the payload benchmarks (latency, bandwidth, throughput); "updates", "train",
  // "train_total", "train_timing", "comparison", "floor" otherwise.
  std::optional<std::string> kind;
  std::optional<std::string> benchmark, transport, mode, scheme, scope, label, model, engine, math, layout;
  std::optional<bool> tls, validate, sync;
  std::optional<uint64_t> seed;
  std::optional<int64_t> workers, ps, worker_index, num_workers, num_ps, batch, threads, steps;
  std::optional<std::string> run_id;  // updates and train records (benchmarks: config.run_id)

  // --- the payload -------------------------------------------------------------------------
  std::optional<std::string> payload_summary;
  // Bytes of one payload: exact for one payload, the mean per operation for a trace of
  // several (written as a fraction, shown as "~N").
  std::optional<double> payload_bytes;
  bool payload_bytes_exact = true;
  std::optional<uint64_t> payloads;

  // --- the measurement ---------------------------------------------------------------------
  std::optional<uint64_t> iterations, bytes, peers_lost;
  std::optional<double> seconds, start_unix_s, end_unix_s;
  std::optional<LatencySummary> latency_us, rpc_latency_us;
  std::optional<double> mb_per_s, msgs_per_s, rpc_per_s;
  std::optional<double> sum_of_worker_rpc_per_s, worst_worker_p99_us;  // throughput totals
  std::optional<std::vector<uint64_t>> rpc_per_ps;
  // updates
  std::optional<double> steps_per_s;
  std::optional<uint64_t> elements_checked, mismatches;
  std::optional<std::string> result;
  // train, train_total, train_timing
  std::optional<double> images_per_s, loss_first, loss_last;
  std::optional<StepStats> step, compute, communication, forward, forward_backward;

  // --- how it was obtained: kept as written, read through the accessors below ------------
  nlohmann::json config, cpu, placement, environment, cluster, command, worker_command;
  // A trace placed over the PS (throughput): [{"ps", "tensors", "bytes"}] per PS.
  nlohmann::json shards;
  std::optional<std::string> timestamp;

  // Every other field, as written (buffers, ps_counted, per_worker, final_params, ...).
  nlohmann::json extra = nlohmann::json::object();

  // --- derived -----------------------------------------------------------------------------
  // The kind, or for a payload benchmark record its benchmark; "" for neither.
  std::string Kind() const;
  bool IsPayloadBenchmark() const;
  // The series a record belongs to in a comparison: its label when it has one (cluster
  // launchers stamp one, e.g. "ipoib"), else TRANSPORT/MODE (TRANSPORT where it has no
  // modes), "local" for a record without a transport (psbench train).
  std::string Series() const;
  // The psbench version that wrote it (environment.versions.psbench); "" when absent.
  std::string PsbenchVersion() const;
  // With --repetitions above 1: RepetitionName of its "repetition"; else "".
  std::string RepetitionText() const;
  // The run it belongs to (workers of one run share it).
  std::string RunId() const;
  RecordSettings Settings() const;
  // CPU seconds per wall second: the worker's, and each PS's (in PS order).
  std::optional<double> WorkerCpu() const;
  std::vector<double> PsCpu() const;
  // The CPUs the processes were allowed to run on ("?" where not known).
  std::string WorkerCpuAffinity() const;
  std::vector<std::string> PsCpuAffinity() const;
  // The host each PS ran on (benchmark records).
  std::vector<std::string> PsHosts() const;
  // The PS updates that a worker's updates record says each PS applied, in PS order.
  std::vector<uint64_t> AppliedUpdates() const;
  // A field of "environment" ("host", "kernel", ...), "" when absent.
  std::string EnvironmentText(const char* key) const;
  std::optional<double> EnvironmentNumber(const char* key) const;
  // psbench, gRPC, protobuf and compiler versions, in words ("" when absent).
  std::string VersionsText() const;
  // Whether TLS was on: the record's own field, else its config's.
  std::optional<bool> Tls() const;
};

// Reads a record. Errors (INVALID_ARGUMENT) name the field: not a JSON object, a field the
// type names with a value of the wrong type.
absl::StatusOr<Record> RecordFromJson(const nlohmann::json& j);
nlohmann::json RecordToJson(const Record& r);
std::vector<nlohmann::json> RecordsToJson(const std::vector<Record>& records);

// The summary of a latency histogram (in ns) as a record holds it.
class Histogram;
LatencySummary SummarizeLatency(const Histogram& h);

// "repetition 2/5": repetition `index` (from 1) of `of`, as records and tables name it.
std::string RepetitionName(int index, int of);

}  // namespace psbench

#endif  // PSBENCH_BENCH_RECORD_H_
