// Plain gRPC transport: the data plane is gRPC itself, serialized or non-serialized.
#ifndef PSBENCH_TRANSPORTS_GRPC_GRPC_TRANSPORT_H_
#define PSBENCH_TRANSPORTS_GRPC_GRPC_TRANSPORT_H_

#include <memory>
#include <string>

#include <functional>
#include <vector>

#include <grpcpp/channel.h>
#include <grpcpp/impl/codegen/service_type.h>
#include <grpcpp/support/channel_arguments.h>

#include "transports/transport.h"

namespace psbench::grpc_transport {

struct DataCounters {
  uint64_t rpcs = 0;
  uint64_t bytes = 0;
};

// What another data plane (verbs, MPI) adds to the gRPC server that is its control plane.
struct ControlPlaneHooks {
  std::string transport_name = "grpc";
  std::string data_plane = "gRPC over TCP";
  // When set, GetInfo reports this instead of data_plane: for a data plane that knows what
  // it is only once the server runs (grpc+mpi learns its rank when the MPI job starts).
  std::function<std::string()> describe_data_plane;
  std::vector<grpc::Service*> extra_services;  // e.g. the verbs connection setup
  // When set, GetInfo reports these instead of the gRPC data plane's own counters.
  std::function<DataCounters()> data_counters;
};

std::unique_ptr<Client> NewGrpcClient(const ClientOptions& options);
std::unique_ptr<Server> NewGrpcServer(const ServerOptions& options,
                                      ControlPlaneHooks hooks = {});

// Channel arguments every psbench channel uses: no message size limit, and a connection
// of its own (no subchannel sharing) so that each worker-PS pair is one TCP connection.
grpc::ChannelArguments PsbenchChannelArguments();
// A channel to a PS, over TLS when `tls` says so (every psbench channel is made here, so
// the control planes of grpc+verbs and grpc+mpi get the same credentials as grpc).
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, const TlsOptions& tls);

// Sends gRPC's own log lines to stderr only when PSBENCH_GRPC_LOG is set: psbench reports
// failures itself, in one line.
void QuietGrpcLogging();

}  // namespace psbench::grpc_transport

#endif  // PSBENCH_TRANSPORTS_GRPC_GRPC_TRANSPORT_H_
