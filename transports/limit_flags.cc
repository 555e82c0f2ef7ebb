#include "transports/limit_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "payloads/size.h"
#include "transports/grpc/raw_format.h"
#include "transports/grpc/serialized_format.h"

ABSL_FLAG(psbench::ByteSize, max_message_size, psbench::ByteSize{uint64_t{1} << 30},
          "PS: the largest request it accepts (a gRPC message, payload and framing; an RDMA "
          "or MPI request); a larger one is refused with RESOURCE_EXHAUSTED: over grpc+verbs "
          "and grpc+mpi before any memory is taken for it, over grpc after gRPC has read the "
          "whole message (docs/security.md)");
ABSL_FLAG(int, max_connections, 1024,
          "PS: worker sessions served at once; one more is refused with RESOURCE_EXHAUSTED");

namespace psbench {

// gRPC's own ceiling: a message length is a signed 32-bit int.
constexpr uint64_t kMaxMessageCeiling = 0x7fffffff;

absl::Status LimitsFromFlags(ServerOptions* o) {
  uint64_t bytes = absl::GetFlag(FLAGS_max_message_size).bytes;
  if (bytes < 4096 || bytes > kMaxMessageCeiling + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-message-size=", FormatSize(bytes), " must be in [4KiB, 2GiB]"));
  }
  int connections = absl::GetFlag(FLAGS_max_connections);
  if (connections < 1 || connections > 1000000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-connections=", connections, " must be in [1, 1000000]"));
  }
  o->max_message_bytes = std::min(bytes, kMaxMessageCeiling);
  o->max_connections = connections;
  return absl::OkStatus();
}

std::vector<std::string> LimitsCommandLine(const ServerOptions& o) {
  ServerOptions d;
  std::vector<std::string> args;
  if (o.max_message_bytes != d.max_message_bytes) {
    args.push_back(absl::StrCat("--max-message-size=", o.max_message_bytes));
  }
  if (o.max_connections != d.max_connections) {
    args.push_back(absl::StrCat("--max-connections=", o.max_connections));
  }
  return args;
}

uint64_t LimitedRequestBytes(const std::string& transport, WireMode mode, bool validate,
                             const std::vector<uint64_t>& sizes) {
  uint64_t payload = 0;
  for (uint64_t s : sizes) payload += s;
  if (transport != "grpc") return payload;
  if (mode == WireMode::kSerialized) return grpc_transport::SerializedPayloadBytes(sizes, validate);
  return grpc_transport::PayloadHeaderBytes(sizes.size(), validate) + payload;
}

}  // namespace psbench
