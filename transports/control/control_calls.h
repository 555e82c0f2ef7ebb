// The control plane's calls (PsControl), posted on every serving queue of ControlServer.
#ifndef PSBENCH_TRANSPORTS_CONTROL_CONTROL_CALLS_H_
#define PSBENCH_TRANSPORTS_CONTROL_CONTROL_CALLS_H_

#include <grpcpp/grpcpp.h>

#include <memory>

#include "psbench.grpc.pb.h"
#include "transports/control/control_server.h"
#include "transports/transport.h"

namespace psbench::control {

// GetInfo, the start barriers, the worker sessions counted against --max-connections and
// their goodbyes.
class ControlPlane {
 public:
  ControlPlane(wire::PsControl::AsyncService* service, const ServerOptions* options,
               const DataPlane* data_plane);
  ~ControlPlane();
  // Posts one call of each kind on `cq` (each posts its successor when it starts).
  void Post(grpc::ServerCompletionQueue* cq);
  // Ends every session held open (the server is stopping).
  void CancelSessions();

  struct State;

 private:
  wire::PsControl::AsyncService* service_;
  const ServerOptions* options_;
  const DataPlane* data_plane_;
  std::unique_ptr<State> state_;
};

}  // namespace psbench::control

#endif  // PSBENCH_TRANSPORTS_CONTROL_CONTROL_CALLS_H_
