// The trainer's gradients as a psbench-trace/2 (docs/replay.md), the format psbench_trace
// captures from PyTorch: each parameter's name and bytes, and per step when the step started,
// how long it computed and when each gradient became ready.
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
  explicit GradientTrace(const Network& net) : net_(net) {}
  // A step: StepStart() before its forward pass, Ready(p) as Backward's callback, StepEnd()
  // once its compute is done (before any exchange).
  void StepStart();
  void Ready(int param);
  void StepEnd();
  nlohmann::json ToJson() const;
  absl::Status Write(const std::string& path) const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Step {
    Clock::time_point start;
    double compute_s = 0;
    std::vector<double> ready_s;  // from the step's start; < 0: no gradient
  };
  const Network& net_;
  std::vector<Step> steps_;
  bool open_ = false;
};

}  // namespace psbench::trainer

#endif  // PSBENCH_WORKER_TRAINER_TRACE_H_
