#include "transports/mpi/mpi_job.h"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "transports/mpi/mpi_wire.h"

namespace psbench::mpi {
namespace {

// One rank's entry in the exchange at Join: fixed size, so one MPI_Allgather carries all.
struct RankRecord {
  int32_t role = 0;
  int32_t pid = 0;
  char address[256] = {};
  char host[128] = {};
};

void CopyField(char* out, size_t size, const std::string& in) {
  std::memset(out, 0, size);
  std::memcpy(out, in.data(), std::min(in.size(), size - 1));
}

std::string Field(const char* in, size_t size) { return std::string(in, strnlen(in, size)); }

}  // namespace

bool LaunchedByMpi() {
  // Open MPI's mpirun, PMIx launchers (srun --mpi=pmix, prterun), PMI-1/2 (srun, hydra).
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (getenv(var) != nullptr) return true;
  }
  return false;
}

std::string LaunchHint() {
  return "--transport=grpc+mpi runs PS and workers as ranks of one MPI job: use "
         "`psbench run --transport=grpc+mpi ...`, or launch them together, e.g. "
         "`mpirun -np 1 psbench-ps --transport=grpc+mpi : -np 1 psbench-worker "
         "--transport=grpc+mpi --benchmark=latency` (deploy/mpi/README.md)";
}

absl::Status TieToLauncher() {
  if (!LaunchedByMpi()) return absl::FailedPreconditionError(LaunchHint());
  pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent || parent == 1) {
    return absl::AbortedError("the MPI launcher that started this rank is gone");
  }
  return absl::OkStatus();
}

std::string MpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return absl::StrCat("MPI error ", code);
  return std::string(text, len);
}

absl::StatusOr<std::unique_ptr<Job>> Job::Join(Role role, const std::string& address,
                                              absl::Time deadline) {
  if (!LaunchedByMpi()) return absl::FailedPreconditionError(LaunchHint());
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized || finalized) {
    return absl::FailedPreconditionError(
        "grpc+mpi: MPI is initialised once per process, and this process already did");
  }
  // Only the joining thread calls MPI; other threads (gRPC's) never do.
  int provided = MPI_THREAD_SINGLE;
  if (int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      rc != MPI_SUCCESS) {
    return absl::UnavailableError(absl::StrCat("MPI_Init_thread failed: ", MpiErrorText(rc)));
  }
  std::unique_ptr<Job> job(new Job());
  if (provided < MPI_THREAD_FUNNELED) {
    // The destructor finalises.
    return absl::FailedPreconditionError(absl::StrCat(
        "grpc+mpi needs MPI_THREAD_FUNNELED (gRPC runs its own threads); this MPI provides "
        "level ", provided));
  }
  // psbench's messages on a communicator of their own, whose errors come back as codes
  // that psbench reports itself, naming the peer, instead of aborting the job.
  MPI_Comm_dup(MPI_COMM_WORLD, &job->comm_);
  MPI_Comm_set_errhandler(job->comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(job->comm_, &job->rank_);
  int size = 0;
  MPI_Comm_size(job->comm_, &size);

  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(version, &len);
  std::string library(version, len);
  job->library_ = std::string(library.substr(0, library.find_first_of(",\n")));

  void* tag_ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found);
  int max_tag = found ? *static_cast<int*>(tag_ub) : 32767;  // the standard's minimum
  job->data_tag_span_ = std::min(max_tag - kFirstDataTag, 1 << 24);

  RankRecord mine;
  mine.role = static_cast<int32_t>(role);
  mine.pid = getpid();
  CopyField(mine.address, sizeof mine.address, address);
  char host[128] = {};
  gethostname(host, sizeof host - 1);
  CopyField(mine.host, sizeof mine.host, host);
  std::vector<RankRecord> all(size);
  MPI_Request request;
  MPI_Iallgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, job->comm_,
                 &request);
  // Non-blocking, so that a rank that started MPI but never gets here (a PS whose gRPC server
  // hangs starting) is reported instead of waited for forever. A rank that never starts at
  // all holds everyone in MPI_Init: the launcher reports that one.
  int done = 0;
  while (true) {
    if (int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE); rc != MPI_SUCCESS) {
      // The collective can be neither finished nor freed: MPI cannot be finalised.
      fprintf(stderr, "grpc+mpi: exchanging rank information failed: %s; ending the job\n",
              MpiErrorText(rc).c_str());
      job->Abort(1);
    }
    if (done) break;
    if (absl::Now() > deadline) {
      // The request can never be completed or freed: end the job, naming why.
      fprintf(stderr,
              "grpc+mpi: not every rank of the MPI job (%d ranks) joined within the "
              "start-up deadline; ending the job\n",
              size);
      job->Abort(1);
    }
    sched_yield();
  }
  for (const RankRecord& r : all) {
    RankInfo info;
    info.role = r.role == static_cast<int32_t>(Role::kPs) ? Role::kPs : Role::kWorker;
    info.address = Field(r.address, sizeof r.address);
    info.host = Field(r.host, sizeof r.host);
    info.pid = r.pid;
    job->ranks_.push_back(std::move(info));
  }
  job->job_id_ = absl::StrCat(job->ranks_[0].host, ":", job->ranks_[0].pid);
  return job;
}

Job::~Job() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  MPI_Finalize();
}

void Job::Abort(int code) {
  MPI_Abort(comm_ != MPI_COMM_NULL ? comm_ : MPI_COMM_WORLD, code);
  _exit(code);  // MPI_Abort does not return; should an implementation do, leave anyway
}

std::vector<int> Job::RanksWithRole(Role role) const {
  std::vector<int> out;
  for (int r = 0; r < size(); ++r) {
    if (ranks_[r].role == role) out.push_back(r);
  }
  return out;
}

std::string Job::Describe() const {
  return absl::StrCat("rank ", rank_, " of ", size(), " in MPI job ", job_id_, ", ", library_);
}

}  // namespace psbench::mpi
