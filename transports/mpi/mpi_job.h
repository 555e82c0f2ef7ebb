// The MPI job a grpc+mpi process is a rank of. PS and workers are ranks of one mpirun
// (MPMD: `mpirun -np P psbench-ps ... : -np W psbench-worker ...`). Joining initialises MPI
// on the calling thread, which from then on is the only thread that may call MPI (the
// FUNNELED level, checked), and tells every rank who every other rank is: its role and the
// gRPC address it serves on.
#ifndef PSBENCH_TRANSPORTS_MPI_MPI_JOB_H_
#define PSBENCH_TRANSPORTS_MPI_MPI_JOB_H_

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace psbench::mpi {

enum class Role { kPs = 1, kWorker = 2 };

struct RankInfo {
  Role role = Role::kWorker;
  std::string address;  // gRPC control plane (PS only)
  std::string host;
  int pid = 0;
};

// True when this process was started by an MPI launcher (mpirun, srun with PMI/PMIx);
// MPI would otherwise start a one-rank "singleton" job that can reach no other rank.
bool LaunchedByMpi();
// How to launch grpc+mpi, for the message of a process started outside an MPI job.
std::string LaunchHint();
// For a process about to become a rank: fails (with LaunchHint) when not launched by MPI;
// otherwise ties the process to its parent, the launcher's daemon (mpirun, orted,
// slurmstepd), so that a launcher killed outright (SIGKILL) leaves no rank behind.
absl::Status TieToLauncher();

class Job {
 public:
  // Initialises MPI on this thread and exchanges RankInfo with every rank. `address` is this
  // rank's gRPC address (empty for a worker). Fails when not launched by MPI, when MPI lacks
  // MPI_THREAD_FUNNELED, or when MPI was already initialised in this process. A rank that
  // is past MPI_Init but does not join before `deadline` ends the whole job.
  static absl::StatusOr<std::unique_ptr<Job>> Join(Role role, const std::string& address,
                                                   absl::Time deadline);
  // Finalises MPI (the destructor does it too); must run on the joining thread, with no
  // request outstanding.
  ~Job();

  // Ends the whole MPI job: for a rank that cannot finish cleanly (requests that will never
  // complete), so that mpirun stops every rank instead of waiting for this one.
  [[noreturn]] void Abort(int code);

  MPI_Comm comm() const { return comm_; }  // psbench's own communicator (a dup of WORLD)
  int rank() const { return rank_; }
  int size() const { return static_cast<int>(ranks_.size()); }
  const std::vector<RankInfo>& ranks() const { return ranks_; }
  std::vector<int> RanksWithRole(Role role) const;
  // Rank 0's host and pid: equal on every rank of one job, different between jobs.
  const std::string& job_id() const { return job_id_; }
  // Data tags in [kFirstDataTag, kFirstDataTag + data_tag_span()) are free for requests.
  int data_tag_span() const { return data_tag_span_; }
  // "Open MPI v4.1.4" (the library's own version line, first line only).
  const std::string& library() const { return library_; }
  std::string Describe() const;  // "rank 1 of 4 in job host:pid, Open MPI v4.1.4"

 private:
  Job() = default;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  std::vector<RankInfo> ranks_;
  std::string job_id_;
  int data_tag_span_ = 0;
  std::string library_;
};

// Describes an MPI error code: "MPI_ERR_TRUNCATE: message truncated".
std::string MpiErrorText(int code);

}  // namespace psbench::mpi

#endif  // PSBENCH_TRANSPORTS_MPI_MPI_JOB_H_
