// Which rank of this MPI job the PS serving gRPC at an address is: the worker asks it over
// gRPC (the PsMpi service), so that a --ps list naming a PS of another mpirun is refused
// before any MPI message goes to a rank that is not that PS.
#ifndef PSBENCH_TRANSPORTS_MPI_PS_RANK_H_
#define PSBENCH_TRANSPORTS_MPI_PS_RANK_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "transports/mpi/mpi_job.h"
#include "transports/transport.h"

namespace psbench::mpi {

// The PS's rank; fails unless it is a PS rank of `job`.
absl::StatusOr<int> AskPsRank(const Job& job, const std::string& address, const TlsOptions& tls,
                              absl::Duration timeout);

}  // namespace psbench::mpi

#endif  // PSBENCH_TRANSPORTS_MPI_PS_RANK_H_
