// grpc+verbs: gRPC sets up RC queue pairs and carries the control plane; tensors move by
// RDMA WRITE WITH IMMEDIATE (verbs_wire.h).
#ifndef PSBENCH_TRANSPORTS_VERBS_VERBS_TRANSPORT_H_
#define PSBENCH_TRANSPORTS_VERBS_VERBS_TRANSPORT_H_

#include <memory>

#include "transports/transport.h"

namespace psbench::verbs {

std::unique_ptr<Client> NewVerbsClient(const ClientOptions& options);
std::unique_ptr<Server> NewVerbsServer(const ServerOptions& options);

}  // namespace psbench::verbs

#endif  // PSBENCH_TRANSPORTS_VERBS_VERBS_TRANSPORT_H_
