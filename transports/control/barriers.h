// The PS's polled barriers (PsControl.Barrier; see BarrierRequest in psbench.proto). Workers
// poll a named barrier until as many distinct ones as it has parties wait at it at once.
#ifndef PSBENCH_TRANSPORTS_CONTROL_BARRIERS_H_
#define PSBENCH_TRANSPORTS_CONTROL_BARRIERS_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "psbench.pb.h"

namespace psbench::control {

class Barriers {
 public:
  using Clock = std::chrono::steady_clock;
  // Live callers poll every millisecond; a lease this short keeps a worker that just died
  // from being counted, and is still far above any scheduling hiccup.
  static constexpr auto kLease = std::chrono::milliseconds(500);
  // Two arrivals of one index with different nonces this close together are two live workers.
  static constexpr auto kDuplicate = std::chrono::milliseconds(250);
  // How long a released barrier answers "released" to its late pollers.
  static constexpr auto kForget = std::chrono::seconds(60);
  // Names are a run id and a phase: a client's own must not grow the PS without end.
  static constexpr size_t kMaxName = 1024;
  static constexpr size_t kMaxBarriers = 4096;

  // One poll: OK with the barrier's state in *reply, or the reason this arrival is refused.
  grpc::Status Poll(const wire::BarrierRequest& r, wire::BarrierReply* reply) {
    return Poll(r, reply, Clock::now());
  }
  grpc::Status Poll(const wire::BarrierRequest& r, wire::BarrierReply* reply, Clock::time_point now);
  // Barriers held (waiting or recently released).
  size_t size();

 private:
  struct Arrival {
    uint64_t nonce;
    Clock::time_point seen;
  };
  struct Barrier {
    int parties = 0;
    std::map<int, Arrival> waiting;
    std::set<std::pair<int, uint64_t>> released;
    Clock::time_point released_at;
  };
  void Expire(Clock::time_point now);
  bool MakeRoom();

  std::mutex mu_;
  std::map<std::string, Barrier> barriers_;
};

}  // namespace psbench::control

#endif  // PSBENCH_TRANSPORTS_CONTROL_BARRIERS_H_
