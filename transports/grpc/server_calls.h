// What the gRPC PS's calls share (grpc_server.cc: the data plane and the server; control_calls.cc:
// the control plane): its counters, the exchange handler, the call state machine, and the
// control plane as one object the server posts calls for.
#ifndef PSBENCH_TRANSPORTS_GRPC_SERVER_CALLS_H_
#define PSBENCH_TRANSPORTS_GRPC_SERVER_CALLS_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "psbench.grpc.pb.h"
#include "transports/exchange.h"
#include "transports/grpc/grpc_transport.h"
#include "transports/transport.h"

namespace psbench::grpc_transport {

struct Counters {
  std::atomic<uint64_t> rpcs{0};
  std::atomic<uint64_t> bytes{0};
  int64_t corrupt_every = 0;
  std::atomic<int64_t> received{0};
  // Worker sessions that ended without a goodbye (Sessions keeps it; GetInfo reports it).
  std::atomic<uint64_t> sessions_lost{0};
  // True when this payload is one the fault injector should damage.
  bool ShouldCorrupt() {
    return corrupt_every > 0 && (received.fetch_add(1) + 1) % corrupt_every == 0;
  }
};

// What serves kExchange: the handler (through the hub, which the server closes when it
// stops) and pooled memory for requests that arrive fragmented and for replies.
struct Exchanges {
  std::shared_ptr<ExchangeHub> hub;
  std::shared_ptr<BlockPool> pool;
};

inline grpc::Status ToGrpc(const absl::Status& s) {
  // gRPC's codes are absl's, number for number.
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

// Each call is a small state machine driven by its completion-queue events.
class CallData {
 public:
  virtual ~CallData() = default;
  virtual void Proceed(bool ok) = 0;
  // An event that arrives while the server stops: the call must only clean up.
  virtual void Drop(bool ok) { delete this; }
};

// The control plane (PsControl): GetInfo, the start barriers, the worker sessions counted
// against --max-connections and their goodbyes.
class ControlPlane {
 public:
  ControlPlane(wire::PsControl::AsyncService* service, const ServerOptions* options,
               const ControlPlaneHooks* hooks, Counters* counters);
  ~ControlPlane();
  // Posts one call of each kind on `cq` (each posts its successor when it starts).
  void Post(grpc::ServerCompletionQueue* cq);
  // Ends every session held open (the server is stopping).
  void CancelSessions();

 private:
  struct State;
  wire::PsControl::AsyncService* service_;
  const ServerOptions* options_;
  const ControlPlaneHooks* hooks_;
  Counters* counters_;
  std::unique_ptr<State> state_;
};

}  // namespace psbench::grpc_transport

#endif  // PSBENCH_TRANSPORTS_GRPC_SERVER_CALLS_H_
