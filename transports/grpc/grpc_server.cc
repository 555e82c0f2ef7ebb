// PS side of the gRPC transport: an async server whose completion-queue threads serve the raw
// (non-serialized) methods through the generic service, the serialized methods through the
// generated async service, and the control plane. Everything runs on the same few threads,
// so no call hops between thread pools.
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_builder.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <condition_variable>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <thread>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "payloads/payload.h"
#include "psbench.grpc.pb.h"
#include "transports/exchange.h"
#include "transports/grpc/grpc_transport.h"
#include "transports/grpc/raw_format.h"
#include "transports/grpc/serialized_format.h"
#include "transports/grpc/server_calls.h"
#include "transports/grpc/tsan_handoff.h"

namespace psbench::grpc_transport {
namespace {

// Copies a raw message and flips one byte in the middle of its payload (fault injection).
grpc::ByteBuffer CorruptedCopy(const grpc::ByteBuffer& message, size_t header_bytes) {
  std::vector<grpc::Slice> slices;
  (void)message.Dump(&slices);
  std::string flat;
  for (const auto& s : slices) flat.append(reinterpret_cast<const char*>(s.begin()), s.size());
  if (flat.size() > header_bytes) flat[header_bytes + (flat.size() - header_bytes) / 2] ^= 0x5a;
  grpc::Slice slice(flat);
  return grpc::ByteBuffer(&slice, 1);
}

void CorruptMessage(wire::PayloadMessage* m) {
  for (auto& b : *m->mutable_buffers()) {
    if (!b.empty()) {
      b[b.size() / 2] ^= 0x5a;
      return;
    }
  }
}

// Non-serialized Echo and Push, received as raw byte buffers without protobuf.
class RawCall final : public CallData {
 public:
  RawCall(grpc::AsyncGenericService* service, grpc::ServerCompletionQueue* cq,
          Counters* counters, Exchanges* exchanges)
      : service_(service), cq_(cq), counters_(counters), exchanges_(exchanges),
        stream_(&context_) {
    service_->RequestCall(&context_, &stream_, cq_, cq_, this);
  }

  void Proceed(bool ok) override {
    switch (state_) {
      case kRequested:
        if (!ok) {  // server shutting down
          delete this;
          return;
        }
        new RawCall(service_, cq_, counters_, exchanges_);
        state_ = kReading;
        stream_.Read(&request_, this);
        return;
      case kReading:
        if (!ok) {  // the worker went away before sending: nothing to answer
          delete this;
          return;
        }
        Respond();
        return;
      case kFinishing:
        delete this;
        return;
    }
  }

 private:
  void Respond() {
    state_ = kFinishing;
    const std::string& method = context_.method();
    if (method == kRawExchangeMethod) {
      RespondExchange();
      return;
    }
    bool echo = method == kRawEchoMethod;
    if (!echo && method != kRawPushMethod) {
      stream_.Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "unknown method " + method),
                     this);
      return;
    }
    bool corrupt = counters_->ShouldCorrupt();
    if (corrupt && !echo) request_ = CorruptedCopy(request_, HeaderBytes(request_));
    SliceReader reader(request_);
    std::vector<uint64_t> checksums;
    auto header = DecodeRawRequest(reader, &checksums);
    if (!header.ok()) {
      stream_.Finish(grpc::Status(grpc::StatusCode::DATA_LOSS,
                                  absl::StrCat("PS: ", header.status().message())),
                     this);
      return;
    }
    counters_->rpcs.fetch_add(1, std::memory_order_relaxed);
    counters_->bytes.fetch_add(header->payload_bytes(), std::memory_order_relaxed);
    if (corrupt && echo) request_ = CorruptedCopy(request_, HeaderBytes(request_));
    if (echo) {
      // The reply is the request's own slices: nothing is copied.
      stream_.WriteAndFinish(request_, grpc::WriteOptions(), grpc::Status::OK, this);
    } else {
      std::string ack = EncodeAck(header->payload_bytes(), checksums);
      grpc::Slice slice(ack);
      response_ = grpc::ByteBuffer(&slice, 1);
      stream_.WriteAndFinish(response_, grpc::WriteOptions(), grpc::Status::OK, this);
    }
  }

  // The handler sees each request buffer as one span (DecodeRawExchange): the bytes of the
  // slice it arrived in when it lies in one, else a copy in pooled memory, which the reply
  // then overwrites in place. Other reply buffers get pooled memory of their own; gRPC sends
  // the reply from there (no copy), holding the block until it is done with it.
  void RespondExchange() {
    if (exchanges_->hub->handler() == nullptr) {
      stream_.Finish(ToGrpc(NoExchangeHandlerError()), this);
      return;
    }
    // Injected faults hit an exchange before the PS checks it, as a push.
    if (counters_->ShouldCorrupt()) request_ = CorruptedCopy(request_, HeaderBytes(request_));
    auto buffers = std::make_shared<ExchangeBuffers>();
    auto request = std::make_shared<grpc::ByteBuffer>();
    request->Swap(&request_);
    buffers->keep = request;  // the handler's spans may point into its slices
    SliceReader reader(*request);
    absl::StatusOr<uint64_t> decoded = DecodeRawExchange(reader, *exchanges_->pool, buffers.get());
    if (!decoded.ok()) {
      const absl::Status& status = decoded.status();
      stream_.Finish(ToGrpc(absl::Status(status.code(), absl::StrCat("PS: ", status.message()))),
                     this);
      return;
    }
    const uint64_t bytes = *decoded;
    counters_->rpcs.fetch_add(1, std::memory_order_relaxed);
    counters_->bytes.fetch_add(bytes, std::memory_order_relaxed);
    // The answer may come from another thread. This call stays alive until its Finish
    // completes, and nothing else finishes it: `this` is safe to use until then.
    auto deliver = [this, buffers](const absl::Status& s, bool) {
      if (!s.ok()) {
        StartFromAnotherThread(this, [&] { stream_.Finish(ToGrpc(s), this); });
        return;
      }
      std::vector<grpc::Slice> slices;
      slices.emplace_back(EncodePayloadHeader(
          buffers->sizes, buffers->validate ? &buffers->reply_checksums : nullptr));
      for (const auto& b : buffers->reply) {
        if (b.empty()) continue;
        slices.emplace_back(b.data(), b.size(), &DropBlock,
                            new std::shared_ptr<BlockPool::Block>(buffers->block));
      }
      response_ = grpc::ByteBuffer(slices.data(), slices.size());
      StartFromAnotherThread(this, [&] {
        stream_.WriteAndFinish(response_, grpc::WriteOptions(), grpc::Status::OK, this);
      });
    };
    // From here on the call may finish (and be deleted) on another thread: no member access.
    if (!exchanges_->hub->Run(std::move(buffers), std::move(deliver))) {
      stream_.Finish(ToGrpc(ExchangeCancelledError()), this);
    }
  }

  static void DropBlock(void* block) {
    delete static_cast<std::shared_ptr<BlockPool::Block>*>(block);
  }

  static size_t HeaderBytes(const grpc::ByteBuffer& message) {
    SliceReader reader(message);
    auto header = ReadPayloadHeader(reader);
    return header.ok() ? message.Length() - reader.remaining() : 0;
  }

  enum State { kRequested, kReading, kFinishing };
  grpc::AsyncGenericService* service_;
  grpc::ServerCompletionQueue* cq_;
  Counters* counters_;
  Exchanges* exchanges_;
  grpc::GenericServerContext context_;
  grpc::GenericServerAsyncReaderWriter stream_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  State state_ = kRequested;
};

// Serialized Echo and Push: one state machine, differing only in the reply.
template <typename Reply, auto kRequestMethod>
class SerializedCall final : public CallData {
 public:
  SerializedCall(wire::PsData::AsyncService* service, grpc::ServerCompletionQueue* cq,
                 Counters* counters)
      : service_(service), cq_(cq), counters_(counters), responder_(&context_) {
    (service_->*kRequestMethod)(&context_, &request_, &responder_, cq_, cq_, this);
  }
  void Proceed(bool ok) override {
    if (!ok || done_) {
      delete this;
      return;
    }
    new SerializedCall(service_, cq_, counters_);
    done_ = true;
    constexpr bool kEcho = std::is_same_v<Reply, wire::PayloadMessage>;
    // Injected faults hit a push before the PS checks it, an echo after (the worker checks).
    bool corrupt = counters_->ShouldCorrupt();
    if (corrupt && !kEcho) CorruptMessage(&request_);
    std::vector<uint64_t> computed;
    uint64_t bytes;
    absl::Status s = VerifyPayloadMessage(request_, &computed, &bytes);
    if (corrupt && kEcho) CorruptMessage(&request_);
    if (!s.ok()) {
      responder_.FinishWithError(
          grpc::Status(grpc::StatusCode::DATA_LOSS, absl::StrCat("PS: ", s.message())), this);
      return;
    }
    counters_->rpcs.fetch_add(1, std::memory_order_relaxed);
    counters_->bytes.fetch_add(bytes, std::memory_order_relaxed);
    if constexpr (kEcho) {
      responder_.Finish(request_, grpc::Status::OK, this);
    } else {
      reply_.set_bytes_received(bytes);
      for (uint64_t c : computed) reply_.add_checksums(c);
      responder_.Finish(reply_, grpc::Status::OK, this);
    }
  }

 private:
  wire::PsData::AsyncService* service_;
  grpc::ServerCompletionQueue* cq_;
  Counters* counters_;
  grpc::ServerContext context_;
  wire::PayloadMessage request_;
  Reply reply_;
  grpc::ServerAsyncResponseWriter<Reply> responder_;
  bool done_ = false;
};
using SerializedEchoCall =
    SerializedCall<wire::PayloadMessage, &wire::PsData::AsyncService::RequestEcho>;
using SerializedPushCall =
    SerializedCall<wire::AckMessage, &wire::PsData::AsyncService::RequestPush>;

// Serialized Exchange. The handler's reply overwrites the request message's own strings
// (each buffer already contiguous there), and that message goes back.
class SerializedExchangeCall final : public CallData {
 public:
  SerializedExchangeCall(wire::PsData::AsyncService* service, grpc::ServerCompletionQueue* cq,
                         Counters* counters, Exchanges* exchanges)
      : service_(service), cq_(cq), counters_(counters), exchanges_(exchanges),
        request_(std::make_shared<wire::PayloadMessage>()), responder_(&context_) {
    service_->RequestExchange(&context_, request_.get(), &responder_, cq_, cq_, this);
  }

  void Proceed(bool ok) override {
    if (!ok || done_) {
      delete this;
      return;
    }
    new SerializedExchangeCall(service_, cq_, counters_, exchanges_);
    done_ = true;
    if (exchanges_->hub->handler() == nullptr) {
      responder_.FinishWithError(ToGrpc(NoExchangeHandlerError()), this);
      return;
    }
    wire::PayloadMessage& m = *request_;
    if (counters_->ShouldCorrupt()) CorruptMessage(&m);
    std::vector<uint64_t> computed;
    uint64_t bytes;
    if (absl::Status s = VerifyPayloadMessage(m, &computed, &bytes); !s.ok()) {
      responder_.FinishWithError(
          grpc::Status(grpc::StatusCode::DATA_LOSS, absl::StrCat("PS: ", s.message())), this);
      return;
    }
    counters_->rpcs.fetch_add(1, std::memory_order_relaxed);
    counters_->bytes.fetch_add(bytes, std::memory_order_relaxed);
    auto buffers = std::make_shared<ExchangeBuffers>();
    buffers->keep = request_;
    ExchangeBuffersFromMessage(m, buffers.get());
    // See RawCall::RespondExchange: `this` lives until its Finish completes.
    auto deliver = [this, buffers](const absl::Status& s, bool) {
      if (!s.ok()) {
        StartFromAnotherThread(this, [&] { responder_.FinishWithError(ToGrpc(s), this); });
        return;
      }
      request_->clear_checksums();
      for (uint64_t c : buffers->reply_checksums) request_->add_checksums(c);
      StartFromAnotherThread(this, [&] { responder_.Finish(*request_, grpc::Status::OK, this); });
    };
    if (!exchanges_->hub->Run(std::move(buffers), std::move(deliver))) {
      responder_.FinishWithError(ToGrpc(ExchangeCancelledError()), this);
    }
  }

 private:
  wire::PsData::AsyncService* service_;
  grpc::ServerCompletionQueue* cq_;
  Counters* counters_;
  Exchanges* exchanges_;
  grpc::ServerContext context_;
  std::shared_ptr<wire::PayloadMessage> request_;  // shared with the handler's `done`
  grpc::ServerAsyncResponseWriter<wire::PayloadMessage> responder_;
  bool done_ = false;
};

// gRPC reports a busy port only through its log; bind once ourselves to name the errno.
absl::Status ProbePort(const std::string& host, int port) {
  if (port == 0) return absl::OkStatus();
  sockaddr_storage addr{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof(*v4);
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof(*v6);
  } else {
    return absl::OkStatus();  // a host name: gRPC resolves it and reports failures itself
  }
  int fd = socket(addr.ss_family, SOCK_STREAM, 0);
  if (fd < 0) return absl::OkStatus();
  int rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), len);
  int err = errno;
  close(fd);
  if (rc != 0 && err == EADDRINUSE) {
    return absl::FailedPreconditionError(
        absl::StrFormat("cannot listen on %s: port %d already in use", host, port));
  }
  if (rc != 0 && err == EADDRNOTAVAIL) {
    return absl::FailedPreconditionError(
        absl::StrFormat("cannot listen on %s: not an address of this machine", host));
  }
  return absl::OkStatus();
}

// TLS with the PS's certificate; with a CA, workers must present a certificate it signed.
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsOptions& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(
      tls.ca_pem.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                         : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = tls.ca_pem;
  ssl.pem_key_cert_pairs.push_back({tls.key_pem, tls.cert_pem});
  return grpc::SslServerCredentials(ssl);
}

class GrpcServer final : public Server {
 public:
  GrpcServer(const ServerOptions& options, ControlPlaneHooks hooks)
      : options_(options), hooks_(std::move(hooks)) {
    counters_.corrupt_every = options.corrupt_every;
    exchanges_.hub = ExchangeHub::Create(options.exchange_handler);
    exchanges_.pool = BlockPool::Create();
  }

  ~GrpcServer() override {
    Shutdown();
    Wait();
  }

  absl::StatusOr<int> Start() override {
    if (options_.threads < 1) return absl::InvalidArgumentError("--threads must be >= 1");
    if (absl::Status s = ProbePort(options_.host, options_.port); !s.ok()) return s;
    grpc::ServerBuilder builder;
    int bound_port = 0;
    std::string address = absl::StrCat(
        options_.host.find(':') != std::string::npos ? "[" + options_.host + "]" : options_.host,
        ":", options_.port);
    builder.AddListeningPort(address, ServerCredentials(options_.tls), &bound_port);
    // gRPC refuses a larger message with RESOURCE_EXHAUSTED.
    builder.SetMaxReceiveMessageSize(
        static_cast<int>(std::min<uint64_t>(options_.max_message_bytes, INT_MAX)));
    builder.SetMaxSendMessageSize(INT_MAX);
    // Without this, Linux lets a second PS bind the same port and steal half the connections.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.RegisterAsyncGenericService(&raw_service_);
    builder.RegisterService(&data_service_);
    builder.RegisterService(&control_service_);
    for (grpc::Service* extra : hooks_.extra_services) builder.RegisterService(extra);
    for (int i = 0; i < options_.threads; ++i) cqs_.push_back(builder.AddCompletionQueue());
    server_ = builder.BuildAndStart();
    if (!server_ || bound_port == 0) {
      return absl::FailedPreconditionError(
          absl::StrFormat("cannot listen on %s (address not available or port in use)", address));
    }
    for (auto& cq : cqs_) {
      // Several calls of each kind are posted per queue so a burst never waits for a post.
      for (int i = 0; i < 4; ++i) {
        new RawCall(&raw_service_, cq.get(), &counters_, &exchanges_);
        new SerializedEchoCall(&data_service_, cq.get(), &counters_);
        new SerializedPushCall(&data_service_, cq.get(), &counters_);
        new SerializedExchangeCall(&data_service_, cq.get(), &counters_, &exchanges_);
      }
      control_.Post(cq.get());
    }
    for (auto& cq : cqs_) {
      threads_.emplace_back([this, q = cq.get()] { Serve(q); });
    }
    started_ = true;
    return bound_port;
  }

  void Wait() override {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return shutdown_requested_ || !started_; });
    lock.unlock();
    std::call_once(stop_once_, [this] { Stop(); });
  }

  void Shutdown() override {
    std::lock_guard lock(mu_);
    shutdown_requested_ = true;
    cv_.notify_all();
  }

 private:
  void Serve(grpc::ServerCompletionQueue* q) {
    void* tag;
    bool ok;
    auto handle = [this](void* tag, bool ok) {
      // Proceed may start an operation; none may start once the queues are shutting down.
      std::shared_lock lock(lifecycle_);
      TagTakenFromQueue(tag);
      auto* call = static_cast<CallData*>(tag);
      if (stopping_) {
        call->Drop(ok);
      } else {
        call->Proceed(ok);
      }
    };
    if (!options_.busy_poll) {
      while (q->Next(&tag, &ok)) handle(tag, ok);
      return;
    }
    // A deadline in the past makes AsyncNext poll once without sleeping.
    const std::chrono::system_clock::time_point past{};
    while (true) {
      auto status = q->AsyncNext(&tag, &ok, past);
      if (status == grpc::CompletionQueue::SHUTDOWN) return;
      if (status == grpc::CompletionQueue::GOT_EVENT) handle(tag, ok);
    }
  }

  void Stop() {
    // Later answers from the handler do nothing; what it still holds fails now, while the
    // queues still take the calls' last events.
    exchanges_.hub->Close(ExchangeCancelledError());
    if (!started_) return;
    control_.CancelSessions();
    // Cancels what is still in flight; each call then gets one last event and is deleted.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    {
      std::unique_lock lock(lifecycle_);
      stopping_ = true;
    }
    for (auto& cq : cqs_) cq->Shutdown();
    for (auto& t : threads_) t.join();
  }

  ServerOptions options_;
  ControlPlaneHooks hooks_;
  grpc::AsyncGenericService raw_service_;
  wire::PsData::AsyncService data_service_;
  wire::PsControl::AsyncService control_service_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::thread> threads_;
  Counters counters_;
  Exchanges exchanges_;
  ControlPlane control_{&control_service_, &options_, &hooks_, &counters_};
  std::mutex mu_;
  std::condition_variable cv_;
  bool shutdown_requested_ = false;
  bool started_ = false;
  std::once_flag stop_once_;
  std::shared_mutex lifecycle_;
  bool stopping_ = false;
};

}  // namespace

std::unique_ptr<Server> NewGrpcServer(const ServerOptions& options, ControlPlaneHooks hooks) {
  return std::make_unique<GrpcServer>(options, std::move(hooks));
}

}  // namespace psbench::grpc_transport
