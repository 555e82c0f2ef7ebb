// Worker side of grpc+verbs. gRPC reaches every PS (control plane, barriers, counters) and
// sets up one RC queue pair per PS; payloads are registered once and sent from their own
// buffers as gather lists. The thread that drives the client (Start/Next) is the completion
// thread of its device: it polls the completion queue itself, as perftest does, so no
// completion hops between threads on its way to the benchmark loop.
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "psbench.grpc.pb.h"
#include "transports/control/channel.h"
#include "transports/control/control_client.h"
#include "transports/grpc/raw_format.h"
#include "transports/verbs/arena_registry.h"
#include "transports/verbs/verbs_connection.h"
#include "transports/verbs/verbs_device.h"
#include "transports/data_meta.h"
#include "transports/exchange.h"
#include "transports/poll_clock.h"
#include "transports/verbs/verbs_client_ops.h"
#include "transports/verbs/verbs_transport.h"

namespace psbench::verbs {
namespace {

class VerbsClient final : public Client {
 public:
  explicit VerbsClient(const ClientOptions& options)
      : options_(options), control_(std::make_unique<control::ControlClient>(options)) {
    for (const auto& address : options.servers) {
      Peer p;
      p.address = address;
      p.stub = wire::PsVerbs::NewStub(control::MakeChannel(address, options_.tls));
      peers_.push_back(std::move(p));
    }
  }

  ~VerbsClient() override {
    for (Peer& p : peers_) {
      p.conn.reset();
      EndSession(p);
    }
    registered_.clear();  // deregisters their memory, before the device goes
    cq_.reset();
    device_.reset();
  }

  absl::Status Connect() override {
    if (absl::Status s = control_->Connect(); !s.ok()) return s;
    for (size_t i = 0; i < peers_.size(); ++i) {
      auto info = control_->GetInfo(i);
      if (!info.ok()) return control::LostAfterAnswering(info.status());
      if (info->transport != "grpc+verbs") {
        return absl::FailedPreconditionError(absl::StrCat(
            "PS ", peers_[i].address, " serves --transport=", info->transport,
            ", not grpc+verbs (start it with --transport=grpc+verbs)"));
      }
    }
    auto device = Device::Open(options_.rdma);
    if (!device.ok()) return device.status();
    device_ = std::move(*device);
    int per_connection = 6 * options_.rdma.queue_depth + 40;
    auto cq = CompletionQueue::Create(*device_, per_connection * static_cast<int>(peers_.size()) + 16);
    if (!cq.ok()) return cq.status();
    cq_ = std::move(*cq);
    if (cq_->entries() < per_connection * static_cast<int>(peers_.size())) {
      return absl::ResourceExhaustedError(absl::StrCat(
          device_->name(), " allows completion queues of ", cq_->entries(), " entries; ",
          peers_.size(), " PS at --rdma-queue-depth=", options_.rdma.queue_depth, " need ",
          per_connection * peers_.size(), " (lower the queue depth)"));
    }
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    for (size_t i = 0; i < peers_.size(); ++i) {
      Peer& p = peers_[i];
      auto conn = Connection::Create(*device_, cq_->cq(), options_.rdma, p.address, &moved_);
      if (!conn.ok()) return conn.status();
      wire::VerbsSetupRequest request;
      *request.mutable_worker() = (*conn)->LocalEndpoint();
      request.set_worker_host(absl::StrCat(host, " pid ", getpid()));
      auto reply = OpenSession(p, request);
      if (!reply.ok()) return reply.status();
      if (absl::Status s = (*conn)->ConnectTo(reply->ps()); !s.ok()) {
        return absl::Status(s.code(), absl::StrCat("PS ", p.address, ": ", s.message()));
      }
      by_qpn_[(*conn)->qpn()] = i;
      p.conn = std::move(*conn);
    }
    return absl::OkStatus();
  }

  size_t num_servers() const override { return peers_.size(); }
  const std::string& server_address(size_t i) const override { return peers_[i].address; }

  absl::StatusOr<int> Register(const Payload& payload) override {
    if (!device_) return absl::FailedPreconditionError("grpc+verbs: Register before Connect");
    // Bad input, found before anything is sent (pushes and echoes stream through the PS's ring).
    if (absl::Status s = control_->CheckMessageFits(payload.total_bytes(), payload.total_bytes()); !s.ok()) return s;
    auto reg = std::make_unique<Registered>();
    reg->payload = &payload;
    auto mr = arenas_.Register(device_->pd(), payload.arena());
    if (!mr.ok()) return mr.status();
    reg->mr = *std::move(mr);
    for (const iovec& v : payload.iov()) {
      if (v.iov_len > 0xffffffffull) {
        return absl::InvalidArgumentError("grpc+verbs: a buffer over 4 GiB");
      }
      reg->sges.push_back({reinterpret_cast<uint64_t>(v.iov_base), static_cast<uint32_t>(v.iov_len),
                           reg->mr->lkey});
    }
    reg->meta = EncodePayloadMeta(payload.sizes(), options_.validate ? &payload.checksums() : nullptr);
    // The PS's acknowledgement (16 bytes, a checksum per buffer, an error text of up to 200
    // bytes) comes back in one of our slots.
    uint64_t ack_meta = 16 + (options_.validate ? 8 * payload.num_buffers() : 0) + 200;
    if (kHeaderBytes + ack_meta > options_.rdma.slot_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a payload of ", payload.num_buffers(), " buffers needs ", ack_meta,
          " bytes of acknowledgement, more than one RDMA slot (--rdma-slot-size=",
          options_.rdma.slot_bytes, ") holds"));
    }
    for (const Peer& p : peers_) {
      if (p.conn && reg->meta.size() > p.conn->MaxMetaBytes()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "a payload of ", payload.num_buffers(), " buffers needs ", reg->meta.size(),
            " bytes of metadata, more than one RDMA slot of PS ", p.address,
            " holds; give it a larger --rdma-slot-size"));
      }
    }
    registered_.push_back(std::move(reg));
    return static_cast<int>(registered_.size() - 1);
  }

  void Unregister(int payload) override {
    auto& r = registered_[payload];
    if (!r) return;
    // Unsignaled writes that read this payload may not be retired yet, and an adapter may
    // still retransmit from them: drain every send queue before the memory goes.
    absl::Time deadline = absl::Now() + absl::Seconds(2);
    ibv_wc wc[32];
    while (absl::Now() < deadline) {
      bool busy = false;
      for (Peer& p : peers_) busy |= p.conn && p.failure.ok() && !p.conn->SendsRetired();
      if (!busy) break;
      int n = cq_->Poll(wc, 32);
      for (int i = 0; i < n; ++i) Handle(wc[i]);
    }
    r.reset();  // the memory's registration goes with its last payload
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
    std::unique_ptr<PendingOp> pending = TakeOp(p);
    pending->tag = tag;
    pending->op = op;
    pending->reg = registered_[payload].get();
    pending->request_id = p.next_request++;
    clock_.Started(pending.get());
    if (op == Op::kEcho && options_.validate) pending->checksums.Reset(&pending->reg->payload->sizes());
    OutMessage m;
    m.kind = op == Op::kEcho ? kEcho : kPush;
    m.flags = options_.validate ? kValidate : 0;
    m.request_id = pending->request_id;
    m.shared_meta = pending->reg->meta;
    m.shared_data = pending->reg->sges;
    m.data_bytes = pending->reg->payload->total_bytes();
    p.in_flight.push_back(std::move(pending));
    p.conn->Send(std::move(m));
    if (!p.conn->failure().ok()) FailPeer(server, p.conn->failure());
  }

  void StartExchange(size_t server, int request, int reply, uint64_t tag) override {
    const Registered* req = Lookup(request);
    const Registered* rep = Lookup(reply);
    absl::Status s = psbench::CheckExchange(server, peers_.size(),
                                            req ? req->payload : nullptr,
                                            rep ? rep->payload : nullptr);
    // The PS's reply metadata (sizes, checksums, an error text) comes in one of our slots.
    if (s.ok() && kHeaderBytes + MaxExchangeReplyMetaBytes(req->payload->num_buffers()) >
                      options_.rdma.slot_bytes) {
      s = absl::InvalidArgumentError(absl::StrCat(
          "an exchange of ", req->payload->num_buffers(), " buffers needs ",
          MaxExchangeReplyMetaBytes(req->payload->num_buffers()),
          " bytes of reply metadata, more than one RDMA slot (--rdma-slot-size=",
          options_.rdma.slot_bytes, ") holds"));
    }
    if (!s.ok()) {
      ready_.push_back({tag, std::move(s)});
      return;
    }
    Peer& p = peers_[server];
    if (!p.failure.ok()) {
      ready_.push_back({tag, p.failure});
      return;
    }
    std::unique_ptr<PendingOp> pending = TakeOp(p);
    pending->tag = tag;
    pending->op = Op::kExchange;
    pending->reg = req;
    pending->reply_reg = rep;
    pending->request_id = p.next_request++;
    clock_.Started(pending.get());
    const Payload& payload = *req->payload;
    // Metadata of this exchange's own: the request's bytes, and so its checksums, are new.
    if (options_.validate) payload.ComputeChecksums(&pending->sent_checksums);
    OutMessage m;
    m.kind = kExchange;
    m.flags = options_.validate ? kValidate : 0;
    m.request_id = pending->request_id;
    m.own_meta = EncodePayloadMeta(payload.sizes(),
                                   options_.validate ? &pending->sent_checksums : nullptr);
    m.shared_data = req->sges;
    m.data_bytes = payload.total_bytes();
    p.in_flight.push_back(std::move(pending));
    p.conn->Send(std::move(m));
    if (!p.conn->failure().ok()) FailPeer(server, p.conn->failure());
  }

  absl::StatusOr<Completion> Next(absl::Time deadline) override {
    ibv_wc wc[32];
    bool first_idle = true;  // a wait's deadline is checked at once (Next(absl::Now()) polls once)
    while (true) {
      if (!ready_.empty()) {
        Completion c = std::move(ready_.front());
        ready_.pop_front();
        return c;
      }
      int n = cq_ ? cq_->Poll(wc, 32) : 0;
      if (n < 0) return absl::InternalError("ibv_poll_cq failed");
      if (n > 0) {
        progressed_ = true;
        for (int i = 0; i < n; ++i) Handle(wc[i]);
        // Steady traffic from one PS must not hide that another stopped answering.
        if (clock_.Due(/*progressed=*/true)) {
          const absl::Time now = ReadClock();
          if (now - last_expiry_check_ > absl::Milliseconds(100)) {
            last_expiry_check_ = now;
            ExpireOps(now);
          }
        }
        continue;
      }
      // Without busy polling every idle poll sleeps below, which costs more than a read.
      if (!std::exchange(first_idle, false) && options_.rdma.busy_poll && !clock_.Due(/*progressed=*/false)) {
        continue;
      }
      const absl::Time now = ReadClock();
      ExpireOps(now);
      if (!ready_.empty()) continue;
      if (now >= deadline) return absl::DeadlineExceededError("no operation finished in time");
      if (now - last_progress_ > absl::Seconds(1) && now - last_probe_ > absl::Seconds(1)) {
        last_probe_ = now;
        CheckStalledPeers();
        continue;
      }
      if (options_.rdma.busy_poll || !cq_) continue;
      auto got = cq_->Sleep(std::min(deadline - now, absl::Seconds(1)), wc, 32);
      if (!got.ok()) return got.status();
      progressed_ |= *got > 0;
      for (int i = 0; i < *got; ++i) Handle(wc[i]);
    }
  }

  ClientCounts Counts() const override { return control_->Counts("rdma", moved_.Read()); }
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

  // A pending op, reused (no allocation per op).
  std::unique_ptr<PendingOp> TakeOp(Peer& p) {
    if (p.in_flight.empty()) progressed_ = true;  // a stall is counted from the next clock read
    if (spare_ops_.empty()) return std::make_unique<PendingOp>();
    std::unique_ptr<PendingOp> op = std::move(spare_ops_.back());
    spare_ops_.pop_back();
    op->received = 0;
    op->ps_error.clear();
    op->reply_reg = nullptr;
    op->reply_started = false;
    return op;
  }

  // Starts the session call and waits, up to --connect-timeout, for the PS's endpoint.
  absl::StatusOr<wire::VerbsSetupReply> OpenSession(Peer& p, const wire::VerbsSetupRequest& request) {
    p.session_context = std::make_unique<grpc::ClientContext>();
    p.session_cq = std::make_unique<grpc::CompletionQueue>();
    p.session = p.stub->AsyncSession(p.session_context.get(), request, p.session_cq.get(),
                                     reinterpret_cast<void*>(1));
    wire::VerbsSetupReply reply;
    absl::Time deadline = absl::Now() + options_.connect_timeout;
    bool read_posted = false;
    while (true) {
      void* tag;
      bool ok;
      auto status = p.session_cq->AsyncNext(&tag, &ok, absl::ToChronoTime(deadline));
      if (status == grpc::CompletionQueue::TIMEOUT) {
        // It answered on the control plane a moment ago: a PS that stopped, not a wrong --ps.
        return absl::DeadlineExceededError(absl::StrCat(
            "PS ", p.address, " stopped answering during RDMA setup (no reply within ",
            absl::FormatDuration(options_.connect_timeout), ")"));
      }
      if (status != grpc::CompletionQueue::GOT_EVENT || !ok) break;
      if (read_posted) {
        p.session->Read(&p.session_end, reinterpret_cast<void*>(4));
        return reply;
      }
      p.session->Read(&reply, reinterpret_cast<void*>(2));
      read_posted = true;
    }
    // The call ended without a reply: its status says why.
    grpc::Status status;
    p.session->Finish(&status, reinterpret_cast<void*>(3));
    void* tag;
    bool ok;
    while (p.session_cq->AsyncNext(&tag, &ok, absl::ToChronoTime(deadline)) ==
               grpc::CompletionQueue::GOT_EVENT &&
           tag != reinterpret_cast<void*>(3)) {
    }
    p.session.reset();
    return control::EndedAfterAnswering(
        status, absl::StrCat("PS ", p.address, ": RDMA setup failed: ", status.error_message()));
  }

  void EndSession(Peer& p) {
    if (!p.session_cq) return;
    grpc::Status status;  // Finish writes it when the queue is drained, below
    if (p.session) {
      p.session_context->TryCancel();
      p.session->Finish(&status, reinterpret_cast<void*>(3));
    }
    p.session_cq->Shutdown();
    void* tag;
    bool ok;
    while (p.session_cq->Next(&tag, &ok)) {
    }
    p.session.reset();
    p.session_cq.reset();
    p.session_context.reset();
  }

  void Handle(const ibv_wc& wc) {
    auto it = by_qpn_.find(wc.qp_num);
    if (it == by_qpn_.end()) return;
    size_t server = it->second;
    Peer& p = peers_[server];
    if (!p.failure.ok()) return;
    absl::Status s = p.conn->OnCompletion(wc, [&](const InChunk& c) { OnChunk(server, c); });
    if (!s.ok()) FailPeer(server, s);
  }

  // A PS that died while we only wait for its reply may never make our adapter fail a send
  // (Soft-RoCE does not always report the retry timeout). So when nothing has moved for a
  // second: a zero-byte RDMA write to it, and a look at its session call, which ends at once
  // when the PS process is gone (a stopped PS keeps it open and is waited for).
  void CheckStalledPeers() {
    const std::chrono::system_clock::time_point past{};  // poll without waiting
    for (size_t i = 0; i < peers_.size(); ++i) {
      Peer& p = peers_[i];
      if (!p.conn || p.in_flight.empty() || !p.failure.ok()) continue;
      p.conn->Probe();
      void* tag;
      bool ok;
      if (p.session_cq->AsyncNext(&tag, &ok, past) == grpc::CompletionQueue::GOT_EVENT) {
        FailPeer(i, absl::UnavailableError(
                        "the PS ended its RDMA session (its process exited or shut down)"));
      }
    }
  }

  absl::Time ReadClock() {
    const absl::Time now = clock_.Read();
    if (std::exchange(progressed_, false)) last_progress_ = now;
    return now;
  }

  void ExpireOps(absl::Time now) {
    for (size_t i = 0; i < peers_.size(); ++i) {
      Peer& p = peers_[i];
      if (p.failure.ok() && !p.in_flight.empty() && p.in_flight.front()->deadline <= now) {
        FailPeer(i, absl::DeadlineExceededError(
                        absl::StrCat("no reply within --rpc-timeout=",
                                     absl::FormatDuration(options_.rpc_timeout))));
      }
    }
  }

  // Every op in flight to the PS fails, and so does every later one: after a lost reply the
  // connection's order is gone.
  void FailPeer(size_t server, const absl::Status& cause) {
    Peer& p = peers_[server];
    if (p.failure.ok()) {
      p.failure = absl::Status(cause.code(), absl::StrCat("PS ", p.address, ": ", cause.message()));
      if (p.conn) p.conn->Fail(p.failure);  // the PS's next send to us fails too
    }
    for (auto& op : p.in_flight) {
      ready_.push_back({op->tag, p.failure});
      spare_ops_.push_back(std::move(op));
    }
    p.in_flight.clear();
  }

  using OpIt = std::deque<std::unique_ptr<PendingOp>>::iterator;

  void Complete(size_t server, OpIt op, absl::Status status) {
    Peer& p = peers_[server];
    if (!status.ok()) {
      status = absl::Status(status.code(), absl::StrCat("PS ", p.address, ": ", status.message()));
    }
    ready_.push_back({(*op)->tag, std::move(status)});
    spare_ops_.push_back(std::move(*op));  // reused: no allocation per op
    p.in_flight.erase(op);
  }

  void OnChunk(size_t server, const InChunk& c) {
    Peer& p = peers_[server];
    Connection& conn = *p.conn;
    const ChunkHeader& h = *c.header;
    // Usually the oldest; an exchange's reply may come before others.
    auto it = std::find_if(p.in_flight.begin(), p.in_flight.end(),
                           [&](const auto& op) { return op->request_id == h.request_id; });
    if (it == p.in_flight.end()) {
      conn.ReleaseSlot(c.slot);
      FailPeer(server, absl::DataLossError(absl::StrCat(
                           "reply to request ", h.request_id, ", which is not in flight")));
      return;
    }
    PendingOp& op = **it;
    if (op.op == Op::kExchange) {
      OnExchangeReply(server, it, c);
      return;
    }
    const Payload& payload = *op.reg->payload;
    if (op.op == Op::kPush) {
      auto ack = h.kind == kAck ? DecodeAckMeta(c.meta)
                                : absl::DataLossError("expected an acknowledgement");
      conn.ReleaseSlot(c.slot);
      absl::Status s;
      if (!ack.ok()) {
        s = ack.status();
      } else if (!ack->ok) {
        s = absl::Status(ack->code, absl::StrCat("PS: ", ack->error));
      } else if (ack->bytes_received != payload.total_bytes()) {
        s = absl::DataLossError(absl::StrFormat("PS received %u of %u bytes", ack->bytes_received,
                                                payload.total_bytes()));
      } else if (options_.validate) {
        s = grpc_transport::CompareChecksums(payload.checksums(), ack->checksums, payload.sizes());
      }
      Complete(server, it, s);
      return;
    }
    if (h.kind != kEchoReply || h.total_bytes != payload.total_bytes() || h.offset != op.received) {
      conn.ReleaseSlot(c.slot);
      FailPeer(server, absl::DataLossError("echo came back out of shape"));
      return;
    }
    if (options_.validate) op.checksums.Update(c.data);
    if (h.flags & kPsMismatch) {
      op.ps_error.assign(reinterpret_cast<const char*>(c.meta.data()), c.meta.size());
    }
    op.received += c.data.size();
    conn.ReleaseSlot(c.slot);
    if (op.received < payload.total_bytes()) return;
    absl::Status s;
    if (!op.ps_error.empty()) {
      s = absl::DataLossError(absl::StrCat("PS: ", op.ps_error));
    } else if (options_.validate) {
      s = grpc_transport::CompareChecksums(payload.checksums(), op.checksums.checksums(), payload.sizes());
    }
    Complete(server, it, s);
  }

  // An exchange's reply: the PS's verdict in the first chunk's metadata, then the reply,
  // copied out of our slots into the reply payload's buffers as it comes.
  void OnExchangeReply(size_t server, OpIt it, const InChunk& c) {
    Connection& conn = *peers_[server].conn;
    const ChunkHeader& h = *c.header;
    PendingOp& op = **it;
    const Payload& request = *op.reg->payload;
    // The connection's order is lost with a reply out of shape: the PS is failed.
    auto out_of_shape = [&](absl::string_view why) {
      conn.ReleaseSlot(c.slot);
      FailPeer(server, absl::DataLossError(why));
    };
    if (h.kind != kExchangeReply) return out_of_shape("an exchange reply of the wrong kind");
    if (!op.reply_started) {
      if (!(h.flags & kFirst)) return out_of_shape("an exchange reply without its start");
      if (absl::Status s = DecodeExchangeReplyMeta(c.meta, &op.reply); !s.ok()) {
        return out_of_shape(s.message());
      }
      op.reply_started = true;
      if (op.reply.code != absl::StatusCode::kOk) {
        if (h.total_bytes != 0) return out_of_shape("an exchange reply with an error and data");
        conn.ReleaseSlot(c.slot);
        Complete(server, it, absl::Status(op.reply.code, op.reply.error));
        return;
      }
      if (absl::Status s = CheckReplySizes(op.reply.sizes, request.sizes()); !s.ok()) {
        return out_of_shape(s.message());
      }
      if (h.total_bytes != request.total_bytes()) {
        return out_of_shape("an exchange reply of another size than its buffers");
      }
      op.reply_buffers = ReplyBuffers(*op.reply_reg->payload);
      op.writer.Reset(op.reply_buffers);
    }
    if (h.offset != op.received || !op.writer.Write(c.data)) {
      return out_of_shape("an exchange reply out of order");
    }
    op.received += c.data.size();
    conn.ReleaseSlot(c.slot);
    if (op.received < request.total_bytes()) return;
    absl::Status s;
    if (options_.validate) {
      if (op.reply.checksums.size() != request.num_buffers()) {
        s = absl::DataLossError("the PS sent no checksums of its exchange reply");
      } else {
        op.reply_reg->payload->ComputeChecksums(&checksums_);
        s = grpc_transport::CompareChecksums(op.reply.checksums, checksums_, request.sizes());
      }
    }
    Complete(server, it, s);
  }

  ClientOptions options_;
  DataTally moved_{DataTally::kOneWriter};  // the connections', on the driving thread
  std::unique_ptr<control::ControlClient> control_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<CompletionQueue> cq_;
  std::vector<Peer> peers_;
  absl::flat_hash_map<uint32_t, size_t> by_qpn_;
  std::vector<std::unique_ptr<Registered>> registered_;
  ArenaRegistry arenas_;  // memory registrations, shared by the payloads over one arena
  std::deque<Completion> ready_;
  std::vector<std::unique_ptr<PendingOp>> spare_ops_;
  std::vector<uint64_t> checksums_;  // scratch
  PollClock<PendingOp> clock_{options_.rpc_timeout};
  bool progressed_ = false;  // since the clock's last read: a completion, or a peer's first op
  absl::Time last_probe_ = absl::InfinitePast();
  absl::Time last_progress_ = absl::Now();
  absl::Time last_expiry_check_ = absl::InfinitePast();
};

}  // namespace

std::unique_ptr<Client> NewVerbsClient(const ClientOptions& options) {
  return std::make_unique<VerbsClient>(options);
}

}  // namespace psbench::verbs
