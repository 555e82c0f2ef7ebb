// Worker side of grpc+mpi. Connect joins the MPI job, finds the PS (every PS rank of the job
// when no --ps is given), checks over gRPC that each PS is a rank of this same job and learns
// its rank. The thread that drives the client (Connect, Start, Next) owns MPI: it is where
// messages are posted and where MPI makes progress, polled from Next, as perftest and OSU
// poll; handing every message to a second thread would cost two thread wake-ups per round
// trip, and a second spinning thread where cores are few.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "transports/data_meta.h"
#include "transports/exchange.h"
#include "transports/control/control_client.h"
#include "transports/mpi/mpi_job.h"
#include "transports/mpi/mpi_requests.h"
#include "transports/mpi/mpi_transport.h"
#include "transports/mpi/mpi_wire.h"
#include "transports/mpi/ps_rank.h"
#include "transports/mpi/worker_op.h"

namespace psbench::mpi {
namespace {

// What each MPI request of an op is. An exchange's reply metadata counts as its
// acknowledgement, its reply as its echo.
enum What { kAckReceive, kEchoReceive, kSend };

struct Peer {
  std::string address;
  int rank = -1;
  uint32_t next_request = 0;
  absl::Status failure;
};

class MpiClient final : public Client {
 public:
  explicit MpiClient(const ClientOptions& options) : options_(options) {}

  ~MpiClient() override {
    if (!job_) return;
    if (table_.in_flight() > 0) {
      // Requests that will never finish: MPI cannot be finalised cleanly; end the job.
      std::fprintf(stderr, "psbench-worker (MPI rank %d): ending the MPI job with %zu MPI "
                   "requests unfinished\n", job_->rank(), table_.in_flight());
      job_->Abort(1);
    }
    // Every PS of the job counts its workers out before it leaves.
    RequestHeader bye;
    bye.kind = kGoodbye;
    for (int ps : job_->RanksWithRole(Role::kPs)) {
      MPI_Send(&bye, sizeof bye, MPI_BYTE, ps, kControlTag, job_->comm());
    }
    job_.reset();  // MPI_Finalize, on the thread that joined
  }

  absl::Status Connect() override {
    auto job = Job::Join(Role::kWorker, "", absl::Now() + options_.connect_timeout);
    if (!job.ok()) return job.status();
    job_ = std::move(*job);
    std::vector<int> ps_ranks = job_->RanksWithRole(Role::kPs);
    std::vector<int> workers = job_->RanksWithRole(Role::kWorker);
    placement_.num_workers = static_cast<int>(workers.size());
    placement_.worker_index = static_cast<int>(
        std::find(workers.begin(), workers.end(), job_->rank()) - workers.begin());
    std::vector<std::string> servers = options_.servers;
    if (servers.empty()) {
      if (ps_ranks.empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat("this MPI job has no psbench-ps rank and no --ps was given; ", LaunchHint()));
      }
      for (int r : ps_ranks) servers.push_back(job_->ranks()[r].address);
    }
    ClientOptions control_options = options_;
    control_options.servers = servers;
    control_ = std::make_unique<control::ControlClient>(control_options);
    if (absl::Status s = control_->Connect(); !s.ok()) return s;
    std::set<int> seen;
    for (size_t i = 0; i < servers.size(); ++i) {
      auto info = control_->GetInfo(i);
      if (!info.ok()) return control::LostAfterAnswering(info.status());
      if (info->transport != "grpc+mpi") {
        return absl::FailedPreconditionError(absl::StrCat(
            "PS ", servers[i], " serves --transport=", info->transport,
            ", not grpc+mpi (start it with --transport=grpc+mpi, in the same mpirun)"));
      }
      auto rank = AskPsRank(*job_, servers[i], options_.tls, options_.connect_timeout);
      if (!rank.ok()) return rank.status();
      if (!seen.insert(*rank).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("--ps: ", servers[i], " is MPI rank ", *rank, ", listed twice"));
      }
      Peer p;
      p.address = servers[i];
      p.rank = *rank;
      peers_.push_back(std::move(p));
    }
    return absl::OkStatus();
  }

  size_t num_servers() const override { return peers_.size(); }
  const std::string& server_address(size_t i) const override { return peers_[i].address; }
  std::optional<JobPlacement> Placement() const override {
    if (!job_) return std::nullopt;
    return placement_;
  }

  absl::StatusOr<int> Register(const Payload& payload) override {
    if (!job_) return absl::FailedPreconditionError("grpc+mpi: Register before Connect");
    if (payload.total_bytes() > kMaxMessageBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "grpc+mpi sends payloads of at most 2 GiB - 1 bytes (MPI counts "
          "are int); this one has ", payload.total_bytes()));
    }
    auto reg = std::make_unique<Registered>();
    reg->payload = &payload;
    RequestHeader h;
    h.flags = options_.validate ? kValidate : 0;
    h.total_bytes = payload.total_bytes();
    reg->header.assign(reinterpret_cast<const char*>(&h), sizeof h);
    reg->header += EncodePayloadMeta(payload.sizes(), options_.validate ? &payload.checksums() : nullptr);
    if (reg->header.size() + payload.total_bytes() <= kEagerMessageBytes) {
      reg->eager = true;
      reg->header[offsetof(RequestHeader, flags)] |= kEager;
      reg->header.resize(reg->header.size() + payload.total_bytes());  // filled per request
    }
    if (reg->header.size() > kMaxControlBytes && !MoveMetaOut(&reg->header, &reg->meta_follows)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "grpc+mpi: a payload of ", payload.num_buffers(), " buffers has more metadata than a PS takes"));
    }
    reg->max_ack = 16 + (options_.validate ? 8 * payload.num_buffers() : 0) + kMaxAckErrorBytes;
    reg->max_reply = MaxExchangeReplyMetaBytes(payload.num_buffers());
    registered_.push_back(std::move(reg));
    return static_cast<int>(registered_.size() - 1);
  }

  void Unregister(int payload) override {
    auto& r = registered_[payload];
    if (!r) return;
    // Ops on it have completed (the caller's contract), but one reported as timed out may
    // still have its send posted: MPI would read freed memory. Nothing sane is left to do.
    for (const auto& o : ops_) {
      if (o->outstanding > 0 && (o->reg == r.get() || o->reply_reg == r.get())) {
        std::fprintf(stderr, "psbench-worker (MPI rank %d): a payload freed while MPI still "
                     "sends it (after a timeout); ending the MPI job\n", job_->rank());
        job_->Abort(1);
      }
      // A later payload may be allocated where this one was: forget its header.
      if (o->header_of == r.get()) o->header_of = nullptr;
    }
    r.reset();
  }

  void Start(Op op, size_t server, int payload, uint64_t tag) override {
    if (op == Op::kExchange) {
      ready_.push_back({tag, ExchangeNeedsStartExchange()});
      return;
    }
    Peer& p = peers_[server];
    if (!p.failure.ok()) {
      ready_.push_back({tag, p.failure});
      return;
    }
    PendingOp* o = TakeOp();
    o->tag = tag;
    o->op = op;
    o->reg = registered_[payload].get();
    o->reply_reg = nullptr;
    o->server = server;
    o->data_tag = kFirstDataTag + static_cast<int>(p.next_request++ % job_->data_tag_span());
    clock_.Started(o);
    o->first_error = MPI_SUCCESS;
    o->post_error = MPI_SUCCESS;
    o->expired = false;
    // The header: the payload's (copied when this op last carried another payload), with
    // this request's kind and tag.
    if (o->header_of != o->reg) {
      o->header = o->reg->header;
      o->header_of = o->reg;
    }
    RequestHeader h;
    std::memcpy(&h, o->header.data(), sizeof h);
    h.kind = op == Op::kEcho ? kEcho : kPush;
    h.data_tag = o->data_tag;
    std::memcpy(o->header.data(), &h, sizeof h);
    const uint64_t total = o->reg->payload->total_bytes();
    o->eager = o->reg->eager;
    if (o->eager) {  // the payload as it is now, at the end of the header's message
      char* at = o->header.data() + o->header.size() - total;
      for (const iovec& v : o->reg->payload->iov()) {
        if (v.iov_len > 0) std::memcpy(at, v.iov_base, v.iov_len);
        at += v.iov_len;
      }
    }
    const size_t max_ack = o->eager && op == Op::kEcho ? 4 + o->reg->max_ack + total : o->reg->max_ack;
    if (o->ack.size() < max_ack) o->ack.resize(max_ack);
    if (op == Op::kEcho) o->echo.Reserve(total);
    MPI_Comm comm = job_->comm();
    // Receives first, so that the replies find them posted.
    Post(o, kAckReceive, [&](MPI_Request* r) {
      return MPI_Irecv(o->ack.data(), static_cast<int>(max_ack), MPI_BYTE, p.rank, o->data_tag, comm, r);
    });
    if (op == Op::kEcho && !o->eager) {
      // Laid out as the payload, without gaps: buffer after buffer.
      std::byte* at = o->echo.data();
      for (uint64_t size : o->reg->payload->sizes()) {
        Post(o, kEchoReceive, [&](MPI_Request* r) {
          return MPI_Irecv(at, static_cast<int>(size), MPI_BYTE, p.rank, o->data_tag, comm, r);
        });
        at += size;
      }
    }
    SendHeader(o, o->reg->meta_follows, p.rank);
    if (!o->eager) SendPayload(o, *o->reg, p.rank);
    if (o->outstanding == 0) Finish(*o);  // nothing could be posted
  }

  void StartExchange(size_t server, int request, int reply, uint64_t tag) override {
    const Registered* req = Lookup(request);
    const Registered* rep = Lookup(reply);
    absl::Status s = psbench::CheckExchange(server, peers_.size(),
                                            req ? req->payload : nullptr,
                                            rep ? rep->payload : nullptr);
    if (!s.ok()) {
      ready_.push_back({tag, std::move(s)});
      return;
    }
    Peer& p = peers_[server];
    if (!p.failure.ok()) {
      ready_.push_back({tag, p.failure});
      return;
    }
    PendingOp* o = TakeOp();
    o->tag = tag;
    o->op = Op::kExchange;
    o->eager = false;
    o->reg = req;
    o->reply_reg = rep;
    o->server = server;
    o->data_tag = kFirstDataTag + static_cast<int>(p.next_request++ % job_->data_tag_span());
    clock_.Started(o);
    o->first_error = MPI_SUCCESS;
    o->post_error = MPI_SUCCESS;
    o->expired = false;
    // A header of this exchange's own: the request's bytes, and so its checksums, are new.
    const Payload& payload = *req->payload;
    if (options_.validate) payload.ComputeChecksums(&o->sent_checksums);
    RequestHeader h;
    h.kind = kExchange;
    h.flags = options_.validate ? kValidate : 0;
    h.data_tag = o->data_tag;
    h.total_bytes = payload.total_bytes();
    o->header.assign(reinterpret_cast<const char*>(&h), sizeof h);
    o->header += EncodePayloadMeta(payload.sizes(), options_.validate ? &o->sent_checksums : nullptr);
    o->header_of = nullptr;
    o->meta_follows.clear();
    // The same metadata as at Register, which refused a payload with too much.
    if (o->header.size() > kMaxControlBytes) MoveMetaOut(&o->header, &o->meta_follows);
    if (o->ack.size() < req->max_reply) o->ack.resize(req->max_reply);
    MPI_Comm comm = job_->comm();
    // Receives first, so that the replies find them posted; the reply lands in the reply
    // payload's own buffers.
    Post(o, kAckReceive, [&](MPI_Request* r) {
      return MPI_Irecv(o->ack.data(), static_cast<int>(req->max_reply), MPI_BYTE, p.rank,
                       o->data_tag, comm, r);
    });
    // Registered payloads are const to a transport; a reply payload is the caller's to be
    // written.
    for (const iovec& v : rep->payload->iov()) {
      Post(o, kEchoReceive, [&](MPI_Request* r) {
        return MPI_Irecv(v.iov_base, static_cast<int>(v.iov_len), MPI_BYTE, p.rank, o->data_tag,
                         comm, r);
      });
    }
    SendHeader(o, o->meta_follows, p.rank);
    SendPayload(o, *req, p.rank);
    if (o->outstanding == 0) Finish(*o);  // nothing could be posted
  }

  absl::StatusOr<Completion> Next(absl::Time deadline) override {
    bool first_idle = true;  // a wait's deadline is checked at once (Next(absl::Now()) polls once)
    while (true) {
      if (!ready_.empty()) {
        Completion c = std::move(ready_.front());
        ready_.pop_front();
        return c;
      }
      int n = table_.Poll([this](PendingOp* o, int what, const MPI_Status&, int error, int bytes) {
        OnDone(*o, static_cast<What>(what), error, bytes);
      });
      if (table_.error() != MPI_SUCCESS) {
        return absl::InternalError(absl::StrCat("MPI_Testsome: ", MpiErrorText(table_.error())));
      }
      if (n > 0) {
        backoff_.Progressed();
        // Steady traffic from one PS must not hide that another stopped answering.
        if (clock_.Due(/*progressed=*/true)) {
          const absl::Time now = clock_.Read();
          if (now - last_expiry_check_ > absl::Milliseconds(100)) ExpireOps(now);
        }
        continue;
      }
      if (std::exchange(first_idle, false) || !backoff_.spinning() || clock_.Due(/*progressed=*/false)) {
        const absl::Time now = clock_.Read();
        if (now - last_expiry_check_ > absl::Milliseconds(1)) ExpireOps(now);
        if (!ready_.empty()) continue;
        if (now >= deadline) return absl::DeadlineExceededError("no operation finished in time");
      }
      backoff_.Idle();
    }
  }

  ClientCounts Counts() const override { return control_->Counts("mpi", table_.tally().Read()); }
  absl::StatusOr<ServerInfo> GetInfo(size_t server) override { return control_->GetInfo(server); }
  uint64_t max_message_bytes(size_t server) const override { return control_->max_message_bytes(server); }
  absl::Status Barrier(const std::string& name, int parties, int worker_index,
                       absl::Time deadline) override {
    return control_->Barrier(name, parties, worker_index, deadline);
  }

 private:
  const Registered* Lookup(int payload) const {
    return payload >= 0 && static_cast<size_t>(payload) < registered_.size()
               ? registered_[payload].get()
               : nullptr;
  }

  // The request's header on kControlTag, then, when its metadata did not fit there, the
  // metadata first on the op's tag.
  void SendHeader(PendingOp* o, const std::string& meta_follows, int rank) {
    const uint64_t eager_payload = o->eager ? o->reg->payload->total_bytes() : 0;
    Post(o, kSend, [&](MPI_Request* r) {
      return MPI_Isend(o->header.data(), static_cast<int>(o->header.size()), MPI_BYTE, rank,
                       kControlTag, job_->comm(), r);
    }, o->header.size(), eager_payload);
    if (meta_follows.empty()) return;
    Post(o, kSend, [&](MPI_Request* r) {
      return MPI_Isend(meta_follows.data(), static_cast<int>(meta_follows.size()), MPI_BYTE, rank,
                       o->data_tag, job_->comm(), r);
    }, meta_follows.size(), 0);
  }

  // The payload's buffers, one message each, straight from their memory, on the op's tag.
  void SendPayload(PendingOp* o, const Registered& reg, int rank) {
    for (const iovec& v : reg.payload->iov()) {
      Post(o, kSend, [&](MPI_Request* r) {
        return MPI_Isend(v.iov_base, static_cast<int>(v.iov_len), MPI_BYTE, rank, o->data_tag,
                         job_->comm(), r);
      }, v.iov_len, v.iov_len);
    }
  }

  // After a failed post the op posts nothing more; whatever it did post finishes or expires.
  // A send's bytes (`payload` of them a payload's) go on the tally; a receive's when it ends.
  template <typename StartFn>
  void Post(PendingOp* o, What what, StartFn&& start, uint64_t bytes = 0, uint64_t payload = 0) {
    if (o->post_error != MPI_SUCCESS) return;
    const Traffic traffic = what == kEchoReceive ? Traffic::kPayloadReceive : Traffic::kReceive;
    const int rc = what == kSend ? table_.PostSend(o, what, bytes, payload, start) : table_.Post(o, what, start, traffic);
    if (rc != MPI_SUCCESS) {
      o->post_error = rc;
      return;
    }
    ++o->outstanding;
  }

  PendingOp* TakeOp() {
    if (spare_.empty()) {
      ops_.push_back(std::make_unique<PendingOp>());
      return ops_.back().get();
    }
    PendingOp* o = spare_.back();
    spare_.pop_back();
    return o;
  }

  void OnDone(PendingOp& o, What what, int error, int count) {
    --o.outstanding;
    if (error != MPI_SUCCESS && o.first_error == MPI_SUCCESS) o.first_error = error;
    if (error == MPI_SUCCESS && what != kSend) {
      if (what == kAckReceive && o.eager && o.op == Op::kEcho) {
        AcceptEagerEcho(o, count);
      } else if (what == kAckReceive) {
        o.ack_bytes = count;
      } else {
        o.echo_bytes += count;  // one message per buffer
      }
    }
    if (o.outstanding == 0) Finish(o);
  }

  // An eager echo's one answer: the acknowledgement is judged where it lies, the payload is
  // moved to where a long echo lands (a short answer leaves an acknowledgement that does not
  // decode).
  void AcceptEagerEcho(PendingOp& o, int count) {
    std::span<const std::byte> ack, payload;
    if (!SplitEagerReply(std::as_bytes(std::span(o.ack.data(), static_cast<size_t>(count))), &ack, &payload)) return;
    o.ack_offset = 4;
    o.ack_bytes = static_cast<int>(ack.size());
    const size_t n = std::min<size_t>(payload.size(), o.reg->payload->total_bytes());
    if (n > 0) std::memcpy(o.echo.data(), payload.data(), n);
    table_.tally().Received(0, payload.size(), 0);  // the message itself is counted
    o.echo_bytes = static_cast<int>(payload.size());
  }

  // All of an op's MPI requests are done: judge it and report it.
  void Finish(PendingOp& o) {
    Peer& p = peers_[o.server];
    if (o.expired) {  // already reported; now its buffers are free again
      Recycle(o);
      return;
    }
    absl::Status s = o.post_error != MPI_SUCCESS
                         ? absl::InternalError(absl::StrCat("posting an MPI request: ",
                                                            MpiErrorText(o.post_error)))
                         : JudgeOp(o, options_.validate, &checksums_);
    if (!s.ok()) {
      s = absl::Status(s.code(), absl::StrCat("PS ", p.address, " (MPI rank ", p.rank, "): ", s.message()));
    }
    ready_.push_back({o.tag, std::move(s)});
    Recycle(o);
  }

  void Recycle(PendingOp& o) {
    o.ack_bytes = 0;
    o.ack_offset = 0;
    o.echo_bytes = 0;
    spare_.push_back(&o);
  }

  void ExpireOps(absl::Time now) {
    last_expiry_check_ = now;
    for (auto& op : ops_) {
      PendingOp& o = *op;
      if (o.outstanding == 0 || o.expired) continue;
      Peer& p = peers_[o.server];
      // Past its deadline, or behind one that was: after a lost reply, nothing to that PS
      // is trusted.
      if (o.deadline > now && p.failure.ok()) continue;
      if (p.failure.ok()) {
        p.failure = absl::DeadlineExceededError(absl::StrCat(
            "PS ", p.address, " (MPI rank ", p.rank, "): no reply within --rpc-timeout=",
            absl::FormatDuration(options_.rpc_timeout)));
      }
      o.expired = true;  // its buffers stay MPI's until its requests finish
      ready_.push_back({o.tag, p.failure});
    }
  }

  ClientOptions options_;
  std::unique_ptr<Job> job_;
  std::unique_ptr<control::ControlClient> control_;
  JobPlacement placement_;
  std::vector<Peer> peers_;
  std::vector<std::unique_ptr<Registered>> registered_;
  RequestTable<PendingOp> table_;
  std::vector<std::unique_ptr<PendingOp>> ops_;
  std::vector<PendingOp*> spare_;
  std::deque<Completion> ready_;
  std::vector<uint64_t> checksums_;
  IdleBackoff backoff_{options_.busy_poll};
  PollClock<PendingOp> clock_{options_.rpc_timeout};
  absl::Time last_expiry_check_ = absl::InfinitePast();
};

}  // namespace

absl::StatusOr<std::unique_ptr<Client>> NewMpiClient(const ClientOptions& options) {
  if (absl::Status s = TieToLauncher(); !s.ok()) return s;
  return std::make_unique<MpiClient>(options);
}

}  // namespace psbench::mpi
