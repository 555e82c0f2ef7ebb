// Flags of the embedded trainer, shared by `psbench run --trainer` and psbench-worker (which
// is what `psbench run` hands them to); `psbench train` takes the ones that time a model. Defined whether or not the
// trainer is built, so a build without oneDNN refuses them with a clear message.
#ifndef PSBENCH_WORKER_TRAINER_FLAGS_H_
#define PSBENCH_WORKER_TRAINER_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"

ABSL_DECLARE_FLAG(std::string, trainer);
ABSL_DECLARE_FLAG(int, batch);
ABSL_DECLARE_FLAG(std::string, engine);
ABSL_DECLARE_FLAG(std::string, math);
ABSL_DECLARE_FLAG(std::string, layout);
ABSL_DECLARE_FLAG(int, threads);
ABSL_DECLARE_FLAG(int, steps);
ABSL_DECLARE_FLAG(int, warmup_steps);
ABSL_DECLARE_FLAG(bool, sync);
ABSL_DECLARE_FLAG(bool, async);
ABSL_DECLARE_FLAG(std::string, replay);
ABSL_DECLARE_FLAG(float, learning_rate);
ABSL_DECLARE_FLAG(float, momentum);
ABSL_DECLARE_FLAG(std::string, write_trace);

namespace psbench {

inline constexpr char kTrainerFlagsFile[] = "/worker/trainer_flags.cc";

// The trainer settings every process of a training run agrees on.
struct TrainerSettings {
  std::string model;
  int batch = 16;
  std::string engine = "cpu";
  std::string math = "fp32";  // fp32, tf32 or bf16 (trainer::ParseMath)
  std::string layout = "auto";  // the GPU engine's: auto, nchw or nhwc (trainer::ParseLayout)
  int threads = 0;
  int steps = 10;
  int warmup_steps = 2;
  bool sync = true;
  float learning_rate = 0.01f;
  float momentum = 0.9f;
  std::string write_trace;
};

// Reads and checks the flags; the model is --trainer's, or `model` (psbench train's --model).
absl::StatusOr<TrainerSettings> TrainerSettingsFromFlags(std::optional<std::string> model = std::nullopt);
// The worker command-line flags that reproduce `settings`.
std::vector<std::string> TrainerWorkerArgs(const TrainerSettings& settings);

}  // namespace psbench

#endif  // PSBENCH_WORKER_TRAINER_FLAGS_H_
