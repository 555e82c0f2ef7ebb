// One backward pass's gradients as a payload trace: each parameter's name, bytes and when it
// became ready, in the format the `trace` payload scheme replays (LoadTrace's "params" form).
#ifndef PSBENCH_WORKER_TRAINER_TRACE_H_
#define PSBENCH_WORKER_TRAINER_TRACE_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "worker/trainer/network.h"

namespace psbench::trainer {

class GradientTrace {
 public:
  explicit GradientTrace(const Network& net) : net_(net), ready_s_(net.params().size(), -1) {}
  // Call right before Backward(); then pass Ready as its callback.
  void Start();
  void Ready(int param);
  nlohmann::json ToJson() const;
  absl::Status Write(const std::string& path) const;

 private:
  const Network& net_;
  std::chrono::steady_clock::time_point start_;
  std::vector<double> ready_s_;
  std::vector<int> order_;
};

}  // namespace psbench::trainer

#endif  // PSBENCH_WORKER_TRAINER_TRACE_H_
