// psbench-worker --trainer=MODEL: trains the model with the embedded trainer and moves its
// real gradients and parameters through the PS over the connected transport.
#ifndef PSBENCH_WORKER_TRAIN_WORKER_H_
#define PSBENCH_WORKER_TRAIN_WORKER_H_

#include <string>
#include <vector>

#include "bench/progress.h"
#include "bench/scenario.h"
#include "transports/transport.h"
#include "worker/trainer_flags.h"

namespace psbench {

// Runs the whole training run on a connected client (every PS of `scenario.ps`) and returns
// the exit status. Prints one line per run unless quiet; appends the JSON record to
// json_path when given. Counts its steps in LoopProgress (warm-up steps, then measured ones,
// each one operation), which `progress` shows and is stopped before the results print.
int RunTrainWorker(const Scenario& scenario, Client& client, const TrainerSettings& settings,
                   const std::string& json_path, bool quiet,
                   const std::vector<std::string>& command, ProgressReporter& progress);

}  // namespace psbench

#endif  // PSBENCH_WORKER_TRAIN_WORKER_H_
