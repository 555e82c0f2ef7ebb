// --benchmark=updates, the "no lost update" check: every worker pushes integer-valued
// gradients through kExchange to every PS (the model, the payload plan's buffers as float32
// tensors, sharded over the PS) for --steps steps, synchronous or asynchronous SGD, then
// reads the parameters back and compares every element with the exact value: the initial
// values less every update the PS applied. In sync mode that is every worker's every step;
// in async mode it is what the PS reports it applied (ServerInfo.updates: which steps of
// which worker), read as one consistent snapshot with the parameters, so the check holds
// even when a worker died mid-run, and each worker's own steps must all be there, once.
//
// Arithmetic is exact: initial values are integers in [0, 1024), learning rate 1, momentum
// 0; worker w's gradient of step s for element i of tensor t is
// 1 + ((A(w, s, i) + B(t, i)) mod 4), times the worker count in sync mode (the PS applies the
// mean), so every value stays an integer below 2^24 (CheckExact refuses runs that would
// not). A is 2 bits of a code unique to the
// update, B a seeded hash (update_codes.h): a tensor off by one update's gradient names the
// worker and step of that update, left out or applied twice.
#ifndef PSBENCH_WORKER_UPDATES_WORKER_H_
#define PSBENCH_WORKER_UPDATES_WORKER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/scenario.h"
#include "transports/transport.h"

namespace psbench {

struct UpdatesSettings {
  int steps = 10;
  bool sync = true;
  bool timed = false;  // --replay=timed (worker/timed_replay.h)
};

// --steps, --sync/--async and --replay (the trainer's flags), checked for `num_workers` workers (that
// no other flag is set that does not apply is bench/flag_scope.h's check).
absl::StatusOr<UpdatesSettings> UpdatesSettingsFromFlags(int num_workers);
// --replay=timed needs a trace with ready times (psbench-trace/2); InvalidArgument otherwise.
absl::Status CheckReplay(const UpdatesSettings& settings, const PayloadPlan& plan);
// The model's tensors, bytes each: every payload's buffers in order (a trace's groups
// together); timed, the trace's tensors that have a gradient, in model order.
std::vector<uint64_t> UpdatesModelBytes(const UpdatesSettings& settings, const PayloadPlan& plan);
// InvalidArgument when the model has fewer tensors than PS (each PS needs one).
absl::Status CheckUpdatesModel(size_t tensors, size_t num_ps);
// The worker command-line flags that reproduce `settings`.
std::vector<std::string> UpdatesWorkerArgs(const UpdatesSettings& settings);

// The largest steps x workers for which every value stays exact in float32.
inline constexpr int64_t kMaxUpdates = ((int64_t{1} << 24) - 1024) / 4;
// InvalidArgument when `settings` with `num_workers` workers would take a value past exact
// float32: steps x workers over kMaxUpdates, or (sync) a step's sum (update_codes.h).
absl::Status CheckExact(const UpdatesSettings& settings, int num_workers);

// Runs the check on a connected client and returns the exit status (0: every element
// exact; 1: a mismatch or a failed exchange, named on stderr; 2: bad input). Prints one
// line unless quiet; appends the "kind": "updates" record to json_path when given.
int RunUpdatesWorker(const Scenario& scenario, Client& client, const UpdatesSettings& settings,
                     const std::string& json_path, bool quiet,
                     const std::vector<std::string>& command);

}  // namespace psbench

#endif  // PSBENCH_WORKER_UPDATES_WORKER_H_
