// PS side of grpc+verbs. The gRPC server (control plane) gains a PsVerbs service that sets up
// one RC queue pair per worker and PS; one completion thread per device then serves every
// connection: it checks pushes and acknowledges them, and echoes payloads straight back from
// the slot they arrived in.
#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "psbench.grpc.pb.h"
#include "transports/grpc/grpc_transport.h"
#include "transports/grpc/raw_format.h"
#include "transports/verbs/verbs_connection.h"
#include "transports/verbs/verbs_device.h"
#include "transports/data_meta.h"
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
};

struct PsConnection {
  std::unique_ptr<Connection> conn;
  Request request;
  bool failure_logged = false;
};

class VerbsServer final : public Server, public wire::PsVerbs::Service {
 public:
  explicit VerbsServer(const ServerOptions& options) : options_(options) {}

  ~VerbsServer() override {
    Shutdown();
    Wait();
  }

  absl::StatusOr<int> Start() override {
    auto device = Device::Open(options_.rdma);
    if (!device.ok()) return device.status();
    device_ = std::move(*device);
    auto cq = CompletionQueue::Create(*device_, 65536);
    if (!cq.ok()) return cq.status();
    cq_ = std::move(*cq);
    grpc_transport::ControlPlaneHooks hooks;
    hooks.transport_name = "grpc+verbs";
    hooks.data_plane = absl::StrCat("RDMA WRITE WITH IMMEDIATE on ", device_->Describe());
    hooks.extra_services.push_back(this);
    hooks.data_counters = [this] {
      return grpc_transport::DataCounters{rpcs_.load(), bytes_.load()};
    };
    control_ = grpc_transport::NewGrpcServer(options_, std::move(hooks));
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
    if (control_) control_->Shutdown();
  }

  // PsVerbs: runs on gRPC's threads, one per connected worker while its session lasts.
  grpc::Status Session(grpc::ServerContext* context, const wire::VerbsSetupRequest* request,
                       grpc::ServerWriter<wire::VerbsSetupReply>* writer) override {
    std::string peer = request->worker_host().empty() ? context->peer() : request->worker_host();
    uint32_t need = 6 * options_.rdma.queue_depth + 40;  // send + receive queue entries
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
    auto conn = Connection::Create(*device_, cq_->cq(), options_.rdma, peer);
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
    // Removals first: a QP number is free for reuse only once its QP is destroyed here.
    for (uint32_t qpn : removed) Drop(qpn);
    for (auto& c : added) {
      uint32_t qpn = c->qpn();
      auto pc = std::make_unique<PsConnection>();
      pc->conn = std::move(c);
      connections_[qpn] = std::move(pc);
    }
  }

  void Drop(uint32_t qpn) {
    if (connections_.erase(qpn) > 0) {
      std::lock_guard lock(mu_);
      cq_budget_used_ -= 6 * options_.rdma.queue_depth + 40;
    }
  }

  void Serve() {
    ibv_wc wc[32];
    while (!stop_) {
      if (changed_.exchange(false)) ApplyChanges();
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

  ServerOptions options_;
  std::unique_ptr<Device> device_;
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

  // Session calls hand connections to the completion thread, and back, through these.
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> added_;
  std::vector<uint32_t> removed_;
  uint32_t cq_budget_used_ = 0;
  std::atomic<bool> changed_{false};

  // Owned by the completion thread.
  absl::flat_hash_map<uint32_t, std::unique_ptr<PsConnection>> connections_;
};

}  // namespace

std::unique_ptr<Server> NewVerbsServer(const ServerOptions& options) {
  return std::make_unique<VerbsServer>(options);
}

}  // namespace psbench::verbs
