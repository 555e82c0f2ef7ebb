// Worker side of the gRPC transport: one channel per PS, and either of gRPC's client APIs
// (--grpc-api): a completion queue polled by the calling thread (no thread hop between the
// network and the benchmark loop), or the callback API, whose completions run on gRPC's
// threads and reach the calling thread through a queue of their own.
#include <grpcpp/alarm.h>
#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/generic/generic_stub.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "payloads/size.h"
#include "psbench.pb.h"
#include "transports/control/channel.h"
#include "transports/control/control_client.h"
#include "transports/exchange.h"
#include "transports/grpc/grpc_transport.h"
#include "transports/grpc/raw_format.h"
#include "transports/grpc/serialized_format.h"
#include "transports/limit_flags.h"

namespace psbench::grpc_transport {

using control::FromGrpc;

namespace {

// A message over the PS's --max-message-size, as gRPC reports it, named for the user.
std::string MessageLimitText(const grpc::Status& s, uint64_t limit) {
  if (s.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED ||
      s.error_message().find("larger than max") == std::string::npos) {
    return s.error_message();
  }
  return absl::StrCat("refused a message over its --max-message-size",
                      limit > 0 ? absl::StrCat("=", FormatSize(limit)) : "", " (",
                      s.error_message(), ")");
}

// A registered payload: its header (non-serialized) is built once, not per call.
struct Registered {
  const Payload* payload;
  std::string header;
  std::vector<grpc::Slice> slices;  // non-serialized: header, then every buffer
  uint64_t message_bytes = 0;  // non-serialized: what those slices hold
};

// An exchange's failure as the PS (or gRPC) reported it: its own code, the PS named.
absl::Status ExchangeStatus(const grpc::Status& s, const std::string& server, absl::string_view method) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat("PS ", server, ": ", method, ": ", s.error_message()));
}

// One RPC in flight. Allocated per call because gRPC contexts cannot be reused.
struct Call {
  uint64_t tag;
  Op op;
  size_t server;
  // --rpc-timeout, kept here rather than given to gRPC (InFlight); armed at the first clock
  // read after the start.
  absl::Time deadline = absl::InfiniteFuture();
  bool expired = false;  // cancelled at its deadline
  Call* older = nullptr;  // InFlight's list
  Call* newer = nullptr;
  const Registered* reg;
  const Registered* reply_reg = nullptr;  // kExchange: where the answer goes
  // kExchange: checksums of the request as it was sent (its bytes change between steps),
  // and its header (non-serialized) carrying them.
  std::vector<uint64_t> sent_checksums;
  std::string header;
  grpc::ClientContext context;
  grpc::Status status;
  // Every call goes through the generic stub: the reply's bytes, as received.
  grpc::ByteBuffer response;
  grpc::ByteBuffer request;  // callback API: gRPC sends from it while the call runs
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader;
  // Serialized: the reply parsed (echo_reply serves kExchange too). Made only then: a protobuf
  // message built and torn down per call is a cost the non-serialized mode does not have.
  std::optional<wire::PayloadMessage> echo_reply;
  std::optional<wire::AckMessage> ack_reply;
};

// Calls in flight, oldest first. Each gets --rpc-timeout from the first clock read after its
// start (Next reads the clock once a wait; a read at every start too cost 55 ns a call here,
// a fifth of psbench's own share of a small message), so the oldest one not yet expired holds
// the earliest deadline: Next waits no longer than that and cancels a call that outlives it.
// A deadline given to gRPC instead arms a timer per call, and a finite wait on the queue a
// kernel timer per wait: together about 2 us of a 45 us round trip here.
class InFlight {
 public:
  explicit InFlight(absl::Duration timeout) : timeout_(timeout) {}
  void Add(Call* c) {
    c->older = newest_;
    c->newer = nullptr;
    (newest_ != nullptr ? newest_->newer : oldest_) = c;
    newest_ = c;
    if (unarmed_ == nullptr) unarmed_ = c;
  }
  void Remove(Call* c) {
    if (c == unarmed_) unarmed_ = c->newer;
    (c->older != nullptr ? c->older->newer : oldest_) = c->newer;
    (c->newer != nullptr ? c->newer->older : newest_) = c->older;
  }
  bool empty() const { return oldest_ == nullptr; }
  Call* oldest() const { return oldest_; }

  // Arms the deadlines of the calls started since the last read (the newest ones), cancels
  // every call past its deadline (its completion follows, as CANCELLED); returns the earliest
  // deadline of those still running.
  absl::Time Expire(absl::Time now) {
    for (; unarmed_ != nullptr; unarmed_ = unarmed_->newer) unarmed_->deadline = now + timeout_;
    for (Call* c = oldest_; c != nullptr; c = c->newer) {
      if (c->expired) continue;
      if (c->deadline > now) return c->deadline;
      c->expired = true;
      c->context.TryCancel();
    }
    return absl::InfiniteFuture();
  }

 private:
  const absl::Duration timeout_;
  Call* oldest_ = nullptr;
  Call* newest_ = nullptr;
  Call* unarmed_ = nullptr;  // the oldest call without a deadline; those after it have none
};

class GrpcClient final : public Client {
 public:
  explicit GrpcClient(const ClientOptions& options) : options_(options), control_(options) {
    for (size_t i = 0; i < control_.num_servers(); ++i) {
      servers_.push_back(std::make_unique<grpc::GenericStub>(control_.channel(i)));
    }
  }

  ~GrpcClient() override {
    control_.Close();
    watchdog_.reset();  // cancelled: its event comes back with ok = false, drained below
    // Cancel what is still in flight and drain the queue before the payloads' owners go away.
    for (Call* c = in_flight_.oldest(); c != nullptr; c = c->newer) c->context.TryCancel();
    if (options_.grpc_api == GrpcApi::kCallback) {
      // Every callback runs once, cancelled or not.
      std::unique_lock<std::mutex> lock(done_mu_);
      while (!in_flight_.empty()) {
        done_cv_.wait(lock, [this] { return !done_.empty(); });
        in_flight_.Remove(done_.front());
        delete done_.front();
        done_.pop_front();
      }
    }
    while (!in_flight_.empty()) {
      void* tag;
      bool ok;
      if (!cq_.Next(&tag, &ok)) break;
      if (tag == kWatchdog) continue;
      Call* call = static_cast<Call*>(tag);
      in_flight_.Remove(call);
      delete call;
    }
    cq_.Shutdown();
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  absl::Status Connect() override { return control_.Connect(); }

  size_t num_servers() const override { return control_.num_servers(); }
  const std::string& server_address(size_t i) const override { return control_.address(i); }

  absl::StatusOr<int> Register(const Payload& payload) override {
    // gRPC carries at most 2^31-1 bytes in one message, headers included.
    if (payload.total_bytes() + 16 * payload.num_buffers() + 1024 > 0x7fffffffull) {
      return absl::InvalidArgumentError(absl::StrCat(
          "payload of ", payload.total_bytes(),
          " bytes exceeds gRPC's 2 GiB message limit; use fewer or smaller buffers"));
    }
    auto reg = std::make_unique<Registered>();
    reg->payload = &payload;
    reg->header = EncodePayloadHeader(payload.sizes(),
                                      options_.validate ? &payload.checksums() : nullptr);
    // A message a PS would refuse is bad input, found before anything is sent.
    const uint64_t message_bytes = LimitedRequestBytes("grpc", options_.mode, options_.validate, payload.sizes());
    if (absl::Status s = control_.CheckMessageFits(payload.total_bytes(), message_bytes); !s.ok()) {
      return s;
    }
    if (options_.mode == WireMode::kSerialized) {
      if (absl::Status s = CheckSerializedShape(message_bytes, payload.num_buffers()); !s.ok()) {
        return absl::InvalidArgumentError(s.message());
      }
    }
    // One slice for the header, then one per buffer pointing at the payload's own memory:
    // gRPC sends from it without copying it first.
    reg->message_bytes = reg->header.size() + payload.total_bytes();
    reg->slices.emplace_back(reg->header.data(), reg->header.size(), grpc::Slice::STATIC_SLICE);
    for (const iovec& v : payload.iov()) {
      reg->slices.emplace_back(v.iov_base, v.iov_len, grpc::Slice::STATIC_SLICE);
    }
    registered_.push_back(std::move(reg));
    return static_cast<int>(registered_.size() - 1);
  }

  void Unregister(int payload) override { registered_[payload].reset(); }

  // The gRPC method an operation calls in this wire mode (errors name it).
  const char* Method(Op op) const {
    const bool raw = options_.mode == WireMode::kNonSerialized;
    switch (op) {
      case Op::kEcho: return raw ? kRawEchoMethod : kSerializedEchoMethod;
      case Op::kPush: return raw ? kRawPushMethod : kSerializedPushMethod;
      default: return raw ? kRawExchangeMethod : kSerializedExchangeMethod;
    }
  }

  void Start(Op op, size_t server, int payload, uint64_t tag) override {
    if (op == Op::kExchange) {
      ready_.push_back({tag, ExchangeNeedsStartExchange()});
      return;
    }
    auto* call = new Call;
    call->tag = tag;
    call->op = op;
    call->server = server;
    call->reg = registered_[payload].get();
    in_flight_.Add(call);
    const Payload& p = *call->reg->payload;
    if (options_.mode == WireMode::kNonSerialized) {
      const auto& slices = call->reg->slices;
      StartCall(call, grpc::ByteBuffer(slices.data(), slices.size()), call->reg->message_bytes);
      return;
    }
    // Serialized: every buffer copied into the message, as serializing tensors does.
    grpc::ByteBuffer request = SerializePayload(p, options_.validate ? &p.checksums() : nullptr);
    StartCall(call, request, request.Length());
  }

  // Starts `call` sending `request`, of `bytes` (known to the caller: gRPC would walk the
  // slices to count them).
  void StartCall(Call* call, const grpc::ByteBuffer& request, uint64_t bytes) {
    tally_.Sent(bytes, call->reg->payload->total_bytes());
    if (options_.grpc_api == GrpcApi::kCallback) {
      call->request = request;  // shares the slices
      servers_[call->server]->UnaryCall(&call->context, Method(call->op), grpc::StubOptions(), &call->request,
                                        &call->response, [this, call](grpc::Status status) {
                                          call->status = std::move(status);
                                          std::lock_guard<std::mutex> lock(done_mu_);
                                          done_.push_back(call);
                                          done_count_.fetch_add(1, std::memory_order_release);
                                          done_cv_.notify_one();
                                        });
      return;
    }
    call->reader = servers_[call->server]->PrepareUnaryCall(&call->context, Method(call->op), request, &cq_);
    call->reader->StartCall();
    call->reader->Finish(&call->response, &call->status, call);
  }

  // A serialized reply, parsed into the call (the generated stubs would do the same).
  absl::Status ParseSerializedReply(Call& call) {
    grpc::Status parsed =
        call.op == Op::kPush
            ? grpc::SerializationTraits<wire::AckMessage>::Deserialize(&call.response, &call.ack_reply.emplace())
            : grpc::SerializationTraits<wire::PayloadMessage>::Deserialize(&call.response,
                                                                          &call.echo_reply.emplace());
    if (parsed.ok()) return absl::OkStatus();
    return absl::DataLossError(absl::StrCat(Method(call.op), ": the reply is not a ",
                                            call.op == Op::kPush ? "AckMessage" : "PayloadMessage", " (",
                                            parsed.error_message(), ")"));
  }

  void StartExchange(size_t server, int request, int reply, uint64_t tag) override {
    const Registered* req = Lookup(request);
    const Registered* rep = Lookup(reply);
    absl::Status s = psbench::CheckExchange(server, servers_.size(),
                                            req ? req->payload : nullptr,
                                            rep ? rep->payload : nullptr);
    if (!s.ok()) {
      ready_.push_back({tag, std::move(s)});
      return;
    }
    auto* call = new Call;
    call->tag = tag;
    call->op = Op::kExchange;
    call->server = server;
    call->reg = req;
    call->reply_reg = rep;
    in_flight_.Add(call);
    const Payload& p = *req->payload;
    if (options_.validate) p.ComputeChecksums(&call->sent_checksums);
    if (options_.mode == WireMode::kNonSerialized) {
      // The registered slices, behind a header of this exchange's own.
      call->header = EncodePayloadHeader(p.sizes(),
                                         options_.validate ? &call->sent_checksums : nullptr);
      std::vector<grpc::Slice> slices = req->slices;
      slices[0] = grpc::Slice(call->header.data(), call->header.size(), grpc::Slice::STATIC_SLICE);
      StartCall(call, grpc::ByteBuffer(slices.data(), slices.size()), call->header.size() + p.total_bytes());
      return;
    }
    grpc::ByteBuffer message = SerializePayload(p, options_.validate ? &call->sent_checksums : nullptr);
    StartCall(call, message, message.Length());
  }

  absl::StatusOr<Completion> Next(absl::Time deadline) override {
    if (!ready_.empty()) {
      Completion c = std::move(ready_.front());
      ready_.pop_front();
      return c;
    }
    while (true) {
      const absl::Time until = std::min(deadline, in_flight_.Expire(absl::Now()));
      absl::StatusOr<Call*> call =
          options_.grpc_api == GrpcApi::kCallback ? NextCallback(until) : NextQueued(until);
      if (!call.ok()) return call.status();
      if (*call != nullptr) return Finished(std::unique_ptr<Call>(*call));
      if (absl::Now() >= deadline) return absl::DeadlineExceededError("no operation finished in time");
    }
  }

  // Completion-queue API: the next finished call, or null at `until`.
  absl::StatusOr<Call*> NextQueued(absl::Time until) {
    void* tag;
    bool ok;
    grpc::CompletionQueue::NextStatus status;
    if (options_.busy_poll) {
      // A deadline in the past makes AsyncNext poll once without sleeping.
      const std::chrono::system_clock::time_point past{};
      do {
        status = cq_.AsyncNext(&tag, &ok, past);
      } while (status == grpc::CompletionQueue::TIMEOUT && absl::Now() < until);
    } else {
      // An untimed wait, woken at `until` by the watchdog alarm (see InFlight).
      if (until < watchdog_at_) {
        watchdog_ = std::make_unique<grpc::Alarm>();  // replacing an armed one cancels it
        watchdog_->Set(&cq_, absl::ToChronoTime(until), kWatchdog);
        watchdog_at_ = until;
      }
      while (true) {
        if (!cq_.Next(&tag, &ok)) return absl::InternalError("completion queue shut down");
        if (tag != kWatchdog) return static_cast<Call*>(tag);
        if (ok) break;  // fired; a cancelled one (ok = false) was replaced by an earlier one
      }
      watchdog_at_ = absl::InfiniteFuture();
      return nullptr;
    }
    switch (status) {
      case grpc::CompletionQueue::TIMEOUT:
        return nullptr;
      case grpc::CompletionQueue::SHUTDOWN:
        return absl::InternalError("completion queue shut down");
      case grpc::CompletionQueue::GOT_EVENT:
        break;
    }
    return static_cast<Call*>(tag);
  }

  Completion Finished(std::unique_ptr<Call> call) {
    in_flight_.Remove(call.get());
    if (call->expired && !call->status.ok()) {
      call->status = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                  absl::StrCat("no reply within --rpc-timeout=",
                                               absl::FormatDuration(options_.rpc_timeout)));
    }
    if (call->status.ok()) {
      // A reply arrived: an echo's or an exchange's carries the request's sizes (checked below).
      const uint64_t bytes = call->response.Length();
      const uint64_t payload = call->op == Op::kPush ? 0 : call->reg->payload->total_bytes();
      tally_.Completed();
      tally_.Received(bytes, payload);
    }
    Completion done;
    done.tag = call->tag;
    done.status = Check(*call);
    return done;
  }

  // Callback API: the next call whose callback has run, or null at the deadline. Busy
  // polling spins on a count (not on the lock, which the callbacks need) instead of sleeping
  // on the condition variable.
  Call* NextCallback(absl::Time deadline) {
    if (options_.busy_poll) {
      for (uint32_t spins = 0; done_count_.load(std::memory_order_acquire) == 0; ++spins) {
        if (spins % 1024 == 0 && absl::Now() >= deadline) return nullptr;
      }
    }
    std::unique_lock<std::mutex> lock(done_mu_);
    if (!done_cv_.wait_until(lock, absl::ToChronoTime(deadline), [this] { return !done_.empty(); })) {
      return nullptr;
    }
    Call* call = done_.front();
    done_.pop_front();
    done_count_.fetch_sub(1, std::memory_order_relaxed);
    return call;
  }

  ClientCounts Counts() const override { return control_.Counts("grpc", tally_.Read()); }
  absl::StatusOr<ServerInfo> GetInfo(size_t server) override { return control_.GetInfo(server); }
  uint64_t max_message_bytes(size_t server) const override { return control_.max_message_bytes(server); }
  absl::Status Barrier(const std::string& name, int parties, int worker_index,
                       absl::Time deadline) override {
    return control_.Barrier(name, parties, worker_index, deadline);
  }

 private:
  const Registered* Lookup(int payload) const {
    return payload >= 0 && static_cast<size_t>(payload) < registered_.size()
               ? registered_[payload].get()
               : nullptr;
  }

  // Copies an exchange's answer into the reply payload and checks it: the request's buffer
  // sizes, and with --validate, the PS's checksums of what its handler wrote.
  absl::Status CheckExchange(Call& call) {
    const Payload& request = *call.reg->payload;
    const Payload& reply = *call.reply_reg->payload;
    std::vector<uint64_t> ps_checksums;
    if (options_.mode == WireMode::kNonSerialized) {
      SliceReader reader(call.response);
      auto header = ReadPayloadHeader(reader);
      if (!header.ok()) return header.status();
      if (absl::Status s = CheckReplySizes(header->sizes, request.sizes()); !s.ok()) return s;
      if (absl::Status s = ReadBuffers(reader, *header, nullptr); !s.ok()) return s;
      std::vector<std::span<std::byte>> out = ReplyBuffers(reply);
      ScatterWriter writer;
      writer.Reset(out);
      reader.Consume(reader.remaining(),
                     [&writer](const std::byte* p, size_t n) { writer.Write({p, n}); });
      ps_checksums = std::move(header->checksums);
    } else {
      if (absl::Status s = ParseSerializedReply(call); !s.ok()) return s;
      const wire::PayloadMessage& m = *call.echo_reply;
      std::vector<uint64_t> sizes;
      for (const std::string& b : m.buffers()) sizes.push_back(b.size());
      if (absl::Status s = CheckReplySizes(sizes, request.sizes()); !s.ok()) return s;
      std::vector<std::span<std::byte>> out = ReplyBuffers(reply);
      for (size_t i = 0; i < out.size(); ++i) {
        if (!out[i].empty()) std::memcpy(out[i].data(), m.buffers(static_cast<int>(i)).data(), out[i].size());
      }
      ps_checksums.assign(m.checksums().begin(), m.checksums().end());
    }
    if (!options_.validate) return absl::OkStatus();
    if (ps_checksums.size() != request.num_buffers()) {
      return absl::DataLossError("the PS sent no checksums of its exchange reply");
    }
    std::vector<uint64_t> got;
    reply.ComputeChecksums(&got);
    return CompareChecksums(ps_checksums, got, reply.sizes());
  }

  // Checks that everything sent arrived whole, and with --validate, byte for byte.
  absl::Status Check(Call& call) {
    const std::string& address = control_.address(call.server);
    if (call.op == Op::kExchange) {
      if (!call.status.ok()) {
        return ExchangeStatus(grpc::Status(call.status.error_code(),
                                           MessageLimitText(call.status,
                                                            control_.max_message_bytes(call.server))),
                              address, Method(call.op));
      }
      absl::Status s = CheckExchange(call);
      if (!s.ok()) return absl::DataLossError(absl::StrCat("PS ", address, ": ", s.message()));
      return s;
    }
    if (!call.status.ok()) {
      return FromGrpc(grpc::Status(call.status.error_code(),
                                   MessageLimitText(call.status,
                                                    control_.max_message_bytes(call.server))),
                      address, Method(call.op));
    }
    const Payload& p = *call.reg->payload;
    absl::Status s;
    if (options_.mode == WireMode::kSerialized) s = ParseSerializedReply(call);
    if (!s.ok()) {
      // Reported below, naming the PS.
    } else if (options_.mode == WireMode::kNonSerialized) {
      if (call.op == Op::kEcho) {
        SliceReader reader(call.response);
        auto header = ReadPayloadHeader(reader);
        if (!header.ok()) {
          s = header.status();
        } else if (header->sizes != p.sizes()) {
          s = absl::DataLossError("echo came back with different buffer sizes");
        } else {
          std::vector<uint64_t> got;
          s = ReadBuffers(reader, *header, options_.validate ? &got : nullptr);
          if (s.ok() && options_.validate) s = CompareChecksums(p.checksums(), got, p.sizes());
        }
      } else {
        auto ack = DecodeAck(call.response);
        if (!ack.ok()) {
          s = ack.status();
        } else if (ack->bytes_received != p.total_bytes()) {
          s = absl::DataLossError(absl::StrFormat("PS received %u of %u bytes",
                                                  ack->bytes_received, p.total_bytes()));
        } else if (options_.validate) {
          s = CompareChecksums(p.checksums(), ack->checksums, p.sizes());
        }
      }
    } else if (call.op == Op::kEcho) {
      const auto& reply = *call.echo_reply;
      if (static_cast<size_t>(reply.buffers_size()) != p.num_buffers()) {
        s = absl::DataLossError(absl::StrFormat("echo came back with %d of %u buffers",
                                                reply.buffers_size(), p.num_buffers()));
      } else {
        std::vector<uint64_t> got;
        for (size_t i = 0; i < p.num_buffers() && s.ok(); ++i) {
          const std::string& b = reply.buffers(static_cast<int>(i));
          if (b.size() != p.sizes()[i]) {
            s = absl::DataLossError(absl::StrFormat("echoed buffer %u has %u bytes, sent %u",
                                                    i + 1, b.size(), p.sizes()[i]));
          } else if (options_.validate) {
            got.push_back(Checksum(std::as_bytes(std::span(b.data(), b.size()))));
          }
        }
        if (s.ok() && options_.validate) s = CompareChecksums(p.checksums(), got, p.sizes());
      }
    } else {
      const auto& ack = *call.ack_reply;
      if (ack.bytes_received() != p.total_bytes()) {
        s = absl::DataLossError(absl::StrFormat("PS received %u of %u bytes",
                                                ack.bytes_received(), p.total_bytes()));
      } else if (options_.validate) {
        std::vector<uint64_t> got(ack.checksums().begin(), ack.checksums().end());
        s = CompareChecksums(p.checksums(), got, p.sizes());
      }
    }
    if (!s.ok()) return absl::DataLossError(absl::StrCat("PS ", address, ": ", s.message()));
    return s;
  }

  ClientOptions options_;
  control::ControlClient control_;
  std::vector<std::unique_ptr<grpc::GenericStub>> servers_;  // by PS, as control_'s
  std::vector<std::unique_ptr<Registered>> registered_;
  grpc::CompletionQueue cq_;
  InFlight in_flight_{options_.rpc_timeout};
  // Wakes a waiting Next at its deadline or a call's; its tag is never a Call.
  inline static int watchdog_tag_ = 0;
  static constexpr void* kWatchdog = &watchdog_tag_;
  std::unique_ptr<grpc::Alarm> watchdog_;
  absl::Time watchdog_at_ = absl::InfiniteFuture();  // when the armed one fires
  std::deque<Completion> ready_;  // ops that failed before reaching the network
  // Callback API: calls whose callback has run, in that order.
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  std::deque<Call*> done_;
  std::atomic<size_t> done_count_{0};  // done_.size(), read without the lock
  GrpcCallTally tally_;  // the driving thread's; the process's gRPC calls are the sum of these
};

}  // namespace

std::unique_ptr<Client> NewGrpcClient(const ClientOptions& options) {
  return std::make_unique<GrpcClient>(options);
}

}  // namespace psbench::grpc_transport
