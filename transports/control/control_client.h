// The worker's side of the control plane (PsControl), the same on every transport: one
// channel per PS, the check that each is a psbench PS, the session a worker holds open while
// connected (counted against the PS's --max-connections), GetInfo, the start barriers, and
// the goodbye at the end. A data plane adds its own stubs, on channel(i) or its own.
#ifndef PSBENCH_TRANSPORTS_CONTROL_CONTROL_CLIENT_H_
#define PSBENCH_TRANSPORTS_CONTROL_CONTROL_CLIENT_H_

#include <grpcpp/completion_queue.h>
#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "psbench.grpc.pb.h"
#include "transports/transport.h"

namespace psbench::control {

// A PS that answered once and is now UNAVAILABLE went away: ABORTED, a runtime failure rather
// than a wrong address (Client::Connect's codes). Other statuses are returned as they are.
absl::Status LostAfterAnswering(absl::Status s);
// A call to a PS that answered before ended with `s`: the PS's refusals (bad settings, no room)
// keep their code, anything else is ABORTED (the PS was lost), with `message`.
absl::Status EndedAfterAnswering(const grpc::Status& s, const std::string& message);

class ControlClient {
 public:
  // One channel per PS of options.servers; nothing is dialled yet.
  explicit ControlClient(const ClientOptions& options);
  ~ControlClient();  // Close()
  ControlClient(const ControlClient&) = delete;
  ControlClient& operator=(const ControlClient&) = delete;

  // Waits for every PS's channel, asks each who it is (a connection alone could be any gRPC
  // server) and opens this worker's session on each. Fails naming the first PS that did not
  // answer within connect_timeout, or why it refused.
  absl::Status Connect();
  // Says goodbye to every PS (so that it does not count this worker as lost) and ends the
  // sessions. Idempotent.
  void Close();

  size_t num_servers() const { return servers_.size(); }
  const std::string& address(size_t i) const { return servers_[i].address; }
  const std::shared_ptr<grpc::Channel>& channel(size_t i) const { return servers_[i].channel; }
  // The largest message PS i accepts, as it said when admitting the session; 0: unknown.
  uint64_t max_message_bytes(size_t i) const { return servers_[i].max_message_bytes; }
  // INVALID_ARGUMENT when a message of `message_bytes` carrying `payload_bytes` of payload is
  // over some PS's limit (bad input, found before anything is sent), naming both.
  absl::Status CheckMessageFits(uint64_t payload_bytes, uint64_t message_bytes) const;

  absl::StatusOr<ServerInfo> GetInfo(size_t i);
  // A client's counts (Client::Counts): its data plane's, this control plane's GetInfo and
  // Barrier calls (requests sent, replies received, their bytes), and the process's gRPC
  // payload calls.
  ClientCounts Counts(std::string plane, const DataCounts& data) const {
    return {std::move(plane), data, tally_.Read(), ProcessGrpcPayloadCalls()};
  }
  // See Client::Barrier: polled on PS 0.
  absl::Status Barrier(const std::string& name, int parties, int worker_index, absl::Time deadline);

 private:
  struct Ps {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<wire::PsControl::Stub> control;
    // The session this worker holds on the PS while connected (PsControl.Session).
    std::unique_ptr<grpc::ClientContext> session_context;
    std::unique_ptr<grpc::ClientAsyncReader<wire::SessionReply>> session;
    bool session_open = false;  // started and not finished: cancel and finish it at the end
    uint64_t max_message_bytes = 0;
    uint64_t session_id = 0;  // names the session in Goodbye; 0: the PS gave none
  };
  absl::Status ConnectFailure(Ps& s);
  void Count(const google::protobuf::Message& request, const google::protobuf::Message* reply);
  absl::Status OpenSession(Ps& s);

  const ClientOptions options_;
  std::vector<Ps> servers_;
  grpc::CompletionQueue session_cq_;  // sessions only, polled while opening and closing them
  bool closed_ = false;
  DataTally tally_{DataTally::kManyWriters};  // GetInfo may come from a progress thread
  // Identifies this process at barriers (a restarted worker gets a new one).
  const uint64_t nonce_ = std::random_device{}() * 0x100000001ull ^ std::random_device{}();
};

}  // namespace psbench::control

#endif  // PSBENCH_TRANSPORTS_CONTROL_CONTROL_CLIENT_H_
