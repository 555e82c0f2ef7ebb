// --replay=timed: a captured training step (psbench-trace/2) replayed as it ran. Each step
// starts with every gradient written; then each bucket (DDP's, when the trace has them, else
// each tensor on its own, as TensorFlow's PS mode sends each variable) goes to the PS that hold
// its tensors at the moment the trace says it became ready, one part per PS, as the backward
// pass would produce it. The recorded time after the last gradient (the captured job's
// optimizer step and the like) needs the new parameters: it runs once every part is back. What
// the fabric costs the job is the step time less the recorded compute: the exposed
// communication, how long the last parts took past the end of the backward pass.
#ifndef PSBENCH_WORKER_TIMED_REPLAY_H_
#define PSBENCH_WORKER_TIMED_REPLAY_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/histogram.h"
#include "nlohmann/json.hpp"
#include "payloads/spec.h"
#include "ps/ps_client.h"

namespace psbench {

// The replayed model: the trace's tensors that have a gradient in some step, in model order,
// and its buckets over them.
struct TimedModel {
  std::vector<size_t> trace_tensor;          // replayed tensor -> the trace's tensor
  std::vector<std::string> names;            // per replayed tensor, as the trace names it
  std::vector<uint64_t> tensor_bytes;        // float32, rounded up to whole floats
  std::vector<std::vector<size_t>> buckets;  // replayed tensor indices
};
TimedModel TimedModelOf(const TraceTiming& timing);

struct TimedStep {
  uint64_t step = 0;
  size_t trace_step = 0;  // the trace's steps are replayed in turn
  double compute_us = 0;  // recorded
  double step_us = 0;     // replayed
  double exposed_us = 0;  // step_us - compute_us
  double last_back_us = 0;  // when the step's last part came back
  std::vector<double> bucket_ready_us;  // per bucket: recorded
  std::vector<double> bucket_start_us;  // per bucket: when its parts were started
};

struct TimedReplay {
  std::vector<TimedStep> steps;
  Histogram part_latency;  // ns, from a part's start to its parameters back
  // Per replayed tensor, one sample per step that sent it: from its part's start to its
  // parameters back (its push and pull), and from when the trace says its gradient became
  // ready to then (what the job waits for that tensor: its bucket's wait, the exchange).
  std::vector<std::vector<double>> tensor_latency_us, tensor_ready_to_back_us;
  uint64_t late_starts = 0;  // buckets started more than 50 us after their ready time
};

// The recorded compute of `steps` replayed steps: the least a timed replay of them takes.
absl::Duration ReplayedCompute(const TraceTiming& timing, int steps);

// Runs `steps` steps over `ps` (made with `model.buckets`); `fill(step)` writes every
// gradient of the step into ps.outgoing() before its clock starts.
absl::StatusOr<TimedReplay> RunTimedSteps(PsClient& ps, const TraceTiming& timing, const TimedModel& model,
                                          int steps, const std::function<void(int)>& fill,
                                          absl::Duration part_timeout);

// The record's "replay" object: per step, the summary (medians, part latency percentiles), and
// per tensor its PS and latency percentiles.
nlohmann::json TimedReplayJson(const TimedReplay& replay, const TimedModel& model, const PsClient& ps);

}  // namespace psbench

#endif  // PSBENCH_WORKER_TIMED_REPLAY_H_
