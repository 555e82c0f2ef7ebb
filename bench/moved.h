// "moved" in a record: what the data plane itself counted on both sides over what the record
// measured (transports/data_counts.h), beside what the benchmark counted: the proof that the
// payloads went where the record says (its transport's data plane, no byte of them over gRPC).
#ifndef PSBENCH_BENCH_MOVED_H_
#define PSBENCH_BENCH_MOVED_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "transports/transport.h"

namespace psbench {

// Both sides' counts at one moment: this worker's client and each PS (GetInfo).
struct MovedSnapshot {
  ClientCounts worker;
  std::vector<ServerInfo> ps;
};

// The payload bytes the benchmark itself moved over the window: sent to the PS, received
// back (echoes, exchange replies).
struct PayloadBytes {
  uint64_t sent = 0, received = 0;
};

// {"plane", "payload_bytes_sent", "payload_bytes_received" (the benchmark's count), "worker",
//  "control", "grpc_payload" (this worker's deltas), "ps": [{"address", "plane", ...}] (each
//  PS's deltas, all workers), "agrees"}. The deltas are after - before.
nlohmann::json MovedJson(const MovedSnapshot& before, const MovedSnapshot& after, PayloadBytes expected);

// Empty when the record's "moved" agrees: this worker's data plane carried exactly the payload
// bytes the benchmark counted, both ways, every PS that counts serves the same plane, and (on another
// plane than gRPC) no gRPC payload call went out of this process. Otherwise why, in one line.
std::string MovedDisagreement(const nlohmann::json& moved);

nlohmann::json DataCountsJson(const DataCounts& counts);

// Both sides' counts now: `client`'s and every PS's (GetInfo).
absl::StatusOr<MovedSnapshot> TakeMovedSnapshot(Client& client);

}  // namespace psbench

#endif  // PSBENCH_BENCH_MOVED_H_
