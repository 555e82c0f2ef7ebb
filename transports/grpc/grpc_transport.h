// Plain gRPC transport: the data plane is gRPC itself, serialized or non-serialized.
#ifndef PSBENCH_TRANSPORTS_GRPC_GRPC_TRANSPORT_H_
#define PSBENCH_TRANSPORTS_GRPC_GRPC_TRANSPORT_H_

#include <memory>
#include <string>

#include <grpcpp/channel.h>
#include <grpcpp/support/channel_arguments.h>

#include "transports/transport.h"

namespace psbench::grpc_transport {

std::unique_ptr<Client> NewGrpcClient(const ClientOptions& options);
std::unique_ptr<Server> NewGrpcServer(const ServerOptions& options);

// Channel arguments every psbench channel uses: no message size limit, and a connection
// of its own (no subchannel sharing) so that each worker-PS pair is one TCP connection.
grpc::ChannelArguments PsbenchChannelArguments();
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address);

// Sends gRPC's own log lines to stderr only when PSBENCH_GRPC_LOG is set: psbench reports
// failures itself, in one line.
void QuietGrpcLogging();

}  // namespace psbench::grpc_transport

#endif  // PSBENCH_TRANSPORTS_GRPC_GRPC_TRANSPORT_H_
