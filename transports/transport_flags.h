// --transport, --busy-poll, --grpc-tx-zerocopy and --grpc-api: psbench-ps, psbench-worker and psbench
// run | ssh | slurm | mpirun accept them, so they are declared once, here.
#ifndef PSBENCH_TRANSPORTS_TRANSPORT_FLAGS_H_
#define PSBENCH_TRANSPORTS_TRANSPORT_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "transports/transport.h"

namespace psbench {

// Source-file suffix that owns the flags (for ParseFlagsOrExit's flag_files).
inline constexpr char kTransportFlagsFile[] = "/transports/transport_flags.cc";

// --transport as given (checked by whoever builds the transport: MakeServer, the scenario).
std::string TransportFlag();
// --busy-poll.
bool BusyPollFlag();
// --grpc-tx-zerocopy: the smallest message gRPC sends with MSG_ZEROCOPY, 0 for never;
// INVALID_ARGUMENT above 1 GiB.
absl::StatusOr<uint64_t> GrpcTxZerocopyFlag();
// --grpc-api: cq (default) or callback.
absl::StatusOr<GrpcApi> GrpcApiFlag();

}  // namespace psbench

#endif  // PSBENCH_TRANSPORTS_TRANSPORT_FLAGS_H_
