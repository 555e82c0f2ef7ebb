// How a worker reaches a PS over gRPC, whatever the data plane: the channel (plaintext or
// TLS, a connection of its own), status and data counts converted both ways, and gRPC's own
// logging.
#ifndef PSBENCH_TRANSPORTS_CONTROL_CHANNEL_H_
#define PSBENCH_TRANSPORTS_CONTROL_CHANNEL_H_

#include <grpcpp/channel.h>
#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/support/status.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "transports/transport.h"

namespace psbench::wire {
class DataCounts;
}

namespace psbench::control {

// Channel arguments every psbench channel uses: no message size limit, and a connection
// of its own (no subchannel sharing) so that each worker-PS pair is one TCP connection.
// With `tx_zerocopy`, messages of at least that many bytes go out with MSG_ZEROCOPY.
grpc::ChannelArguments PsbenchChannelArguments(uint64_t tx_zerocopy = 0);
// A channel to a PS, over TLS when `tls` says so (every psbench channel is made here, so
// the control planes of grpc+verbs and grpc+mpi get the same credentials as grpc).
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, const TlsOptions& tls,
                                           uint64_t tx_zerocopy = 0);
// gRPC's TCP transmit zero-copy arguments for messages of at least `threshold` bytes (none
// for 0), as `set(name, value)` calls: a channel's and a server builder's alike.
template <typename Set>
void TxZerocopyArguments(uint64_t threshold, Set&& set) {
  if (threshold == 0) return;
  set(GRPC_ARG_TCP_TX_ZEROCOPY_ENABLED, 1);
  set(GRPC_ARG_TCP_TX_ZEROCOPY_SEND_BYTES_THRESHOLD, static_cast<int>(threshold));
}

// A gRPC status as psbench's, naming the PS and the method called: "PS 10.0.0.1:5000:
// /psbench.Raw/Push: Method not found (gRPC 12)".
absl::Status FromGrpc(const grpc::Status& s, const std::string& server, absl::string_view method);
inline grpc::Status ToGrpc(const absl::Status& s) {
  // gRPC's codes are absl's, number for number.
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

void ToWire(const DataCounts& counts, wire::DataCounts* out);
DataCounts FromWire(const wire::DataCounts& counts);

// Sends gRPC's own log lines to stderr only when PSBENCH_GRPC_LOG is set: psbench reports
// failures itself, in one line.
void QuietGrpcLogging();

}  // namespace psbench::control

#endif  // PSBENCH_TRANSPORTS_CONTROL_CHANNEL_H_
