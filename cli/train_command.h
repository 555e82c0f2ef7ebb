#ifndef PSBENCH_CLI_TRAIN_COMMAND_H_
#define PSBENCH_CLI_TRAIN_COMMAND_H_

#include <string>

namespace psbench {

// psbench train --model=NAME --batch=N [--forward-only]: times the embedded trainer on this
// machine (no PS) and prints images/s and a per-layer table; appends the JSON to --json.
// Returns the exit status.
int RunTrainCommand(int argc, char** argv);

}  // namespace psbench

#endif  // PSBENCH_CLI_TRAIN_COMMAND_H_
