#include "bench/moved.h"

#include "absl/strings/str_cat.h"

namespace psbench {

nlohmann::json DataCountsJson(const DataCounts& c) {
  return {{"messages_sent", c.messages_sent},
          {"messages_completed", c.messages_completed},
          {"messages_received", c.messages_received},
          {"bytes_sent", c.bytes_sent},
          {"bytes_received", c.bytes_received},
          {"payload_bytes_sent", c.payload_bytes_sent},
          {"payload_bytes_received", c.payload_bytes_received}};
}

nlohmann::json MovedJson(const MovedSnapshot& before, const MovedSnapshot& after, PayloadBytes expected) {
  nlohmann::json ps = nlohmann::json::array();
  for (size_t i = 0; i < after.ps.size() && i < before.ps.size(); ++i) {
    // A PS that names no plane (another implementation of the protocol, an older psbench-ps)
    // keeps no counts: it is listed as not counted, and cannot disagree.
    if (after.ps[i].plane.empty()) {
      ps.push_back({{"address", after.ps[i].address}, {"counted", false}});
      continue;
    }
    nlohmann::json p = DataCountsJson(after.ps[i].moved - before.ps[i].moved);
    p["address"] = after.ps[i].address;
    p["plane"] = after.ps[i].plane;
    ps.push_back(std::move(p));
  }
  nlohmann::json moved = {
      {"plane", after.worker.plane},
      {"payload_bytes_sent", expected.sent},
      {"payload_bytes_received", expected.received},
      {"worker", DataCountsJson(after.worker.data - before.worker.data)},
      {"control", DataCountsJson(after.worker.control - before.worker.control)},
      {"grpc_payload", DataCountsJson(after.worker.grpc_payload - before.worker.grpc_payload)},
      {"ps", ps}};
  moved["agrees"] = MovedDisagreement(moved).empty();
  return moved;
}

absl::StatusOr<MovedSnapshot> TakeMovedSnapshot(Client& client) {
  MovedSnapshot snapshot{client.Counts(), {}};
  for (size_t i = 0; i < client.num_servers(); ++i) {
    auto info = client.GetInfo(i);
    if (!info.ok()) return info.status();
    snapshot.ps.push_back(*std::move(info));
  }
  return snapshot;
}

std::string MovedDisagreement(const nlohmann::json& moved) {
  const std::string plane = moved.value("plane", "");
  const nlohmann::json& worker = moved.at("worker");
  for (const char* way : {"sent", "received"}) {
    const std::string key = absl::StrCat("payload_bytes_", way);
    const uint64_t counted = worker.value(key, uint64_t{0}), expected = moved.value(key, uint64_t{0});
    if (counted != expected) {
      return absl::StrCat("the ", plane, " data plane ", way, " ", counted, " payload bytes; the benchmark ",
                          way, " ", expected);
    }
  }
  for (const nlohmann::json& p : moved.at("ps")) {
    if (!p.value("counted", true)) continue;
    if (p.value("plane", "") != plane) {
      return absl::StrCat("PS ", p.value("address", ""), " serves its payloads over '", p.value("plane", ""),
                          "', this worker over '", plane, "'");
    }
  }
  const nlohmann::json& grpc = moved.at("grpc_payload");
  if (plane != "grpc" && (grpc.value("messages_sent", uint64_t{0}) != 0 || grpc.value("bytes_sent", uint64_t{0}) != 0)) {
    return absl::StrCat(grpc.value("messages_sent", uint64_t{0}), " gRPC payload calls (",
                        grpc.value("bytes_sent", uint64_t{0}), " bytes) went out of a worker whose data plane is ",
                        plane);
  }
  return "";
}

}  // namespace psbench
