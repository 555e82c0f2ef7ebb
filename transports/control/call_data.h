// A call served on a PS's gRPC completion queues: control plane calls and gRPC's own data
// plane calls alike are small state machines driven by their queue events.
#ifndef PSBENCH_TRANSPORTS_CONTROL_CALL_DATA_H_
#define PSBENCH_TRANSPORTS_CONTROL_CALL_DATA_H_

namespace psbench::control {

class CallData {
 public:
  virtual ~CallData() = default;
  virtual void Proceed(bool ok) = 0;
  // An event that arrives while the server stops: the call must only clean up.
  virtual void Drop(bool ok) { delete this; }
};

}  // namespace psbench::control

#endif  // PSBENCH_TRANSPORTS_CONTROL_CALL_DATA_H_
