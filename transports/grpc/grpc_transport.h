// Plain gRPC transport: the data plane is gRPC itself, serialized or non-serialized, on the
// channels and server of the control plane (transports/control/).
#ifndef PSBENCH_TRANSPORTS_GRPC_GRPC_TRANSPORT_H_
#define PSBENCH_TRANSPORTS_GRPC_GRPC_TRANSPORT_H_

#include <memory>

#include "transports/transport.h"

namespace psbench::grpc_transport {

std::unique_ptr<Client> NewGrpcClient(const ClientOptions& options);
std::unique_ptr<Server> NewGrpcServer(const ServerOptions& options);

}  // namespace psbench::grpc_transport

#endif  // PSBENCH_TRANSPORTS_GRPC_GRPC_TRANSPORT_H_
