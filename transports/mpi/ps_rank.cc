#include "transports/mpi/ps_rank.h"

#include <grpcpp/client_context.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "psbench.grpc.pb.h"
#include "transports/control/channel.h"

namespace psbench::mpi {

absl::StatusOr<int> AskPsRank(const Job& job, const std::string& address, const TlsOptions& tls,
                              absl::Duration timeout) {
  auto stub = wire::PsMpi::NewStub(control::MakeChannel(address, tls));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  wire::MpiHello request;
  request.set_job_id(job.job_id());
  request.set_worker_rank(job.rank());
  wire::MpiHelloReply reply;
  grpc::Status status = stub->Hello(&context, request, &reply);
  if (!status.ok()) {
    // It answered GetInfo a moment ago: a PS lost since, a runtime failure.
    return absl::AbortedError(
        absl::StrCat("PS ", address, ": MPI rank lookup failed: ", status.error_message()));
  }
  if (reply.job_id() != job.job_id()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PS ", address, " is a rank of another MPI job (", reply.job_id(), ", this one is ",
        job.job_id(), "): grpc+mpi PS and workers must be ranks of one mpirun"));
  }
  const int rank = reply.ps_rank();
  if (rank < 0 || rank >= job.size() || job.ranks()[rank].role != Role::kPs) {
    return absl::FailedPreconditionError(
        absl::StrCat("PS ", address, " says it is MPI rank ", rank, ", not a PS rank of this job"));
  }
  return rank;
}

}  // namespace psbench::mpi
