#include "worker/trainer_flags.h"

#include <cmath>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "bench/cli.h"
#include "worker/trainer/numerics.h"

ABSL_FLAG(std::string, trainer, "",
          "train this model through the PS instead of sending payloads: alexnet, overfeat, "
          "vgg11, vgg16, inception3, resnet50 (or tiny, a CIFAR-sized net for quick checks)");
ABSL_FLAG(int, batch, 16, "trainer: images per step per worker");
ABSL_FLAG(std::string, engine, "cpu", "trainer: compute engine, cpu (oneDNN) or gpu (cuDNN)");
ABSL_FLAG(std::string, math, "fp32",
          "trainer: arithmetic of the GPU engine: fp32 (FP32 FMA everywhere) or tf32 (TF32 tensor "
          "cores for convolutions and matrix products, FP32 storage); bf16 is refused (the engine "
          "has no bf16 tensors yet); the CPU engine computes in fp32");
ABSL_FLAG(std::string, layout, "auto",
          "trainer: the GPU engine's layout of activations and convolution filters on the device: "
          "nchw, nhwc (channels last, what tensor cores read without transposing) or auto (nhwc "
          "for tf32, nchw for fp32); host buffers and what goes to the PS are the same either way");
ABSL_FLAG(int, threads, 0, "trainer: compute threads (0: all cores)");
ABSL_FLAG(int, steps, 10, "trainer: measured steps (psbench train: iterations of each pass)");
ABSL_FLAG(int, warmup_steps, 2, "trainer: steps run before measuring");
ABSL_FLAG(bool, sync, true,
          "trainer: synchronous SGD; the PS averages every worker's gradients of a step before "
          "anyone gets parameters back");
ABSL_FLAG(bool, async, false, "trainer: asynchronous SGD; the PS applies each worker's gradients at once");
ABSL_FLAG(std::string, replay, "back-to-back",
          "updates over a captured trace (psbench-trace/2): timed replays each step as it ran, "
          "each gradient bucket sent the moment it became ready and the recorded compute waited "
          "out, and reports the exposed communication; back-to-back sends each step whole");
ABSL_FLAG(float, learning_rate, 0.01f, "trainer: SGD learning rate");
ABSL_FLAG(float, momentum, 0.9f, "trainer: SGD momentum");
ABSL_FLAG(std::string, write_trace, "",
          "trainer: write one step's gradients (name, bytes, when each became ready in the "
          "backward pass) to this file, for --scheme=trace (in a training run, worker 0 writes it)");

namespace psbench {

absl::StatusOr<TrainerSettings> TrainerSettingsFromFlags(std::optional<std::string> model) {
  TrainerSettings s;
  const bool model_flag = model.has_value();
  s.model = model_flag ? *model : absl::GetFlag(FLAGS_trainer);
  s.batch = absl::GetFlag(FLAGS_batch);
  s.engine = absl::GetFlag(FLAGS_engine);
  s.math = absl::GetFlag(FLAGS_math);
  s.layout = absl::GetFlag(FLAGS_layout);
  s.threads = absl::GetFlag(FLAGS_threads);
  s.steps = absl::GetFlag(FLAGS_steps);
  s.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
  s.learning_rate = absl::GetFlag(FLAGS_learning_rate);
  s.momentum = absl::GetFlag(FLAGS_momentum);
  s.write_trace = absl::GetFlag(FLAGS_write_trace);
  const bool async = absl::GetFlag(FLAGS_async);
  if (async && FlagWasSet("sync") && absl::GetFlag(FLAGS_sync))
    return absl::InvalidArgumentError("--sync and --async exclude each other");
  s.sync = !async && absl::GetFlag(FLAGS_sync);
  if (s.model.empty())
    return absl::InvalidArgumentError(model_flag ? "--model is required (e.g. --model=vgg11)"
                                                 : "--trainer needs a model name (e.g. --trainer=vgg11)");
  absl::StatusOr<trainer::Math> math = trainer::ParseMath(s.math);
  if (!math.ok()) return math.status();
  absl::StatusOr<trainer::Layout> layout = trainer::ParseLayout(s.layout);
  if (!layout.ok()) return layout.status();
  if (absl::Status st = trainer::CheckEngineTakes(s.engine, *math, *layout); !st.ok()) return st;
  if (s.batch < 1 || s.batch > 4096) return absl::InvalidArgumentError("--batch must be in [1, 4096]");
  if (s.threads < 0 || s.threads > 1024) return absl::InvalidArgumentError("--threads must be in [0, 1024]");
  if (s.steps < 1 || s.steps > 1000000) return absl::InvalidArgumentError("--steps must be in [1, 1000000]");
  if (s.warmup_steps < 0 || s.warmup_steps > 1000000)
    return absl::InvalidArgumentError("--warmup-steps must be in [0, 1000000]");
  if (!std::isfinite(s.learning_rate) || s.learning_rate <= 0)
    return absl::InvalidArgumentError("--learning-rate must be a positive number");
  if (!std::isfinite(s.momentum) || s.momentum < 0 || s.momentum >= 1)
    return absl::InvalidArgumentError("--momentum must be in [0, 1)");
  return s;
}

std::vector<std::string> TrainerWorkerArgs(const TrainerSettings& s) {
  std::vector<std::string> args = {
      absl::StrCat("--trainer=", s.model),        absl::StrCat("--batch=", s.batch),
      absl::StrCat("--engine=", s.engine),        absl::StrCat("--math=", s.math),
      absl::StrCat("--layout=", s.layout),
      absl::StrCat("--threads=", s.threads),
      absl::StrCat("--steps=", s.steps),          absl::StrCat("--warmup-steps=", s.warmup_steps),
      s.sync ? "--sync" : "--async",              absl::StrCat("--learning-rate=", s.learning_rate),
      absl::StrCat("--momentum=", s.momentum)};
  if (!s.write_trace.empty()) args.push_back(absl::StrCat("--write-trace=", s.write_trace));
  return args;
}

}  // namespace psbench
