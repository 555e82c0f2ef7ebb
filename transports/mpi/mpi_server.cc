// PS side of grpc+mpi. The gRPC server is the control plane (info, barriers, and PsMpi.Hello,
// which tells a worker which rank this PS is). One progress thread owns MPI: it joins the
// job, then loops probing for request headers from any worker, receiving payloads straight
// into reused buffers, checking them, and acknowledging or echoing them from where they
// arrived. The PS leaves once every worker rank of the job has said goodbye.
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "psbench.grpc.pb.h"
#include "transports/data_meta.h"
#include "transports/grpc/grpc_transport.h"
#include "transports/grpc/raw_format.h"
#include "transports/mpi/mpi_job.h"
#include "transports/mpi/mpi_requests.h"
#include "transports/mpi/mpi_transport.h"
#include "transports/mpi/mpi_wire.h"

namespace psbench::mpi {
namespace {

struct PsRequest {
  int source = 0;
  int data_tag = 0;
  RequestKind kind = kPush;
  bool validate = false;
  bool corrupt = false;
  uint64_t total = 0;
  PayloadMeta meta;
  absl::Status meta_status;
  AlignedBuffer buffer;  // the payload, reused from request to request
  std::vector<uint64_t> checksums;
  AckMeta ack;
  std::string ack_bytes;
  int outstanding = 0;  // MPI requests of this request not yet finished
  bool replied = false;
};

class MpiServer final : public Server, public wire::PsMpi::Service {
 public:
  explicit MpiServer(const ServerOptions& options) : options_(options) {}

  ~MpiServer() override {
    Shutdown();
    Wait();
  }

  absl::StatusOr<int> Start() override {
    grpc_transport::ControlPlaneHooks hooks;
    hooks.transport_name = "grpc+mpi";
    hooks.describe_data_plane = [this] {
      std::lock_guard lock(mu_);
      return data_plane_;
    };
    hooks.extra_services.push_back(this);
    hooks.data_counters = [this] {
      return grpc_transport::DataCounters{rpcs_.load(std::memory_order_relaxed),
                                          bytes_.load(std::memory_order_relaxed)};
    };
    control_ = grpc_transport::NewGrpcServer(options_, std::move(hooks));
    auto port = control_->Start();
    if (!port.ok()) return port.status();
    // The address workers dial, as every rank learns it when joining.
    std::string host = options_.host;
    if (host == "0.0.0.0" || host == "::" || host.empty()) {
      char name[256] = {};
      gethostname(name, sizeof name - 1);
      host = name;
    }
    std::string address = host.find(':') != std::string::npos
                              ? absl::StrCat("[", host, "]:", *port)
                              : absl::StrCat(host, ":", *port);
    // Shared: the progress thread may still be inside set_value when Start returns.
    auto joined = std::make_shared<std::promise<absl::Status>>();
    auto joined_future = joined->get_future();
    progress_ = std::thread([this, address, joined] { Progress(address, *joined); });
    absl::Status s = joined_future.get();
    if (!s.ok()) {
      progress_.join();
      control_->Shutdown();
      control_->Wait();
      return s;
    }
    return *port;
  }

  void Wait() override {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stop_requested_ || finished_; });
    }
    if (progress_.joinable()) progress_.join();
    if (control_) {
      control_->Shutdown();
      control_->Wait();
    }
  }

  void Shutdown() override {
    stop_.store(true);  // the progress thread's loop sees this without a lock
    std::lock_guard lock(mu_);
    stop_requested_ = true;
    cv_.notify_all();
  }

  grpc::Status Hello(grpc::ServerContext* context, const wire::MpiHello* request,
                     wire::MpiHelloReply* reply) override {
    std::unique_lock lock(mu_);
    // A worker may finish joining the job a moment before this PS's progress thread does.
    if (!cv_.wait_until(lock, context->deadline(),
                        [this] { return rank_ >= 0 || stop_requested_ || finished_; }) ||
        rank_ < 0) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "this PS has not joined the MPI job");
    }
    reply->set_job_id(job_id_);
    reply->set_ps_rank(rank_);
    reply->set_job_size(job_size_);
    return grpc::Status::OK;
  }

 private:
  // The progress thread: everything MPI happens here, from MPI_Init to MPI_Finalize.
  void Progress(const std::string& address, std::promise<absl::Status>& joined) {
    auto job = Job::Join(Role::kPs, address, absl::Now() + absl::Minutes(5));
    if (!job.ok()) {
      joined.set_value(job.status());
      return;
    }
    job_ = std::move(*job);
    workers_ = job_->RanksWithRole(Role::kWorker);
    if (workers_.empty()) {
      job_.reset();  // every rank sees the same roles: all finalise together
      joined.set_value(absl::FailedPreconditionError(
          absl::StrCat("this MPI job has no psbench-worker rank; ", LaunchHint())));
      return;
    }
    {
      std::lock_guard lock(mu_);
      rank_ = job_->rank();
      job_size_ = job_->size();
      job_id_ = job_->job_id();
      data_plane_ = absl::StrCat("MPI messages, ", job_->Describe());
      cv_.notify_all();
    }
    joined.set_value(absl::OkStatus());

    IdleBackoff backoff(options_.busy_poll);
    while (!stop_.load(std::memory_order_relaxed)) {
      bool progressed = false;
      while (ProbeHeader()) progressed = true;
      progressed |= table_.Poll([this](PsRequest* r, int, const MPI_Status& st, int error) {
                      OnDone(*r, st, error);
                    }) > 0;
      if (table_.error() != MPI_SUCCESS) {
        Fatal(MPI_ANY_SOURCE, absl::StrCat("MPI_Testsome: ", MpiErrorText(table_.error())));
      }
      if (goodbyes_.size() == workers_.size() && table_.in_flight() == 0) break;
      if (progressed) {
        backoff.Progressed();
      } else {
        backoff.Idle();
      }
    }
    if (goodbyes_.size() < workers_.size() || table_.in_flight() > 0) {
      // Stopped (SIGTERM) while workers still run: MPI cannot finish without them. Exiting
      // non-zero makes mpirun end the job (if it is not already ending it).
      std::fprintf(stderr,
                   "psbench-ps: stopped while %zu of %zu workers of the MPI job had not "
                   "finished; leaving the job\n",
                   workers_.size() - goodbyes_.size(), workers_.size());
      std::fflush(stderr);
      _exit(1);
    }
    job_.reset();  // MPI_Finalize, on the thread that initialised MPI
    std::lock_guard lock(mu_);
    finished_ = true;
    cv_.notify_all();
  }

  // Takes one request header if one has arrived. Returns whether it did.
  bool ProbeHeader() {
    int flag = 0;
    MPI_Message message;
    MPI_Status status;
    MPI_Improbe(MPI_ANY_SOURCE, kControlTag, job_->comm(), &flag, &message, &status);
    if (!flag) return false;
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    header_.resize(static_cast<size_t>(count));
    if (int rc = MPI_Mrecv(header_.data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE);
        rc != MPI_SUCCESS) {
      Fatal(status.MPI_SOURCE, absl::StrCat("receiving a request header: ", MpiErrorText(rc)));
    }
    RequestHeader h;
    if (header_.size() < sizeof h) Fatal(status.MPI_SOURCE, "a request header too short");
    std::memcpy(&h, header_.data(), sizeof h);
    if (h.magic != RequestHeader::kMagic) Fatal(status.MPI_SOURCE, "a request header of another protocol");
    if (h.kind == kGoodbye) {
      goodbyes_.insert(status.MPI_SOURCE);
      return true;
    }
    if ((h.kind != kEcho && h.kind != kPush) || h.total_bytes > kMaxMessageBytes ||
        h.data_tag < kFirstDataTag || h.data_tag - kFirstDataTag >= job_->data_tag_span()) {
      Fatal(status.MPI_SOURCE, "a malformed request header");
    }
    PsRequest* r = TakeRequest();
    r->source = status.MPI_SOURCE;
    r->data_tag = h.data_tag;
    r->kind = static_cast<RequestKind>(h.kind);
    r->validate = h.flags & kValidate;
    r->total = h.total_bytes;
    r->corrupt = options_.corrupt_every > 0 && ++received_ % options_.corrupt_every == 0;
    r->replied = false;
    r->meta_status = DecodePayloadMeta(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(header_.data()) + sizeof h,
                                   header_.size() - sizeof h),
        r->validate, r->total, &r->meta);
    r->buffer.Reserve(r->total);
    Post(*r, [&](MPI_Request* req) {
      return MPI_Irecv(r->buffer.data(), static_cast<int>(r->total), MPI_BYTE, r->source,
                       r->data_tag, job_->comm(), req);
    });
    return true;
  }

  void OnDone(PsRequest& r, const MPI_Status& status, int error) {
    --r.outstanding;
    if (r.replied) {
      if (error != MPI_SUCCESS) {
        Fatal(r.source, absl::StrCat("replying: ", MpiErrorText(error)));
      }
      if (r.outstanding == 0) spare_.push_back(&r);
      return;
    }
    // The payload is in.
    absl::Status verdict;
    r.checksums.clear();
    int count = 0;
    if (error != MPI_SUCCESS) {
      verdict = absl::DataLossError(absl::StrCat("receiving the payload: ", MpiErrorText(error)));
    } else {
      MPI_Get_count(&status, MPI_BYTE, &count);
    }
    std::span<std::byte> data(r.buffer.data(), static_cast<size_t>(count));
    // Injected faults hit a push before the PS checks it, an echo after (the worker checks).
    bool damage = r.corrupt && !data.empty();
    if (damage && r.kind == kPush) data[data.size() / 2] ^= std::byte{0x5a};
    if (verdict.ok() && static_cast<uint64_t>(count) != r.total) {
      verdict = absl::DataLossError(absl::StrCat("received ", count, " of ", r.total, " bytes"));
    } else if (verdict.ok() && !r.meta_status.ok()) {
      verdict = r.meta_status;
    } else if (verdict.ok() && r.validate) {
      uint64_t offset = 0;
      for (uint64_t size : r.meta.sizes) {
        r.checksums.push_back(Checksum(data.subspan(offset, size)));
        offset += size;
      }
      verdict = grpc_transport::CompareChecksums(r.meta.checksums, r.checksums, r.meta.sizes);
    }
    if (damage && r.kind == kEcho) data[data.size() / 2] ^= std::byte{0x5a};
    if (verdict.ok()) {
      rpcs_.fetch_add(1, std::memory_order_relaxed);
      bytes_.fetch_add(r.total, std::memory_order_relaxed);
    }
    r.ack.bytes_received = static_cast<uint64_t>(count);
    r.ack.ok = verdict.ok();
    r.ack.checksums.clear();
    // Only checksums of this payload, when they were computed (never a previous request's).
    if (r.validate && r.kind == kPush && verdict.ok()) r.ack.checksums = r.checksums;
    r.ack.error.clear();
    if (!verdict.ok()) r.ack.error = std::string(verdict.message()).substr(0, kMaxAckErrorBytes);
    EncodeAckMeta(r.ack, &r.ack_bytes);
    r.replied = true;
    Post(r, [&](MPI_Request* req) {
      return MPI_Isend(r.ack_bytes.data(), static_cast<int>(r.ack_bytes.size()), MPI_BYTE,
                       r.source, r.data_tag, job_->comm(), req);
    });
    if (r.kind == kEcho) {
      // Back from the buffer it arrived in; the acknowledgement goes first on this tag.
      Post(r, [&](MPI_Request* req) {
        return MPI_Isend(data.data(), count, MPI_BYTE, r.source, r.data_tag, job_->comm(), req);
      });
    }
  }

  template <typename Start>
  void Post(PsRequest& r, Start&& start) {
    if (int rc = table_.Post(&r, 0, start); rc != MPI_SUCCESS) {
      Fatal(r.source, MpiErrorText(rc));
    }
    ++r.outstanding;
  }

  PsRequest* TakeRequest() {
    if (spare_.empty()) {
      requests_.push_back(std::make_unique<PsRequest>());
      return requests_.back().get();
    }
    PsRequest* r = spare_.back();
    spare_.pop_back();
    return r;
  }

  // A broken or foreign peer: MPI cannot be left in a consistent state, so the job ends.
  [[noreturn]] void Fatal(int source, const std::string& what) {
    if (source == MPI_ANY_SOURCE) {
      std::fprintf(stderr, "psbench-ps (MPI rank %d): %s; ending the MPI job\n", job_->rank(),
                   what.c_str());
    } else {
      std::fprintf(stderr, "psbench-ps (MPI rank %d): from rank %d: %s; ending the MPI job\n",
                   job_->rank(), source, what.c_str());
    }
    job_->Abort(1);
  }

  ServerOptions options_;
  std::unique_ptr<Server> control_;
  std::thread progress_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> rpcs_{0}, bytes_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_requested_ = false;
  bool finished_ = false;
  int rank_ = -1;
  int job_size_ = 0;
  std::string job_id_;
  std::string data_plane_ = "MPI messages (joining the MPI job)";

  // Progress thread only.
  std::unique_ptr<Job> job_;
  std::vector<int> workers_;
  std::set<int> goodbyes_;
  RequestTable<PsRequest> table_;
  std::string header_;
  std::vector<std::unique_ptr<PsRequest>> requests_;
  std::vector<PsRequest*> spare_;
  int64_t received_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> NewMpiServer(const ServerOptions& options) {
  if (absl::Status s = TieToLauncher(); !s.ok()) return s;
  return std::make_unique<MpiServer>(options);
}

}  // namespace psbench::mpi
