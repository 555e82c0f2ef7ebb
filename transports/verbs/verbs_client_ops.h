// What the grpc+verbs worker keeps per payload, per operation in flight and per PS
// (verbs_client.cc).
#ifndef PSBENCH_TRANSPORTS_VERBS_VERBS_CLIENT_OPS_H_
#define PSBENCH_TRANSPORTS_VERBS_VERBS_CLIENT_OPS_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "payloads/payload.h"
#include "psbench.grpc.pb.h"
#include "transports/data_meta.h"
#include "transports/exchange.h"
#include "transports/transport.h"
#include "transports/verbs/verbs_connection.h"

namespace psbench::verbs {

struct Registered {
  const Payload* payload = nullptr;
  std::shared_ptr<ibv_mr> mr;  // shared by payloads over the same arena (Payload::View)
  std::string meta;
  std::vector<ibv_sge> sges;
};

struct PendingOp {
  uint64_t tag = 0;
  Op op = Op::kPush;
  const Registered* reg = nullptr;
  uint32_t request_id = 0;
  absl::Time deadline;
  uint64_t received = 0;  // echo bytes back so far
  BufferChecksums checksums;
  std::string ps_error;  // the PS's own finding (echo with --validate)
  // kExchange: where the reply goes, the PS's verdict, and the copy into the reply buffers.
  const Registered* reply_reg = nullptr;
  std::vector<uint64_t> sent_checksums;  // of the request as it was sent
  bool reply_started = false;
  ExchangeReplyMeta reply;
  std::vector<std::span<std::byte>> reply_buffers;
  ScatterWriter writer;
};

struct Peer {
  std::string address;
  std::unique_ptr<wire::PsVerbs::Stub> stub;
  // The PS keeps our connection while this call lasts (see PsVerbs.Session).
  std::unique_ptr<grpc::ClientContext> session_context;
  std::unique_ptr<grpc::CompletionQueue> session_cq;
  std::unique_ptr<grpc::ClientAsyncReader<wire::VerbsSetupReply>> session;
  // A read left posted on the session: it completes only when the call ends, i.e. when the
  // PS goes away.
  wire::VerbsSetupReply session_end;
  std::unique_ptr<Connection> conn;
  uint32_t next_request = 1;
  // Oldest first. Replies come back in this order, except that an exchange's (which its
  // handler may hold) can overtake others.
  std::deque<std::unique_ptr<PendingOp>> in_flight;
  absl::Status failure;
};

}  // namespace psbench::verbs

#endif  // PSBENCH_TRANSPORTS_VERBS_VERBS_CLIENT_OPS_H_
