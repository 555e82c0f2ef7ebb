#ifndef PSBENCH_DEPLOY_LOCAL_TRAIN_COMMAND_H_
#define PSBENCH_DEPLOY_LOCAL_TRAIN_COMMAND_H_

#include <string>

namespace psbench {

// psbench train --model=NAME --batch=N [--forward-only]: times the embedded trainer on this
// machine (no PS) and prints images/s and a per-layer table; appends the JSON to json_path.
// Returns the exit status.
int RunTrainCommand(const std::string& json_path);

}  // namespace psbench

#endif  // PSBENCH_DEPLOY_LOCAL_TRAIN_COMMAND_H_
