// How the PS answers one gRPC data call (raw or serialized Echo, Push, Exchange), whichever of
// gRPC's server APIs carries it: the completion-queue calls and the callback reactors in
// grpc_server.cc both hand the received message here and send what comes back.
#ifndef PSBENCH_TRANSPORTS_GRPC_DATA_RESPONDER_H_
#define PSBENCH_TRANSPORTS_GRPC_DATA_RESPONDER_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

#include <string>

#include "absl/functional/any_invocable.h"
#include "transports/grpc/server_calls.h"

namespace psbench::grpc_transport {

class DataResponder {
 public:
  // The call's end: an error status, or OK and the reply to write (moved from, by Swap).
  using Finish = absl::AnyInvocable<void(const grpc::Status& status, grpc::ByteBuffer* reply)>;

  DataResponder(Counters* counters, Exchanges* exchanges) : counters_(counters), exchanges_(exchanges) {}

  // Answers `request` (consumed) of `method`. `finish` runs exactly once: before Respond
  // returns, or for an exchange when the handler answers, perhaps on another thread.
  void Respond(const std::string& method, grpc::ByteBuffer* request, Finish finish);

 private:
  void RespondRaw(bool echo, grpc::ByteBuffer* request, Finish& finish);
  void RespondRawExchange(grpc::ByteBuffer* request, Finish finish);
  void RespondSerialized(bool echo, grpc::ByteBuffer* request, Finish& finish);
  void RespondSerializedExchange(grpc::ByteBuffer* request, Finish finish);
  // A payload of `bytes` received and checked.
  void Count(uint64_t bytes);
  // Hands `reply` (`payload` of its bytes the payload's) to gRPC, counted as sent.
  void Reply(Finish& finish, grpc::ByteBuffer reply, uint64_t payload);

  Counters* counters_;
  Exchanges* exchanges_;
};

}  // namespace psbench::grpc_transport

#endif  // PSBENCH_TRANSPORTS_GRPC_DATA_RESPONDER_H_
