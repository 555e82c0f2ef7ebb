// PS side of grpc+mpi. The gRPC server is the control plane (info, barriers, and PsMpi.Hello,
// which tells a worker which rank this PS is). One progress thread owns MPI: it joins the
// job, keeps a receive posted for request headers from any worker, and loops polling every
// MPI request it waits for at once: headers, payloads received straight into reused buffers,
// and replies, acknowledging or echoing payloads from where they arrived. Exchanges are received into pooled memory laid out like a payload, handed to the
// exchange handler, and answered from there once the handler's `done` has queued its verdict
// back to the progress thread. The PS leaves once every worker rank of the job has said
// goodbye.
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
#include "inputs/address.h"
#include "transports/data_meta.h"
#include "transports/exchange.h"
#include "transports/control/control_server.h"
#include "transports/mpi/mpi_job.h"
#include "transports/mpi/mpi_requests.h"
#include "transports/mpi/mpi_transport.h"
#include "transports/mpi/mpi_wire.h"
#include "transports/mpi/ps_request.h"

namespace psbench::mpi {
namespace {

// What each MPI request of the progress thread is.
enum PsMessage {
  kPayloadMessage,  // of a PsRequest: a buffer of its payload, or its answer
  kMetaMessage,     // of a PsRequest: its metadata (kMetaFollows)
  kHeaderMessage,   // the posted receive for request headers (no PsRequest)
};

// An exchange's verdict, queued by the handler's `done` for the progress thread.
struct Answer {
  PsRequest* request;
  absl::Status status;
  bool answered;  // false: cancelled; the handler may still write the reply memory
};

// How long a stopping PS keeps going for the workers of exchanges it cancelled: time for
// their error replies to go out and for them to say goodbye.
constexpr absl::Duration kCancelGrace = absl::Seconds(2);

class MpiServer final : public Server, public wire::PsMpi::Service {
 public:
  explicit MpiServer(const ServerOptions& options)
      : options_(options),
        hub_(ExchangeHub::Create(options.exchange_handler)),
        pool_(BlockPool::Create()) {}

  ~MpiServer() override {
    Shutdown();
    Wait();
    hub_->Close(ExchangeCancelledError());  // answers from now on do nothing
  }

  absl::StatusOr<int> Start() override {
    control::DataPlane data_plane;
    data_plane.transport = "grpc+mpi";
    data_plane.describe = [this] {
      std::lock_guard lock(mu_);
      return data_plane_;
    };
    data_plane.services.push_back(this);
    data_plane.plane = "mpi";
    data_plane.counters = [this] {
      return control::DataCounters{rpcs_.load(std::memory_order_relaxed),
                                   bytes_.load(std::memory_order_relaxed), table_.tally().Read()};
    };
    control_ = std::make_unique<control::ControlServer>(options_, std::move(data_plane));
    auto port = control_->Start();
    if (!port.ok()) return port.status();
    // The address workers dial, as every rank learns it when joining.
    std::string host = options_.host;
    if (host == "0.0.0.0" || host == "::" || host.empty()) {
      char name[256] = {};
      gethostname(name, sizeof name - 1);
      host = name;
    }
    std::string address = FormatHostPort(host, *port);
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

    PostHeaderReceive();
    IdleBackoff backoff(options_.busy_poll);
    absl::Time grace_end = absl::InfiniteFuture();
    while (true) {
      if (stop_.load(std::memory_order_relaxed) && grace_end == absl::InfiniteFuture()) {
        // Exchanges the handler still holds fail now, so that their workers hear of it.
        size_t held = hub_->held();
        hub_->Close(ExchangeCancelledError());
        if (held == 0) break;
        grace_end = absl::Now() + kCancelGrace;
      }
      if (grace_end != absl::InfiniteFuture() && absl::Now() > grace_end) break;
      bool progressed = false;
      if (answers_pending_.load(std::memory_order_acquire)) progressed |= SendAnswers();
      progressed |= table_.Poll([this](PsRequest* r, int what, const MPI_Status& st, int error, int bytes) {
                      switch (what) {
                        case kHeaderMessage: return OnHeader(st, error, bytes);
                        case kMetaMessage: return OnMeta(*r, error, bytes);
                        default: return OnDone(*r, error, bytes);
                      }
                    }) > 0;
      if (table_.error() != MPI_SUCCESS) {
        Fatal(MPI_ANY_SOURCE, absl::StrCat("MPI_Testsome: ", MpiErrorText(table_.error())));
      }
      if (goodbyes_.size() == workers_.size() && !Busy()) break;
      if (progressed) {
        backoff.Progressed();
      } else {
        backoff.Idle();
      }
    }
    hub_->Close(ExchangeCancelledError());  // no worker is left to answer
    if (goodbyes_.size() < workers_.size() || Busy()) {
      // Stopped (SIGTERM) while workers still run: MPI cannot finish without them. Exiting
      // non-zero makes mpirun end the job (if it is not already ending it).
      std::fprintf(stderr,
                   "psbench-ps: stopped while %zu of %zu workers of the MPI job had not "
                   "finished; leaving the job\n",
                   workers_.size() - goodbyes_.size(), workers_.size());
      std::fflush(stderr);
      _exit(1);
    }
    table_.CancelAll();  // the header receive: no worker is left to send one
    job_.reset();  // MPI_Finalize, on the thread that initialised MPI
    std::lock_guard lock(mu_);
    finished_ = true;
    cv_.notify_all();
  }

  // Whether any MPI request but the posted header receive is unfinished.
  bool Busy() const { return table_.in_flight() > 1; }

  // Posts the receive that takes the next request header from any worker.
  void PostHeaderReceive() {
    header_.resize(kMaxControlBytes);
    if (int rc = table_.Post(nullptr, kHeaderMessage, [&](MPI_Request* req) {
          return MPI_Irecv(header_.data(), static_cast<int>(header_.size()), MPI_BYTE,
                           MPI_ANY_SOURCE, kControlTag, job_->comm(), req);
        });
        rc != MPI_SUCCESS) {
      Fatal(MPI_ANY_SOURCE, absl::StrCat("posting a receive for request headers: ", MpiErrorText(rc)));
    }
  }

  // A request header is in `header_`: take the request on, then post the receive again.
  void OnHeader(const MPI_Status& status, int error, int count) {
    if (error != MPI_SUCCESS) {
      Fatal(status.MPI_SOURCE,
            absl::StrCat("receiving a request header (at most ", kMaxControlBytes,
                         " bytes): ", MpiErrorText(error)));
    }
    TakeHeader(status.MPI_SOURCE, std::as_bytes(std::span(header_).first(static_cast<size_t>(count))));
    PostHeaderReceive();
  }

  void TakeHeader(int source, std::span<const std::byte> message) {
    RequestHeader h;
    if (const char* error = ParseRequestHeader(message, job_->data_tag_span(), &h)) {
      Fatal(source, error);
    }
    if (h.kind == kGoodbye) {
      goodbyes_.insert(source);
      return;
    }
    PsRequest* r = TakeRequest();
    r->source = source;
    r->data_tag = h.data_tag;
    r->kind = static_cast<RequestKind>(h.kind);
    r->validate = h.flags & kValidate;
    r->eager = h.flags & kEager;
    r->total = h.total_bytes;
    r->corrupt = options_.corrupt_every > 0 && ++received_ % options_.corrupt_every == 0;
    r->replied = false;
    r->first_error = MPI_SUCCESS;
    r->received = 0;
    r->oversize = r->total > options_.max_message_bytes;
    if (h.flags & kMetaFollows) {  // first on the data tag, ahead of the payload
      r->meta_bytes.resize(h.meta_bytes);
      Post(*r, kMetaMessage, [&](MPI_Request* req) {
        return MPI_Irecv(r->meta_bytes.data(), static_cast<int>(h.meta_bytes), MPI_BYTE, source,
                         r->data_tag, job_->comm(), req);
      });
      return;
    }
    const size_t eager_bytes = r->eager ? r->total : 0;  // at the end of the message
    DecodeMeta(*r, message.subspan(sizeof h, message.size() - sizeof h - eager_bytes));
    if (r->eager) {  // in already (at most kEagerMessageBytes): judged as if received
      table_.tally().Received(0, r->total, 0);  // the payload in the header's message
      r->buffer.Reserve(r->total);
      // Over --max-message-size: taken in as nothing, as a long one would be.
      r->received = r->oversize ? 0 : r->total;
      if (r->received > 0) std::memcpy(r->buffer.data(), message.data() + message.size() - r->total, r->total);
      r->spans.clear();
      OnReceived(*r);
      return;
    }
    ReceivePayload(*r);
  }

  // A kMetaFollows request's metadata is in.
  void OnMeta(PsRequest& r, int error, int count) {
    --r.outstanding;
    if (error != MPI_SUCCESS || static_cast<size_t>(count) != r.meta_bytes.size()) {
      Fatal(r.source, absl::StrCat("receiving a request's metadata: ",
                                   error != MPI_SUCCESS ? MpiErrorText(error) : "too short"));
    }
    DecodeMeta(r, std::as_bytes(std::span(r.meta_bytes)));
    ReceivePayload(r);
  }

  void DecodeMeta(PsRequest& r, std::span<const std::byte> bytes) {
    r.meta_status = DecodePayloadMeta(bytes, r.validate, r.total, &r.meta);
    if (!r.meta_status.ok()) {
      // Without the buffer sizes, the messages that follow cannot be told apart.
      Fatal(r.source, absl::StrCat("a request's payload metadata: ", r.meta_status.message()));
    }
  }

  // Posts the receives for a request's payload, as its metadata lays it out.
  void ReceivePayload(PsRequest& r) {
    if (r.oversize) {
      // The worker sent it already: take it off the wire without a buffer (MPI reports the
      // truncation, this communicator returns errors) and refuse it.
      r.spans.assign(r.meta.sizes.size(), {});
      ReceiveBuffers(r, r.spans);
      return;
    }
    if (r.kind == kExchange && hub_->handler() != nullptr) {
      ReceiveExchange(r);
      return;
    }
    // Anything else is received as bytes, buffer after buffer (an exchange that will be
    // refused, to drain it).
    r.buffer.Reserve(r.total);
    r.spans.clear();
    std::byte* at = r.buffer.data();
    for (uint64_t size : r.meta.sizes) {
      r.spans.emplace_back(at, size);
      at += size;
    }
    ReceiveBuffers(r, r.spans);
  }

  // Posts one receive per buffer of the request, into `into` (empty spans drain: MPI
  // truncates); a payload of no buffers is in at once.
  void ReceiveBuffers(PsRequest& r, const std::vector<std::span<std::byte>>& into) {
    for (std::span<std::byte> b : into) {
      Post(r, [&](MPI_Request* req) {
        return MPI_Irecv(b.data(), static_cast<int>(b.size()), MPI_BYTE, r.source, r.data_tag,
                         job_->comm(), req);
      });
    }
    if (r.outstanding == 0) OnReceived(r);
  }

  // Receives an exchange's payload straight into its place in pooled memory, one message per
  // buffer.
  void ReceiveExchange(PsRequest& r) {
    auto buffers = std::make_shared<ExchangeBuffers>();
    buffers->sizes = r.meta.sizes;
    buffers->validate = r.validate;
    std::vector<uint64_t> offsets;
    auto block = pool_->Take(LayOutBuffers(buffers->sizes, &offsets));
    if (!block.ok()) Fatal(r.source, std::string(block.status().message()));
    buffers->block = std::move(*block);
    buffers->PlaceReply(offsets);
    buffers->request.assign(buffers->reply.begin(), buffers->reply.end());  // in place
    r.exchange = buffers;
    ReceiveBuffers(r, buffers->reply);
  }

  // The exchange's payload is in: check it and hand it to the handler, or refuse it.
  void OnExchangeReceived(PsRequest& r) {
    absl::Status verdict;
    if (r.oversize) {
      absl::Status oversize = OversizeError(r, options_.max_message_bytes);
      SendExchangeReply(r, absl::ResourceExhaustedError(absl::StrCat("PS: ", oversize.message())));
      return;
    }
    if (r.first_error != MPI_SUCCESS) {
      verdict = absl::DataLossError(absl::StrCat("receiving the payload: ", MpiErrorText(r.first_error)));
    }
    if (hub_->handler() == nullptr) {
      SendExchangeReply(r, NoExchangeHandlerError());
      return;
    }
    if (verdict.ok() && r.received != r.total) {
      verdict = absl::DataLossError(absl::StrCat("received ", r.received, " of ", r.total, " bytes"));
    }
    if (verdict.ok()) {
      // Injected faults hit an exchange before the PS checks it, as a push.
      if (r.corrupt) {
        for (auto b : r.exchange->reply) {
          if (b.empty()) continue;
          b[b.size() / 2] ^= std::byte{0x5a};
          break;
        }
      }
      if (r.validate) verdict = VerifyRequest(*r.exchange, r.meta.checksums);
    }
    if (!verdict.ok()) {
      SendExchangeReply(r, absl::DataLossError(absl::StrCat("PS: ", verdict.message())));
      return;
    }
    rpcs_.fetch_add(1, std::memory_order_relaxed);
    bytes_.fetch_add(r.total, std::memory_order_relaxed);
    // `done` may run on any thread: it only queues the verdict; this thread sends it. The
    // request is not reused before then (nor after a cancellation: the hub is closed only as
    // this thread stops).
    auto deliver = [this, req = &r](const absl::Status& s, bool answered) {
      std::lock_guard lock(answers_mu_);
      answers_.push_back({req, s, answered});
      answers_pending_.store(true, std::memory_order_release);
    };
    if (!hub_->Run(r.exchange, std::move(deliver))) SendExchangeReply(r, ExchangeCancelledError());
  }

  // Sends what the handler's `done` queued. Returns whether there was anything.
  bool SendAnswers() {
    std::vector<Answer> answers;
    {
      std::lock_guard lock(answers_mu_);
      answers.swap(answers_);
      answers_pending_.store(false, std::memory_order_relaxed);
    }
    for (const Answer& a : answers) {
      SendExchangeReply(*a.request, a.status, /*with_data=*/a.answered && a.status.ok());
    }
    return !answers.empty();
  }

  // The reply metadata, then the reply from where the handler wrote it (an empty message
  // unless the verdict is OK: the worker has a receive posted for it either way).
  void SendExchangeReply(PsRequest& r, const absl::Status& status, bool with_data = false) {
    r.reply.code = status.code();
    r.reply.sizes.clear();
    r.reply.checksums.clear();
    r.reply.error = std::string(status.message());
    if (with_data) {
      r.reply.sizes = r.exchange->sizes;
      if (r.validate) r.reply.checksums = r.exchange->reply_checksums;
    }
    EncodeExchangeReplyMeta(r.reply, &r.reply_bytes);
    r.replied = true;
    PostSend(r, r.reply_bytes.size(), 0, [&](MPI_Request* req) {
      return MPI_Isend(r.reply_bytes.data(), static_cast<int>(r.reply_bytes.size()), MPI_BYTE,
                       r.source, r.data_tag, job_->comm(), req);
    });
    // One message per buffer of the request: the worker has a receive posted for each.
    for (size_t i = 0; i < r.meta.sizes.size(); ++i) {
      const uint64_t n = with_data ? r.exchange->reply[i].size() : 0;
      PostSend(r, n, n, [&](MPI_Request* req) {
        if (!with_data) return MPI_Isend(nullptr, 0, MPI_BYTE, r.source, r.data_tag, job_->comm(), req);
        std::span<std::byte> b = r.exchange->reply[i];
        return MPI_Isend(b.data(), static_cast<int>(b.size()), MPI_BYTE, r.source, r.data_tag,
                         job_->comm(), req);
      });
    }
  }

  void OnDone(PsRequest& r, int error, int count) {
    --r.outstanding;
    if (r.replied) {
      if (error != MPI_SUCCESS) {
        Fatal(r.source, absl::StrCat("replying: ", MpiErrorText(error)));
      }
      if (r.outstanding == 0) Recycle(r);
      return;
    }
    // Receiving: one message per buffer, all in before the request is judged.
    if (error != MPI_SUCCESS) {
      if (r.first_error == MPI_SUCCESS) r.first_error = error;
    } else {
      r.received += static_cast<uint64_t>(count);
    }
    if (r.outstanding == 0) OnReceived(r);
  }

  // Every buffer of the request is in (or failed): judge it, and answer or hand it on.
  void OnReceived(PsRequest& r) {
    if (r.kind == kExchange) {
      OnExchangeReceived(r);
      return;
    }
    // The payload is in.
    if (JudgeAndAcknowledge(r, options_.max_message_bytes).ok()) {
      rpcs_.fetch_add(1, std::memory_order_relaxed);
      bytes_.fetch_add(r.total, std::memory_order_relaxed);
    }
    const bool whole = ArrivedWhole(r);
    r.replied = true;
    const uint64_t eager_echo = r.kind == kEcho && r.eager && whole ? r.total : 0;
    PostSend(r, r.ack_bytes.size(), eager_echo, [&](MPI_Request* req) {
      return MPI_Isend(r.ack_bytes.data(), static_cast<int>(r.ack_bytes.size()), MPI_BYTE,
                       r.source, r.data_tag, job_->comm(), req);
    });
    if (r.kind == kEcho && !r.eager) {
      // Back from the buffer it arrived in, one message per buffer (empty ones when it did
      // not arrive whole: the worker has a receive posted for each); the acknowledgement goes
      // first on this tag.
      for (std::span<std::byte> b : r.spans) {
        const uint64_t n = whole ? b.size() : 0;
        PostSend(r, n, n, [&](MPI_Request* req) {
          return MPI_Isend(whole ? b.data() : nullptr, static_cast<int>(n), MPI_BYTE, r.source, r.data_tag,
                           job_->comm(), req);
        });
      }
    }
  }

  // A payload buffer's receive.
  template <typename Start>
  void Post(PsRequest& r, Start&& start) {
    Post(r, kPayloadMessage, std::forward<Start>(start), Traffic::kPayloadReceive);
  }
  template <typename Start>
  void Post(PsRequest& r, PsMessage what, Start&& start, Traffic traffic = Traffic::kReceive) {
    Posted(r, table_.Post(&r, what, start, traffic));
  }
  // A send of `bytes`, `payload` of them a payload's.
  template <typename Start>
  void PostSend(PsRequest& r, uint64_t bytes, uint64_t payload, Start&& start) {
    Posted(r, table_.PostSend(&r, kPayloadMessage, bytes, payload, start));
  }
  void Posted(PsRequest& r, int rc) {
    if (rc != MPI_SUCCESS) Fatal(r.source, MpiErrorText(rc));
    ++r.outstanding;
  }

  void Recycle(PsRequest& r) {
    r.exchange.reset();  // a handler that still holds it keeps the memory
    spare_.push_back(&r);
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
  const std::shared_ptr<ExchangeHub> hub_;
  const std::shared_ptr<BlockPool> pool_;
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

  // Exchange verdicts from the handler's `done`, for the progress thread.
  std::mutex answers_mu_;
  std::vector<Answer> answers_;
  std::atomic<bool> answers_pending_{false};

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
