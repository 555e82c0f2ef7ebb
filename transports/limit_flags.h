// The PS's limits (--max-message-size, --max-connections): psbench-ps reads them, psbench
// run forwards them to every PS it starts.
#ifndef PSBENCH_TRANSPORTS_LIMIT_FLAGS_H_
#define PSBENCH_TRANSPORTS_LIMIT_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "transports/transport.h"

namespace psbench {

inline constexpr char kLimitFlagsFile[] = "/transports/limit_flags.cc";

// Reads and checks the flags into `o` (max_message_bytes, max_connections).
absl::Status LimitsFromFlags(ServerOptions* o);

// The flags that reproduce `o`'s limits on a PS command line (only non-defaults).
std::vector<std::string> LimitsCommandLine(const ServerOptions& o);

// What a request carrying buffers of `sizes` counts against a PS's --max-message-size over
// `transport` (in wire `mode`, under `validate`): over grpc the whole gRPC message, framing
// included (the raw header with sizes and checksums, or protobuf's tags and lengths); over
// grpc+verbs and grpc+mpi its payload. The launchers and the worker check every payload of a
// run with it before the first is measured; the grpc worker's Register counts the same.
uint64_t LimitedRequestBytes(const std::string& transport, WireMode mode, bool validate,
                             const std::vector<uint64_t>& sizes);

}  // namespace psbench

#endif  // PSBENCH_TRANSPORTS_LIMIT_FLAGS_H_
