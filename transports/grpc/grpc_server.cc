// PS side of the gRPC transport: the raw (non-serialized) methods through the generic service
// and the serialized methods through the generated async service, served on the control
// server's completion-queue threads beside the control plane. Everything runs on the same
// few threads, so no call hops between thread pools.
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_builder.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "payloads/payload.h"
#include "psbench.grpc.pb.h"
#include "transports/exchange.h"
#include "transports/grpc/grpc_transport.h"
#include "transports/grpc/raw_format.h"
#include "transports/grpc/serialized_format.h"
#include "transports/control/control_server.h"
#include "transports/grpc/server_calls.h"

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
        if (!ok) {
          // No request message: the client half-closed without one, or went away. Either
          // way it is answered (a client still there would otherwise wait out its deadline).
          state_ = kFinishing;
          stream_.Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                      context_.method() + ": the call ended without a request message"),
                         this);
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

// gRPC's data plane on the PS's gRPC server: its services and calls, its counters, and the
// exchanges it serves; the server (control_) serves them beside the control plane.
class GrpcServer final : public Server {
 public:
  explicit GrpcServer(const ServerOptions& options) {
    counters_.corrupt_every = options.corrupt_every;
    exchanges_.hub = ExchangeHub::Create(options.exchange_handler);
    exchanges_.pool = BlockPool::Create();
    control::DataPlane data_plane;
    data_plane.transport = "grpc";
    data_plane.describe = [] { return std::string("gRPC over TCP"); };
    data_plane.counters = [this] {
      return control::DataCounters{counters_.rpcs.load(), counters_.bytes.load()};
    };
    data_plane.generic = &raw_service_;
    data_plane.services = {&data_service_};
    data_plane.post = [this](grpc::ServerCompletionQueue* cq) {
      // Several calls of each kind are posted per queue so a burst never waits for a post.
      for (int i = 0; i < 4; ++i) {
        new RawCall(&raw_service_, cq, &counters_, &exchanges_);
        new SerializedEchoCall(&data_service_, cq, &counters_);
        new SerializedPushCall(&data_service_, cq, &counters_);
        new SerializedExchangeCall(&data_service_, cq, &counters_, &exchanges_);
      }
    };
    // Later answers from the handler do nothing; what it still holds fails now.
    data_plane.on_stop = [this] { exchanges_.hub->Close(ExchangeCancelledError()); };
    control_ = std::make_unique<control::ControlServer>(options, std::move(data_plane));
  }

  // The server's threads end before the services, counters and exchanges they use.
  ~GrpcServer() override { control_.reset(); }

  absl::StatusOr<int> Start() override { return control_->Start(); }
  void Wait() override { control_->Wait(); }
  void Shutdown() override { control_->Shutdown(); }

 private:
  grpc::AsyncGenericService raw_service_;
  wire::PsData::AsyncService data_service_;
  Counters counters_;
  Exchanges exchanges_;
  std::unique_ptr<control::ControlServer> control_;
};

}  // namespace

std::unique_ptr<Server> NewGrpcServer(const ServerOptions& options) {
  return std::make_unique<GrpcServer>(options);
}

}  // namespace psbench::grpc_transport
