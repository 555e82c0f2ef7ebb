#include "transports/grpc/data_responder.h"

#include <grpcpp/impl/codegen/proto_utils.h>

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "payloads/payload.h"
#include "psbench.pb.h"
#include "transports/exchange.h"
#include "transports/grpc/raw_format.h"
#include "transports/grpc/serialized_format.h"

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

size_t HeaderBytes(const grpc::ByteBuffer& message) {
  SliceReader reader(message);
  auto header = ReadPayloadHeader(reader);
  return header.ok() ? message.Length() - reader.remaining() : 0;
}

void DropBlock(void* block) { delete static_cast<std::shared_ptr<BlockPool::Block>*>(block); }

template <typename Message>
grpc::ByteBuffer Serialize(const Message& m) {
  grpc::ByteBuffer out;
  bool own = false;
  (void)grpc::SerializationTraits<Message>::Serialize(m, &out, &own);
  return out;
}

void FinishWith(DataResponder::Finish& finish, const absl::Status& status) { finish(ToGrpc(status), nullptr); }
void FinishWithPsError(DataResponder::Finish& finish, const absl::Status& status) {
  FinishWith(finish, absl::Status(status.code(), absl::StrCat("PS: ", status.message())));
}
void FinishWithReply(DataResponder::Finish& finish, grpc::ByteBuffer reply) { finish(grpc::Status::OK, &reply); }

// Hands an exchange to the handler; its answer, perhaps from another thread, finishes the
// call: `reply(buffers)` builds the reply from them once the handler wrote them.
// The reply's bytes, `payload` of them the payload's, go on `tally` as it is handed to gRPC.
template <typename Reply>
void RunExchange(ExchangeHub& hub, std::shared_ptr<ExchangeBuffers> buffers, Reply reply,
                 DataResponder::Finish finish, DataTally* tally, uint64_t payload) {
  auto end = std::make_shared<DataResponder::Finish>(std::move(finish));
  auto deliver = [end, keep = buffers, reply = std::move(reply), tally, payload](const absl::Status& s, bool) {
    if (!s.ok()) {
      FinishWith(*end, s);
      return;
    }
    grpc::ByteBuffer message = reply(keep.get());
    tally->Sent(message.Length(), payload);
    FinishWithReply(*end, std::move(message));
  };
  if (!hub.Run(std::move(buffers), std::move(deliver))) FinishWith(*end, ExchangeCancelledError());
}

}  // namespace

void DataResponder::Respond(const std::string& method, grpc::ByteBuffer* request, Finish finish) {
  counters_->moved.Received(request->Length(), 0);  // its payload bytes once decoded (Count)
  if (method == kRawEchoMethod || method == kRawPushMethod) {
    RespondRaw(method == kRawEchoMethod, request, finish);
  } else if (method == kRawExchangeMethod) {
    RespondRawExchange(request, std::move(finish));
  } else if (method == kSerializedEchoMethod || method == kSerializedPushMethod) {
    RespondSerialized(method == kSerializedEchoMethod, request, finish);
  } else if (method == kSerializedExchangeMethod) {
    RespondSerializedExchange(request, std::move(finish));
  } else {
    FinishWith(finish, absl::UnimplementedError("unknown method " + method));
  }
}

// Non-serialized Echo and Push, read as raw byte buffers without protobuf.
void DataResponder::RespondRaw(bool echo, grpc::ByteBuffer* request, Finish& finish) {
  bool corrupt = counters_->ShouldCorrupt();
  if (corrupt && !echo) *request = CorruptedCopy(*request, HeaderBytes(*request));
  SliceReader reader(*request);
  std::vector<uint64_t> checksums;
  auto header = DecodeRawRequest(reader, &checksums);
  if (!header.ok()) {
    FinishWithPsError(finish, absl::DataLossError(header.status().message()));
    return;
  }
  Count(header->payload_bytes());
  if (corrupt && echo) *request = CorruptedCopy(*request, HeaderBytes(*request));
  if (echo) {
    // The reply is the request's own slices: nothing is copied.
    counters_->moved.Sent(request->Length(), header->payload_bytes());
    finish(grpc::Status::OK, request);
    return;
  }
  grpc::Slice ack = EncodeAck(header->payload_bytes(), checksums);
  counters_->moved.Sent(ack.size(), 0);
  FinishWithReply(finish, grpc::ByteBuffer(&ack, 1));
}

// The handler sees each request buffer as one span (DecodeRawExchange): the bytes of the
// slice it arrived in when it lies in one, else a copy in pooled memory, which the reply then
// overwrites in place. Other reply buffers get pooled memory of their own; gRPC sends the reply
// from there (no copy), holding the block until it is done with it.
void DataResponder::RespondRawExchange(grpc::ByteBuffer* request_in, Finish finish) {
  if (exchanges_->hub->handler() == nullptr) {
    FinishWith(finish, NoExchangeHandlerError());
    return;
  }
  // Injected faults hit an exchange before the PS checks it, as a push.
  if (counters_->ShouldCorrupt()) *request_in = CorruptedCopy(*request_in, HeaderBytes(*request_in));
  auto buffers = std::make_shared<ExchangeBuffers>();
  auto request = std::make_shared<grpc::ByteBuffer>();
  request->Swap(request_in);
  buffers->keep = request;  // the handler's spans may point into its slices
  SliceReader reader(*request);
  absl::StatusOr<uint64_t> decoded = DecodeRawExchange(reader, *exchanges_->pool, buffers.get());
  if (!decoded.ok()) {
    FinishWithPsError(finish, decoded.status());
    return;
  }
  Count(*decoded);
  RunExchange(*exchanges_->hub, std::move(buffers), [](ExchangeBuffers* buffers) {
    std::vector<grpc::Slice> slices;
    slices.emplace_back(EncodePayloadHeader(
        buffers->sizes, buffers->validate ? &buffers->reply_checksums : nullptr));
    for (const auto& b : buffers->reply) {
      if (b.empty()) continue;
      slices.emplace_back(b.data(), b.size(), &DropBlock,
                          new std::shared_ptr<BlockPool::Block>(buffers->block));
    }
    return grpc::ByteBuffer(slices.data(), slices.size());
  }, std::move(finish), &counters_->moved, *decoded);
}

// Serialized Echo and Push: parsed into a PayloadMessage and checked; echo answers with that
// message (serialized again, as a server built on protobuf would), push with an ack.
void DataResponder::RespondSerialized(bool echo, grpc::ByteBuffer* request, Finish& finish) {
  wire::PayloadMessage m;
  if (absl::Status s = ParseSerializedRequest(request, &m); !s.ok()) {
    FinishWithPsError(finish, s);
    return;
  }
  // Injected faults hit a push before the PS checks it, an echo after (the worker checks).
  bool corrupt = counters_->ShouldCorrupt();
  if (corrupt && !echo) CorruptMessage(&m);
  std::vector<uint64_t> computed;
  uint64_t bytes;
  if (absl::Status s = VerifyPayloadMessage(m, &computed, &bytes); !s.ok()) {
    FinishWithPsError(finish, s);
    return;
  }
  Count(bytes);
  if (echo) {
    if (corrupt) CorruptMessage(&m);
    Reply(finish, Serialize(m), bytes);
    return;
  }
  wire::AckMessage ack;
  ack.set_bytes_received(bytes);
  for (uint64_t c : computed) ack.add_checksums(c);
  Reply(finish, Serialize(ack), 0);
}

// Serialized Exchange. The handler's reply overwrites the request message's own strings (each
// buffer already contiguous there), and that message goes back.
void DataResponder::RespondSerializedExchange(grpc::ByteBuffer* request, Finish finish) {
  if (exchanges_->hub->handler() == nullptr) {
    FinishWith(finish, NoExchangeHandlerError());
    return;
  }
  auto m = std::make_shared<wire::PayloadMessage>();
  if (absl::Status s = ParseSerializedRequest(request, m.get()); !s.ok()) {
    FinishWithPsError(finish, s);
    return;
  }
  if (counters_->ShouldCorrupt()) CorruptMessage(m.get());
  std::vector<uint64_t> computed;
  uint64_t bytes;
  if (absl::Status s = VerifyPayloadMessage(*m, &computed, &bytes); !s.ok()) {
    FinishWithPsError(finish, s);
    return;
  }
  Count(bytes);
  auto buffers = std::make_shared<ExchangeBuffers>();
  buffers->keep = m;
  ExchangeBuffersFromMessage(*m, buffers.get());
  RunExchange(*exchanges_->hub, std::move(buffers), [m = m.get()](ExchangeBuffers* buffers) {
    m->clear_checksums();
    for (uint64_t c : buffers->reply_checksums) m->add_checksums(c);
    return Serialize(*m);
  }, std::move(finish), &counters_->moved, bytes);
}

void DataResponder::Count(uint64_t bytes) {
  counters_->rpcs.fetch_add(1, std::memory_order_relaxed);
  counters_->moved.Received(0, bytes, 0);  // GetInfo's bytes_received reads these
}

void DataResponder::Reply(Finish& finish, grpc::ByteBuffer reply, uint64_t payload) {
  counters_->moved.Sent(reply.Length(), payload);
  FinishWithReply(finish, std::move(reply));
}

}  // namespace psbench::grpc_transport
