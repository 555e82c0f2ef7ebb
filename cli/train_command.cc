#include "cli/train_command.h"

#include <cmath>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "bench/cli.h"
#include "bench/report.h"
#include "bench/scenario_flags.h"
#include "bench/sysinfo.h"
#include "cli/launch_flags.h"
#include "fmt/core.h"
#include "worker/trainer_flags.h"
#ifdef PSBENCH_HAVE_TRAINER
#include "worker/trainer/timing.h"
#endif

ABSL_DECLARE_FLAG(uint64_t, seed);

// The flags only `psbench train` has; it also takes the trainer's and --seed, --json.
ABSL_FLAG(std::string, model, "", "the model to time: alexnet, overfeat, vgg11, vgg16, inception3, "
          "resnet50 or tiny");
ABSL_FLAG(bool, forward_only, false, "time the forward pass only");
ABSL_FLAG(double, peak_gflops, 0, "the CPU's peak FP32 GFLOP/s (0: estimate)");

namespace psbench {

int RunTrainCommand(int argc, char** argv) {
  constexpr char kProgram[] = "psbench train";
  constexpr char kUsage[] =
      "psbench train --model=MODEL [--batch=N] [--engine=cpu|gpu] [--math=fp32|tf32] [--layout=auto|nchw|nhwc] [--forward-only] [flags]\n"
      "Times one model of the embedded trainer on this machine (no PS): images/s and a\n"
      "per-layer table; --json=FILE appends the record.";
  // Exactly the flags that change what is timed or where it is written.
  auto positional = ParseFlagsOrExit(
      argc, argv, kUsage,
      {"/cli/train_command.cc",
       absl::StrCat(kTrainerFlagsFile, ":batch,engine,math,layout,threads,steps,warmup_steps,write_trace"),
       "/bench/scenario_flags.cc:seed", absl::StrCat(kLaunchFlagsFile, ":json")});
  if (positional.size() > 1) Die(kProgram, "unexpected argument '" + positional[1] + "'", kExitUsage);
  const std::string json_path = JsonFlag();
#ifndef PSBENCH_HAVE_TRAINER
  Die(kProgram, "this psbench was built without the trainer (oneDNN not found; see "
                "deploy/install-deps.sh)", kExitUsage);
  return kExitUsage;
#else
  auto settings = TrainerSettingsFromFlags(absl::GetFlag(FLAGS_model));
  if (!settings.ok()) Die(kProgram, settings.status(), kExitUsage);
  CheckOutputsOrDie(kProgram, json_path);
  KeepStdoutForRecords(kProgram, json_path);
  trainer::TimingOptions options;
  options.model = settings->model;
  options.engine = settings->engine;
  options.math = settings->math;
  options.layout = settings->layout;
  options.batch = settings->batch;
  options.threads = settings->threads;
  options.warmup = settings->warmup_steps;
  options.iterations = settings->steps;
  options.forward_only = absl::GetFlag(FLAGS_forward_only);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.peak_gflops = absl::GetFlag(FLAGS_peak_gflops);
  options.trace_path = settings->write_trace;
  // A peak near 0 made the fraction of it infinite: printed "inf %", a record no report reads.
  if (!(options.peak_gflops == 0 || (options.peak_gflops >= 0.001 && options.peak_gflops <= 1e9))) {
    Die(kProgram, absl::StrCat("--peak-gflops=", options.peak_gflops, " must be 0 (estimate) or in [0.001, 1e9] GFLOP/s"),
        kExitUsage);
  }
  absl::Status trace_failure;
  auto result = trainer::RunTiming(options, &trace_failure);
  if (!result.ok()) {
    Die(kProgram, result.status(),
        result.status().code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitRuntime);
  }
  fmt::print("{}", trainer::FormatTiming(*result));
  (*result)["environment"] = Environment();
  auto record = RecordFromJson(*result);
  if (!record.ok()) Die(kProgram, absl::StrCat("train_timing record: ", record.status().message()), kExitRuntime);
  if (!json_path.empty()) {
    if (absl::Status s = AppendJsonLines(json_path, {*record}); !s.ok()) Die(kProgram, s, kExitRuntime);
  }
  if (!trace_failure.ok()) {
    // A path that names no file it can write is bad input (2), a full disk a failure (1).
    Die(kProgram, absl::StrCat(trace_failure.message(), json_path.empty() ? "" : " (the record is saved)"),
        trace_failure.code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitRuntime);
  }
  return 0;
#endif
}

}  // namespace psbench
