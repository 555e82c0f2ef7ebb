// grpc+mpi: PS and workers are ranks of one MPI job. gRPC carries the control plane (info,
// barriers, which PS is which rank); tensors move as MPI messages (mpi_wire.h).
#ifndef PSBENCH_TRANSPORTS_MPI_MPI_TRANSPORT_H_
#define PSBENCH_TRANSPORTS_MPI_MPI_TRANSPORT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "transports/transport.h"

namespace psbench::mpi {

// Both fail (FAILED_PRECONDITION, with how to launch) in a process not started by mpirun.
absl::StatusOr<std::unique_ptr<Client>> NewMpiClient(const ClientOptions& options);
absl::StatusOr<std::unique_ptr<Server>> NewMpiServer(const ServerOptions& options);

}  // namespace psbench::mpi

#endif  // PSBENCH_TRANSPORTS_MPI_MPI_TRANSPORT_H_
