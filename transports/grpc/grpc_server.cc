// PS side of the gRPC transport: the raw (non-serialized) and serialized methods, all through
// the generic service, served on the control server's completion-queue threads beside the
// control plane. Everything runs on the same few threads, so no call hops between pools.
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/impl/codegen/proto_utils.h>
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

// Every data method, raw and serialized, through the generic service: a serialized request
// is counted before protobuf parses it (ParseSerializedRequest), so what it costs the PS is
// bounded before anything is allocated for it, as the raw header's count bounds a raw one.
class DataCall final : public CallData {
 public:
  DataCall(grpc::AsyncGenericService* service, grpc::ServerCompletionQueue* cq,
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
        new DataCall(service_, cq_, counters_, exchanges_);
        state_ = kReading;
        stream_.Read(&request_, this);
        return;
      case kReading:
        if (!ok) {
          // No request message: the client half-closed without one, or went away. Either
          // way it is answered (a client still there would otherwise wait out its deadline).
          FinishWith(absl::InvalidArgumentError(
              absl::StrCat(context_.method(), ": the call ended without a request message")));
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
    const std::string& method = context_.method();
    if (method == kRawEchoMethod || method == kRawPushMethod) {
      RespondRaw(method == kRawEchoMethod);
    } else if (method == kRawExchangeMethod) {
      RespondRawExchange();
    } else if (method == kSerializedEchoMethod || method == kSerializedPushMethod) {
      RespondSerialized(method == kSerializedEchoMethod);
    } else if (method == kSerializedExchangeMethod) {
      RespondSerializedExchange();
    } else {
      FinishWith(absl::UnimplementedError("unknown method " + method));
    }
  }

  // Ends the call with an error (the PS's words, for whoever called).
  void FinishWith(const absl::Status& status) {
    state_ = kFinishing;
    stream_.Finish(ToGrpc(status), this);
  }
  void FinishWithPsError(const absl::Status& status) {
    FinishWith(absl::Status(status.code(), absl::StrCat("PS: ", status.message())));
  }
  // Ends the call with response_ as its reply.
  void FinishWithResponse() {
    state_ = kFinishing;
    stream_.WriteAndFinish(response_, grpc::WriteOptions(), grpc::Status::OK, this);
  }
  template <typename Message>
  void SerializeResponse(const Message& m) {
    bool own = false;
    (void)grpc::SerializationTraits<Message>::Serialize(m, &response_, &own);
  }

  // Non-serialized Echo and Push, read as raw byte buffers without protobuf.
  void RespondRaw(bool echo) {
    bool corrupt = counters_->ShouldCorrupt();
    if (corrupt && !echo) request_ = CorruptedCopy(request_, HeaderBytes(request_));
    SliceReader reader(request_);
    std::vector<uint64_t> checksums;
    auto header = DecodeRawRequest(reader, &checksums);
    if (!header.ok()) {
      FinishWithPsError(absl::DataLossError(header.status().message()));
      return;
    }
    counters_->rpcs.fetch_add(1, std::memory_order_relaxed);
    counters_->bytes.fetch_add(header->payload_bytes(), std::memory_order_relaxed);
    if (corrupt && echo) request_ = CorruptedCopy(request_, HeaderBytes(request_));
    if (echo) {
      // The reply is the request's own slices: nothing is copied.
      response_.Swap(&request_);
    } else {
      std::string ack = EncodeAck(header->payload_bytes(), checksums);
      grpc::Slice slice(ack);
      response_ = grpc::ByteBuffer(&slice, 1);
    }
    FinishWithResponse();
  }

  // The handler sees each request buffer as one span (DecodeRawExchange): the bytes of the
  // slice it arrived in when it lies in one, else a copy in pooled memory, which the reply
  // then overwrites in place. Other reply buffers get pooled memory of their own; gRPC sends
  // the reply from there (no copy), holding the block until it is done with it.
  void RespondRawExchange() {
    if (exchanges_->hub->handler() == nullptr) {
      FinishWith(NoExchangeHandlerError());
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
      FinishWithPsError(decoded.status());
      return;
    }
    Count(*decoded);
    RunExchange(std::move(buffers), [this](ExchangeBuffers* buffers) {
      std::vector<grpc::Slice> slices;
      slices.emplace_back(EncodePayloadHeader(
          buffers->sizes, buffers->validate ? &buffers->reply_checksums : nullptr));
      for (const auto& b : buffers->reply) {
        if (b.empty()) continue;
        slices.emplace_back(b.data(), b.size(), &DropBlock,
                            new std::shared_ptr<BlockPool::Block>(buffers->block));
      }
      response_ = grpc::ByteBuffer(slices.data(), slices.size());
    });
  }

  // Serialized Echo and Push: parsed into a PayloadMessage and checked; echo answers with
  // that message (serialized again, as a server built on protobuf would), push with an ack.
  void RespondSerialized(bool echo) {
    wire::PayloadMessage m;
    if (absl::Status s = ParseSerializedRequest(&request_, &m); !s.ok()) {
      FinishWithPsError(s);
      return;
    }
    // Injected faults hit a push before the PS checks it, an echo after (the worker checks).
    bool corrupt = counters_->ShouldCorrupt();
    if (corrupt && !echo) CorruptMessage(&m);
    std::vector<uint64_t> computed;
    uint64_t bytes;
    if (absl::Status s = VerifyPayloadMessage(m, &computed, &bytes); !s.ok()) {
      FinishWithPsError(s);
      return;
    }
    Count(bytes);
    if (echo) {
      if (corrupt) CorruptMessage(&m);
      SerializeResponse(m);
    } else {
      wire::AckMessage ack;
      ack.set_bytes_received(bytes);
      for (uint64_t c : computed) ack.add_checksums(c);
      SerializeResponse(ack);
    }
    FinishWithResponse();
  }

  // Serialized Exchange. The handler's reply overwrites the request message's own strings
  // (each buffer already contiguous there), and that message goes back.
  void RespondSerializedExchange() {
    if (exchanges_->hub->handler() == nullptr) {
      FinishWith(NoExchangeHandlerError());
      return;
    }
    auto m = std::make_shared<wire::PayloadMessage>();
    if (absl::Status s = ParseSerializedRequest(&request_, m.get()); !s.ok()) {
      FinishWithPsError(s);
      return;
    }
    if (counters_->ShouldCorrupt()) CorruptMessage(m.get());
    std::vector<uint64_t> computed;
    uint64_t bytes;
    if (absl::Status s = VerifyPayloadMessage(*m, &computed, &bytes); !s.ok()) {
      FinishWithPsError(s);
      return;
    }
    Count(bytes);
    auto buffers = std::make_shared<ExchangeBuffers>();
    buffers->keep = m;
    ExchangeBuffersFromMessage(*m, buffers.get());
    RunExchange(std::move(buffers), [this, m = m.get()](ExchangeBuffers* buffers) {
      m->clear_checksums();
      for (uint64_t c : buffers->reply_checksums) m->add_checksums(c);
      SerializeResponse(*m);
    });
  }

  void Count(uint64_t bytes) {
    counters_->rpcs.fetch_add(1, std::memory_order_relaxed);
    counters_->bytes.fetch_add(bytes, std::memory_order_relaxed);
  }

  // Hands an exchange to the handler; its answer, perhaps from another thread, finishes the
  // call: `reply(buffers)` fills response_ from them once the handler wrote them. This call
  // stays alive until its Finish completes and nothing else finishes it, so `this` is safe
  // to use until then; from Run on, the call may finish (and be deleted) on another thread.
  template <typename Reply>
  void RunExchange(std::shared_ptr<ExchangeBuffers> buffers, Reply reply) {
    state_ = kFinishing;
    auto deliver = [this, keep = buffers, reply = std::move(reply)](const absl::Status& s, bool) {
      if (!s.ok()) {
        StartFromAnotherThread(this, [&] { stream_.Finish(ToGrpc(s), this); });
        return;
      }
      reply(keep.get());
      StartFromAnotherThread(this, [&] {
        stream_.WriteAndFinish(response_, grpc::WriteOptions(), grpc::Status::OK, this);
      });
    };
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
    data_plane.generic = &data_service_;
    data_plane.post = [this](grpc::ServerCompletionQueue* cq) {
      // Several calls of each kind are posted per queue so a burst never waits for a post.
      for (int i = 0; i < 16; ++i) new DataCall(&data_service_, cq, &counters_, &exchanges_);
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
  grpc::AsyncGenericService data_service_;
  Counters counters_;
  Exchanges exchanges_;
  std::unique_ptr<control::ControlServer> control_;
};

}  // namespace

std::unique_ptr<Server> NewGrpcServer(const ServerOptions& options) {
  return std::make_unique<GrpcServer>(options);
}

}  // namespace psbench::grpc_transport
