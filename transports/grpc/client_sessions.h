// The gRPC worker's connection to each PS beyond the data plane: the channel and stubs, the
// session it holds open while connected (counted against the PS's --max-connections), why a
// PS could not be reached, and the goodbye at the end.
#ifndef PSBENCH_TRANSPORTS_GRPC_CLIENT_SESSIONS_H_
#define PSBENCH_TRANSPORTS_GRPC_CLIENT_SESSIONS_H_

#include <grpcpp/completion_queue.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "psbench.grpc.pb.h"
#include "transports/transport.h"

namespace psbench::grpc_transport {

// A gRPC status as psbench's, naming the PS.
absl::Status FromGrpc(const grpc::Status& s, const std::string& server);

// One PS as the worker sees it.
struct PsChannel {
  std::string address;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<grpc::GenericStub> raw;
  std::unique_ptr<wire::PsData::Stub> data;
  std::unique_ptr<wire::PsControl::Stub> control;
  // The session this worker holds on the PS while connected (PsControl.Session).
  std::unique_ptr<grpc::ClientContext> session_context;
  std::unique_ptr<grpc::ClientAsyncReader<wire::SessionReply>> session;
  bool session_open = false;  // started and not finished: cancel and finish it at the end
  uint64_t max_message_bytes = 0;  // what the PS said; 0: unknown
  uint64_t session_id = 0;         // names the session in Goodbye; 0: the PS gave none
};

// Why a PS could not be reached, in one line.
absl::Status ConnectFailure(const ClientOptions& options, PsChannel& s);
// Opens this worker's session on a PS, which counts it against its --max-connections.
absl::Status OpenSession(absl::Duration connect_timeout, grpc::CompletionQueue& session_cq, PsChannel& s);
// Ends every session (each PS hears a goodbye first) and drains their queue.
void CloseSessions(std::vector<PsChannel>& servers, grpc::CompletionQueue& session_cq);

}  // namespace psbench::grpc_transport

#endif  // PSBENCH_TRANSPORTS_GRPC_CLIENT_SESSIONS_H_
