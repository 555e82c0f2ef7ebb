// PS side of grpc+verbs. The gRPC server (control plane) gains a PsVerbs service that sets up
// one RC queue pair per worker and PS; one completion thread per device then serves every
// connection: it checks pushes and acknowledges them, echoes payloads straight back from
// the slot they arrived in, and hands exchanges to the exchange handler, whose answers come
// back to it through a queue (the handler may answer from any thread) to be posted.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "payloads/size.h"
#include "psbench.grpc.pb.h"
#include "transports/control/control_server.h"
#include "transports/grpc/raw_format.h"
#include "transports/verbs/verbs_connection.h"
#include "transports/verbs/verbs_device.h"
#include "transports/data_meta.h"
#include "transports/exchange.h"
#include "transports/verbs/verbs_transport.h"

namespace psbench::verbs {
namespace {

// The request a connection is receiving (chunks of one connection arrive in order).
struct Request {
  uint32_t id = 0;
  ChunkKind kind = kPush;
  uint64_t total = 0;
  uint64_t received = 0;
  bool validate = false;
  bool corrupt = false;  // fault injection: damage one byte of this payload
  PayloadMeta meta;
  BufferChecksums checksums;
  // kExchange.
  bool meta_ok = false;
  absl::Status refused;  // why the handler will not see it (set on the first chunk)
  std::shared_ptr<ExchangeBuffers> exchange;
  bool in_slot = false;  // all in the first chunk's slot, where the handler sees it
  ScatterWriter gather;  // otherwise: copied chunk by chunk into pooled memory
};

struct PsConnection {
  std::unique_ptr<Connection> conn;
  uint64_t serial = 0;  // QP numbers are reused: this is not
  Request request;
  bool failure_logged = false;
  // Exchanges a handler holds in one of this connection's slots. A held slot holds back the
  // credits of every slot after it, so at most one is lent at a time; others are copied.
  int slots_lent = 0;
};

// An exchange the handler holds, until its answer is sent.
struct HeldExchange {
  uint32_t qpn = 0;
  uint64_t serial = 0;
  uint32_t request_id = 0;
  std::shared_ptr<ExchangeBuffers> buffers;
  int64_t slot = -1;  // lent: the reply goes back from the slot, which then is freed
  ibv_sge slot_data{};
};

// An exchange's verdict, queued by the handler's `done` for the completion thread.
struct Answer {
  uint64_t id;
  absl::Status status;
  bool answered;  // false: cancelled, and the handler may still write the reply memory
};

// A reply gathered from pooled memory: the gather list, and the buffers it points into.
struct ReplyGather {
  std::shared_ptr<ExchangeBuffers> buffers;
  std::vector<ibv_sge> sges;
};

class VerbsServer final : public Server, public wire::PsVerbs::Service {
 public:
  explicit VerbsServer(const ServerOptions& options) : options_(options) {}

  ~VerbsServer() override {
    Shutdown();
    Wait();
    hub_->Close(ExchangeCancelledError());  // answers from now on do nothing
  }

  absl::StatusOr<int> Start() override {
    auto device = Device::Open(options_.rdma);
    if (!device.ok()) return device.status();
    device_ = std::move(*device);
    // Pooled exchange memory is registered once per block; a block (and so the device) may
    // outlive this server while a handler holds it.
    BlockPool::Registrar registrar;
    registrar.prepare = [device = device_](std::byte* data, size_t size, void** handle,
                                           uint32_t* key) {
      ibv_mr* mr = ibv_reg_mr(device->pd(), data, size, IBV_ACCESS_LOCAL_WRITE);
      if (mr == nullptr) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "ibv_reg_mr of ", size, " bytes for an exchange failed: ", ErrnoText(errno)));
      }
      *handle = mr;
      *key = mr->lkey;
      return absl::OkStatus();
    };
    registrar.release = [device = device_](void* handle) {
      ibv_dereg_mr(static_cast<ibv_mr*>(handle));
    };
    pool_ = BlockPool::Create(std::move(registrar));
    auto cq = CompletionQueue::Create(*device_, 65536);
    if (!cq.ok()) return cq.status();
    cq_ = std::move(*cq);
    control::DataPlane data_plane;
    data_plane.transport = "grpc+verbs";
    data_plane.describe = [text = absl::StrCat("RDMA WRITE WITH IMMEDIATE on ", device_->Describe())] {
      return text;
    };
    data_plane.services.push_back(this);
    data_plane.plane = "rdma";
    data_plane.counters = [this] { return control::DataCounters{rpcs_.load(), bytes_.load(), moved_.Read()}; };
    control_ = std::make_unique<control::ControlServer>(options_, std::move(data_plane));
    auto port = control_->Start();
    if (!port.ok()) return port.status();
    poller_ = std::thread([this] { Serve(); });
    started_ = true;
    return port;
  }

  void Wait() override {
    if (!started_) return;
    control_->Wait();
    std::call_once(stop_once_, [this] {
      stop_ = true;
      cq_->Wake();
      poller_.join();
      connections_.clear();
      {
        std::lock_guard lock(mu_);
        added_.clear();
      }
    });
  }

  void Shutdown() override {
    stop_sessions_ = true;
    // The completion thread fails the exchanges the handler holds while their connections
    // are still there to carry the news.
    closing_ = true;
    if (cq_) cq_->Wake();
    if (control_) control_->Shutdown();
  }

  // PsVerbs: runs on gRPC's threads, one per connected worker while its session lasts.
  grpc::Status Session(grpc::ServerContext* context, const wire::VerbsSetupRequest* request,
                       grpc::ServerWriter<wire::VerbsSetupReply>* writer) override {
    std::string peer = request->worker_host().empty() ? context->peer() : request->worker_host();
    const uint32_t need = ConnectionBudget();
    {
      std::lock_guard lock(mu_);
      if (cq_budget_used_ + need > static_cast<uint32_t>(cq_->entries())) {
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                            absl::StrCat("the PS's RDMA completion queue (", cq_->entries(),
                                         " entries) is full: too many workers for "
                                         "--rdma-queue-depth=", options_.rdma.queue_depth));
      }
      cq_budget_used_ += need;
    }
    auto conn = Connection::Create(*device_, cq_->cq(), options_.rdma, peer, &moved_);
    absl::Status s = conn.ok() ? (*conn)->ConnectTo(request->worker()) : conn.status();
    if (!s.ok()) {
      std::lock_guard lock(mu_);
      cq_budget_used_ -= need;
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, absl::StrCat("PS: ", s.message()));
    }
    wire::VerbsSetupReply reply;
    *reply.mutable_ps() = (*conn)->LocalEndpoint();
    uint32_t qpn = (*conn)->qpn();
    {
      std::lock_guard lock(mu_);
      added_.push_back(std::move(*conn));
    }
    changed_ = true;
    cq_->Wake();
    if (writer->Write(reply)) {
      while (!context->IsCancelled() && !stop_sessions_) absl::SleepFor(absl::Milliseconds(50));
    }
    {
      std::lock_guard lock(mu_);
      removed_.push_back(qpn);
    }
    changed_ = true;
    cq_->Wake();
    return grpc::Status::OK;
  }

 private:
  void ApplyChanges() {
    std::vector<std::unique_ptr<Connection>> added;
    std::vector<uint32_t> removed;
    {
      std::lock_guard lock(mu_);
      added.swap(added_);
      removed.swap(removed_);
    }
    // Removals first: a QP number is free for reuse only once its QP is destroyed here. A
    // session that ended before its connection was added here (its worker gone at once) is
    // removed from the additions: dropped first, it would find nothing and stay for good.
    for (uint32_t qpn : removed) {
      auto pending = std::find_if(added.begin(), added.end(), [qpn](const auto& c) { return c->qpn() == qpn; });
      if (pending == added.end()) {
        Drop(qpn);
      } else {
        added.erase(pending);
        ReleaseBudget();
      }
    }
    for (auto& c : added) {
      uint32_t qpn = c->qpn();
      auto pc = std::make_unique<PsConnection>();
      pc->conn = std::move(c);
      pc->serial = next_serial_++;
      connections_[qpn] = std::move(pc);
    }
  }

  void Drop(uint32_t qpn) {
    if (connections_.erase(qpn) > 0) ReleaseBudget();
  }

  // A connection's share of the completion queue (send + receive queue entries).
  uint32_t ConnectionBudget() const { return 6 * options_.rdma.queue_depth + 40; }
  void ReleaseBudget() {
    std::lock_guard lock(mu_);
    cq_budget_used_ -= ConnectionBudget();
  }

  void Serve() {
    ibv_wc wc[32];
    while (!stop_) {
      if (changed_.exchange(false)) ApplyChanges();
      if (closing_ && !closed_) {
        closed_ = true;
        hub_->Close(ExchangeCancelledError());  // queues an answer for each held exchange
      }
      if (answers_pending_.load(std::memory_order_acquire)) SendAnswers();
      int n = cq_->Poll(wc, 32);
      if (n == 0 && !options_.rdma.busy_poll) {
        auto got = cq_->Sleep(absl::Milliseconds(200), wc, 32);
        n = got.ok() ? *got : 0;
        if (n == 0 && changed_.exchange(false)) ApplyChanges();
      }
      for (int i = 0; i < n; ++i) Handle(wc[i]);
    }
  }

  void Handle(const ibv_wc& wc) {
    auto it = connections_.find(wc.qp_num);
    if (it == connections_.end()) {
      // Perhaps one whose setup finished after this thread last looked.
      ApplyChanges();
      it = connections_.find(wc.qp_num);
      if (it == connections_.end()) return;  // a connection already dropped
    }
    PsConnection& pc = *it->second;
    absl::Status s = pc.conn->OnCompletion(wc, [&](const InChunk& c) { OnChunk(pc, c); });
    if (!s.ok() && !pc.failure_logged) {
      pc.failure_logged = true;
      // Its session call still holds the QP number; the connection is freed when that ends.
      std::fprintf(stderr, "psbench-ps: worker %s: %s\n", pc.conn->peer().c_str(),
                   std::string(s.message()).c_str());
    }
  }

  bool ShouldCorrupt() {
    return options_.corrupt_every > 0 &&
           (received_.fetch_add(1) + 1) % options_.corrupt_every == 0;
  }

  void OnChunk(PsConnection& pc, const InChunk& c) {
    const ChunkHeader& h = *c.header;
    Request& r = pc.request;
    Connection& conn = *pc.conn;
    if (h.kind == kExchange) {
      OnExchangeChunk(pc, c);
      return;
    }
    if (h.kind != kPush && h.kind != kEcho) {
      conn.ReleaseSlot(c.slot);
      return;
    }
    if (h.flags & kFirst) {
      r.id = h.request_id;
      r.kind = static_cast<ChunkKind>(h.kind);
      r.total = h.total_bytes;
      r.received = 0;
      r.validate = h.flags & kValidate;
      r.corrupt = ShouldCorrupt();
      // A malformed one leaves no sizes; the request then fails as data loss, below.
      if (!DecodePayloadMeta(c.meta, r.validate, h.total_bytes, &r.meta).ok()) r.validate = false;
      r.checksums.Reset(&r.meta.sizes);
    } else if (h.request_id != r.id || h.offset != r.received) {
      conn.ReleaseSlot(c.slot);
      return;  // out of sequence: cannot happen on an RC queue pair
    }
    std::span<std::byte> data = c.data;
    bool damage = r.corrupt && !data.empty();
    if (damage) r.corrupt = false;
    // Injected faults hit a push before the PS checks it, an echo after (the worker checks).
    if (damage && r.kind == kPush) data[data.size() / 2] ^= std::byte{0x5a};
    if (r.validate) r.checksums.Update(data);
    if (damage && r.kind == kEcho) data[data.size() / 2] ^= std::byte{0x5a};
    r.received += data.size();
    bool last = r.received == r.total;
    absl::Status verdict;
    if (last && r.meta.sizes.empty() && r.total > 0) {
      verdict = absl::DataLossError("malformed payload metadata");
    } else if (last && r.validate) {
      verdict = grpc_transport::CompareChecksums(r.meta.checksums, r.checksums.checksums(), r.meta.sizes);
    }
    if (last && verdict.ok()) {
      rpcs_.fetch_add(1, std::memory_order_relaxed);
      bytes_.fetch_add(r.total, std::memory_order_relaxed);
    }
    if (r.kind == kPush) {
      conn.ReleaseSlot(c.slot);
      if (!last) return;
      AckMeta ack;
      ack.bytes_received = r.received;
      ack.ok = verdict.ok();
      ack.code = verdict.code();
      if (r.validate) ack.checksums = r.checksums.checksums();
      if (!verdict.ok()) ack.error = std::string(verdict.message()).substr(0, 200);
      OutMessage m;
      m.kind = kAck;
      m.request_id = r.id;
      m.own_meta = EncodeAckMeta(ack);
      conn.Send(std::move(m));
      return;
    }
    if (data.empty() && !last) {
      conn.ReleaseSlot(c.slot);
      return;
    }
    // Echo: write the bytes back from the slot they arrived in (no copy).
    OutMessage m;
    m.kind = kEchoReply;
    m.request_id = r.id;
    if (last && !verdict.ok()) {
      m.flags = kPsMismatch;
      m.own_meta = std::string(verdict.message()).substr(0, 200);  // the worker reports it
    }
    m.own_sge = {reinterpret_cast<uint64_t>(data.data()), static_cast<uint32_t>(data.size()), c.lkey};
    m.data_bytes = data.size();
    m.payload_offset = h.offset;
    m.payload_total = r.total;
    m.release_slot = c.slot;
    conn.Send(std::move(m));
  }

  // An exchange's chunks. A request that came whole in one slot is lent to the handler in
  // place (it reads the request and writes the reply there, which goes back from there);
  // any other is copied, chunk by chunk, into registered pooled memory, its slots freed at
  // once, and the reply goes back from that memory.
  void OnExchangeChunk(PsConnection& pc, const InChunk& c) {
    const ChunkHeader& h = *c.header;
    Request& r = pc.request;
    Connection& conn = *pc.conn;
    if (h.flags & kFirst) {
      r.id = h.request_id;
      r.kind = kExchange;
      r.total = h.total_bytes;
      r.received = 0;
      r.validate = h.flags & kValidate;
      r.corrupt = ShouldCorrupt();
      r.meta_ok = DecodePayloadMeta(c.meta, r.validate, h.total_bytes, &r.meta).ok();
      r.exchange.reset();
      r.in_slot = false;
      r.refused = absl::OkStatus();
      if (hub_->handler() == nullptr) {
        r.refused = NoExchangeHandlerError();
      } else if (r.total > options_.max_message_bytes) {
        // Refused before any memory is taken for it; its chunks are drained slot by slot.
        r.refused = absl::ResourceExhaustedError(absl::StrCat(
            "PS: a request of ", r.total, " bytes is over the PS's --max-message-size=",
            FormatSize(options_.max_message_bytes)));
      } else if (!r.meta_ok) {
        r.refused = absl::DataLossError("PS: malformed payload metadata");
      } else {
        r.refused = PlaceExchange(pc, c);
      }
    } else if (r.kind != kExchange || h.request_id != r.id || h.offset != r.received) {
      conn.ReleaseSlot(c.slot);
      return;  // out of sequence: cannot happen on an RC queue pair
    }
    std::span<std::byte> data = c.data;
    // Injected faults hit an exchange before the PS checks it, as a push.
    if (r.corrupt && !data.empty()) {
      data[data.size() / 2] ^= std::byte{0x5a};
      r.corrupt = false;
    }
    if (r.exchange && !r.in_slot) r.gather.Write(data);
    r.received += data.size();
    if (!r.in_slot) conn.ReleaseSlot(c.slot);
    if (r.received < r.total) return;
    absl::Status verdict = r.refused;
    if (verdict.ok() && r.validate) {
      if (absl::Status s = VerifyRequest(*r.exchange, r.meta.checksums); !s.ok()) {
        verdict = absl::DataLossError(absl::StrCat("PS: ", s.message()));
      }
    }
    if (!verdict.ok()) {
      if (r.in_slot) conn.ReleaseSlot(c.slot);
      r.exchange.reset();
      SendExchangeReply(conn, r.id, verdict, nullptr);
      return;
    }
    rpcs_.fetch_add(1, std::memory_order_relaxed);
    bytes_.fetch_add(r.total, std::memory_order_relaxed);
    const uint64_t id = next_exchange_++;
    HeldExchange& x = held_[id];
    x.qpn = conn.qpn();
    x.serial = pc.serial;
    x.request_id = r.id;
    x.buffers = std::move(r.exchange);
    if (r.in_slot) {
      x.slot = c.slot;
      x.slot_data = {reinterpret_cast<uint64_t>(c.data.data()), static_cast<uint32_t>(c.data.size()),
                     c.lkey};
      ++pc.slots_lent;
    }
    // `done` may run on any thread: it only queues the verdict, and wakes this thread.
    auto deliver = [this, id](const absl::Status& s, bool answered) {
      {
        std::lock_guard lock(answers_mu_);
        answers_.push_back({id, s, answered});
        answers_pending_.store(true, std::memory_order_release);
      }
      cq_->Wake();
    };
    if (!hub_->Run(held_[id].buffers, std::move(deliver))) {
      {
        std::lock_guard lock(answers_mu_);
        answers_.push_back({id, ExchangeCancelledError(), /*answered=*/true});
      }
      answers_pending_.store(true, std::memory_order_release);
    }
  }

  // Where the handler will see an exchange's buffers. Returns why it cannot, if it cannot.
  absl::Status PlaceExchange(PsConnection& pc, const InChunk& c) {
    Request& r = pc.request;
    auto buffers = std::make_shared<ExchangeBuffers>();
    buffers->sizes = r.meta.sizes;
    buffers->validate = r.validate;
    if (c.header->data_bytes == r.total && pc.slots_lent == 0) {
      r.in_slot = true;
      buffers->keep_owner = device_;
      buffers->keep = pc.conn->recv_region();  // may outlive the connection, held
      uint64_t offset = 0;
      for (uint64_t size : buffers->sizes) {
        std::byte* p = size == 0 ? nullptr : c.data.data() + offset;
        buffers->request.emplace_back(p, size);
        buffers->reply.emplace_back(p, size);
        offset += size;
      }
    } else {
      std::vector<uint64_t> offsets;
      auto block = pool_->Take(LayOutBuffers(buffers->sizes, &offsets));
      if (!block.ok()) return absl::Status(block.status().code(), absl::StrCat("PS: ", block.status().message()));
      buffers->block = std::move(*block);
      buffers->PlaceReply(offsets);
      buffers->request.assign(buffers->reply.begin(), buffers->reply.end());  // in place
    }
    r.exchange = std::move(buffers);
    if (!r.in_slot) r.gather.Reset(r.exchange->reply);
    return absl::OkStatus();
  }

  // Posts what the handler's `done` queued.
  void SendAnswers() {
    std::vector<Answer> answers;
    {
      std::lock_guard lock(answers_mu_);
      answers.swap(answers_);
      answers_pending_.store(false, std::memory_order_relaxed);
    }
    for (const Answer& a : answers) {
      auto it = held_.find(a.id);
      if (it == held_.end()) continue;
      HeldExchange x = std::move(it->second);
      held_.erase(it);
      auto c = connections_.find(x.qpn);
      if (c == connections_.end() || c->second->serial != x.serial) continue;  // worker gone
      PsConnection& pc = *c->second;
      if (!a.answered) {
        // Cancelled: the handler may still write the slot, which therefore stays lent (the
        // connection is going away).
        SendExchangeReply(*pc.conn, x.request_id, a.status, nullptr);
        continue;
      }
      if (x.slot >= 0) --pc.slots_lent;
      if (!a.status.ok()) {
        if (x.slot >= 0) pc.conn->ReleaseSlot(static_cast<uint32_t>(x.slot));
        SendExchangeReply(*pc.conn, x.request_id, a.status, nullptr);
        continue;
      }
      SendExchangeReply(*pc.conn, x.request_id, a.status, &x);
    }
  }

  // The verdict as metadata, then (OK) the reply, from the lent slot (which the last chunk
  // frees) or from pooled memory (held until the adapter is done with it).
  void SendExchangeReply(Connection& conn, uint32_t request_id, const absl::Status& status,
                         HeldExchange* x) {
    ExchangeReplyMeta meta;
    meta.code = status.code();
    meta.error = std::string(status.message());
    OutMessage m;
    m.kind = kExchangeReply;
    m.request_id = request_id;
    if (x != nullptr) {
      const ExchangeBuffers& b = *x->buffers;
      meta.sizes = b.sizes;
      if (b.validate) meta.checksums = b.reply_checksums;
      for (uint64_t size : b.sizes) m.data_bytes += size;
      if (x->slot >= 0) {
        // The connection owns the slot, and the last chunk frees it: nothing to hold.
        m.own_sge = x->slot_data;
        m.release_slot = x->slot;
      } else {
        auto gather = std::make_shared<ReplyGather>();
        gather->buffers = x->buffers;
        for (const auto& buffer : b.reply) {
          // An SGE carries at most 4 GiB - 1.
          for (uint64_t at = 0; at < buffer.size(); at += 1u << 30) {
            gather->sges.push_back({reinterpret_cast<uint64_t>(buffer.data() + at),
                                    static_cast<uint32_t>(std::min<uint64_t>(buffer.size() - at, 1u << 30)),
                                    b.block->lkey()});
          }
        }
        m.shared_data = gather->sges;
        m.hold = std::move(gather);
      }
    }
    EncodeExchangeReplyMeta(meta, &m.own_meta);
    conn.Send(std::move(m));
  }

  ServerOptions options_;
  std::shared_ptr<Device> device_;
  std::unique_ptr<CompletionQueue> cq_;
  std::unique_ptr<Server> control_;
  std::thread poller_;
  bool started_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<bool> stop_sessions_{false};
  std::once_flag stop_once_;
  std::atomic<uint64_t> rpcs_{0};
  std::atomic<uint64_t> bytes_{0};
  std::atomic<int64_t> received_{0};
  DataTally moved_{DataTally::kOneWriter};  // written by the completion thread alone

  // Session calls hand connections to the completion thread, and back, through these.
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> added_;
  std::vector<uint32_t> removed_;
  uint32_t cq_budget_used_ = 0;
  std::atomic<bool> changed_{false};

  // kExchange. The hub is closed (by the completion thread, on Shutdown) before this server
  // goes: `done`s after that do nothing.
  const std::shared_ptr<ExchangeHub> hub_{ExchangeHub::Create(options_.exchange_handler)};
  std::shared_ptr<BlockPool> pool_;
  std::atomic<bool> closing_{false};
  std::mutex answers_mu_;
  std::vector<Answer> answers_;
  std::atomic<bool> answers_pending_{false};

  // Owned by the completion thread.
  absl::flat_hash_map<uint32_t, std::unique_ptr<PsConnection>> connections_;
  uint64_t next_serial_ = 0;
  absl::flat_hash_map<uint64_t, HeldExchange> held_;
  uint64_t next_exchange_ = 0;
  bool closed_ = false;
};

}  // namespace

std::unique_ptr<Server> NewVerbsServer(const ServerOptions& options) {
  return std::make_unique<VerbsServer>(options);
}

}  // namespace psbench::verbs
