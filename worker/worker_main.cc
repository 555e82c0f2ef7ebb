// psbench-worker: connects to one or more PS, runs a benchmark, prints the table and appends
// one JSON record per result.
#include <filesystem>
#include <memory>
#include <optional>
#include <set>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "bench/process/alloc_policy.h"
#include "bench/process/mutex_policy.h"
#include "bench/cli.h"
#include "bench/flag_scope.h"
#include "bench/hdr_text.h"
#include "bench/report.h"
#include "bench/progress.h"
#include "bench/runner.h"
#include "bench/scenario_flags.h"
#include "bench/sysinfo.h"
#include "inputs/address.h"
#include "inputs/input_file.h"
#include "payloads/payload.h"
#include "payloads/size.h"
#include "transports/limit_flags.h"
#include "transports/rdma_flags.h"
#include "transports/transport_flags.h"
#include "transports/tls_flags.h"
#include "transports/transport.h"
#include "worker/trainer_flags.h"
#include "worker/updates_worker.h"
#ifdef PSBENCH_HAVE_TRAINER
#include "worker/train_worker.h"
#endif

ABSL_FLAG(std::string, ps, "",
          "PS addresses, host:port[,host:port...] (grpc+mpi: default every PS rank of the job)");
ABSL_FLAG(int, num_workers, 1, "workers in this run (throughput: all start together)");
ABSL_FLAG(int, worker_index, 0, "this worker's index in [0, --num-workers)");
ABSL_FLAG(std::string, run_id, "run", "names this run's start barrier on PS 0");
ABSL_FLAG(std::string, scenario, "", "read the scenario from this JSON file instead of flags");
ABSL_FLAG(std::string, scenario_base64, "",
          "the scenario as its JSON in base64url, instead of flags (how psbench's launchers "
          "hand every worker of a run the same resolved scenario, on any node)");
ABSL_FLAG(std::string, cpu, "", "pin the worker process to these CPUs (e.g. 1 or 0-3)");
ABSL_FLAG(std::string, json, "",
          "append one JSON record per result to this file, or to stdout for - (the table then "
          "goes to stderr) (grpc+mpi: %w in it becomes the worker's index, for one file per "
          "worker)");
ABSL_FLAG(bool, exit_on_stdin_close, false,
          "exit when stdin reaches its end (remote launchers keep it open: over ssh the "
          "process ends with its session)");
ABSL_FLAG(bool, quiet, false, "print no table (errors still go to stderr)");
ABSL_FLAG(std::string, progress_file, "",
          "write live progress to this file a few times a second, or to stdout for - as "
          "\"#progress {...}\" lines (for psbench's status line)");

namespace psbench {
namespace {

constexpr char kProgram[] = "psbench-worker";
constexpr uint64_t kMaxInFlightBytes = uint64_t{8} << 30;
constexpr char kUsage[] =
    "psbench-worker --ps=HOST:PORT[,...] --benchmark=latency|bandwidth|throughput|updates [flags]\n"
    "Sends payloads to psbench-ps processes and measures latency, bandwidth or PS throughput.\n"
    "--benchmark=updates (--steps=N, --sync or --async, --num-workers, --worker-index) checks\n"
    "that the PS lost no update: exact parameters after every worker's integer gradients.\n"
    "With --transport=grpc+mpi it runs as a rank of one mpirun with the PS:\n"
    "  mpirun -np 1 psbench-ps --transport=grpc+mpi : -np 1 psbench-worker --transport=grpc+mpi ...";

absl::StatusOr<Scenario> LoadScenario() {
  const std::string path = absl::GetFlag(FLAGS_scenario);
  const std::string inline_text = absl::GetFlag(FLAGS_scenario_base64);
  if (path.empty() && inline_text.empty()) {
    auto s = ScenarioFromFlags();
    if (!s.ok()) return s.status();
    s->ps = absl::StrSplit(absl::GetFlag(FLAGS_ps), ',', absl::SkipEmpty());
    s->num_workers = absl::GetFlag(FLAGS_num_workers);
    s->worker_index = absl::GetFlag(FLAGS_worker_index);
    s->run_id = absl::GetFlag(FLAGS_run_id);
    return s;
  }
  const std::string given = path.empty() ? "--scenario-base64" : "--scenario=FILE";
  if (!path.empty() && !inline_text.empty()) {
    return absl::InvalidArgumentError("give --scenario or --scenario-base64, not both");
  }
  for (const auto& flag : FlagsSet()) {
    static const std::set<std::string> kAllowed = {
        "scenario", "scenario-base64", "cpu", "json", "hdr-out", "quiet", "progress-file",
        "exit-on-stdin-close", "fatal-line",
        // Which worker of the run this is: the one thing that differs between them.
        "worker-index",
        // Credentials are this process's, not the scenario's.
        "tls-cert", "tls-key", "tls-ca", "tls-server-name",
        // The cap on reading the scenario file itself (and, given, its trace).
        "max-input-size"};
    // The trainer's settings (every flag trainer_flags.cc defines) are not part of a payload
    // scenario.
    std::string absl_name = absl::StrReplaceAll(flag, {{"-", "_"}});
    const absl::CommandLineFlag* defined = absl::FindCommandLineFlag(absl_name);
    const bool trainer = defined != nullptr && absl::EndsWith(defined->Filename(), kTrainerFlagsFile);
    if (!trainer && !kAllowed.contains(flag)) {
      return absl::InvalidArgumentError(
          absl::StrCat(given, " sets the whole scenario; --", flag, " cannot be added to it"));
    }
  }
  std::string text;
  if (!path.empty()) {
    absl::StatusOr<std::string> file = ReadInputFile(path, "--scenario", MaxInputSize());
    if (!file.ok()) return absl::InvalidArgumentError(file.status().message());
    text = *std::move(file);
  } else if (!absl::WebSafeBase64Unescape(inline_text, &text)) {
    return absl::InvalidArgumentError("--scenario-base64: not base64url");
  }
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(
        path.empty() ? std::string("--scenario-base64: not valid JSON")
                     : absl::StrCat("--scenario=", path, ": not valid JSON"));
  }
  auto s = ScenarioFromJson(j);
  if (s.ok() && FlagWasSet("worker-index")) s->worker_index = absl::GetFlag(FLAGS_worker_index);
  if (s.ok() && FlagWasSet("max-input-size")) s->max_input_size = MaxInputSize();
  return s;
}

// A point-to-point benchmark is one worker against one PS: more would wait at barriers for
// peers no such run has. `workers` says where the count came from.
absl::Status CheckPointToPoint(const Scenario& s, bool training, int num_workers, const std::string& workers) {
  if (training || EveryWorkerToEveryPs(s.benchmark) || num_workers == 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--benchmark=", BenchmarkName(s.benchmark), " is point to point, but ",
                                                 workers, "; launch one (or use --benchmark=throughput)"));
}

// A PS of another build (hosts installed apart, a stale --remote-bin-dir) answers the same
// protocol, but its figures and this worker's need not compare: said on stderr, not fatal,
// since a PS of another implementation (docs/protocol.md) is welcome. Records keep both.
void WarnOfOtherBuilds(Client& client, int worker_index) {
  const std::string mine = PsbenchVersion();
  for (size_t i = 0; i < client.num_servers(); ++i) {
    auto info = client.GetInfo(i);
    if (!info.ok() || info->version == mine) continue;  // a lost PS fails the run where it is used
    const std::string theirs = info->version.empty() ? "no version it names" : "version " + info->version;
    std::fprintf(stderr, "psbench-worker %d: warning: PS %s runs %s, this worker psbench %s\n", worker_index,
                 client.server_address(i).c_str(), theirs.c_str(), mine.c_str());
  }
}

int Main(int argc, char** argv) {
  auto positional = ParseFlagsOrExit(argc, argv, kUsage, {"/worker/worker_main.cc", "/bench/scenario_flags.cc", kTransportFlagsFile, kRdmaFlagsFile, kTrainerFlagsFile, kTlsFlagsFile, kFatalLineFlag});
  if (!positional.empty()) Die(kProgram, "unexpected argument '" + positional[0] + "'", kExitUsage);
  if (absl::GetFlag(FLAGS_exit_on_stdin_close)) ExitWhenStdinCloses();
  // --trainer: train a model through the PS instead of running a payload benchmark.
  std::optional<TrainerSettings> training;
  if (FlagWasSet("trainer")) {
#ifndef PSBENCH_HAVE_TRAINER
    Die(kProgram, "--trainer: this psbench was built without the trainer (oneDNN not found; "
                  "see deploy/install-deps.sh)", kExitUsage);
#endif
    auto settings = TrainerSettingsFromFlags();
    if (!settings.ok()) Die(kProgram, settings.status(), kExitUsage);
    training = *settings;
  }
  if (std::string cpu = absl::GetFlag(FLAGS_cpu); !cpu.empty()) {
    if (absl::Status s = PinProcess(cpu); !s.ok()) Die(kProgram, s, kExitUsage);
  }
  auto scenario = LoadScenario();
  if (!scenario.ok()) Die(kProgram, scenario.status(), kExitUsage);
  if (absl::Status s = ValidateScenario(*scenario); !s.ok()) Die(kProgram, s, kExitUsage);
  if (absl::Status s = CheckPointToPoint(*scenario, training.has_value(), scenario->num_workers,
                                         absl::StrCat("--num-workers=", scenario->num_workers));
      !s.ok()) {
    Die(kProgram, s, kExitUsage);
  }
  // It names the run's barriers on the PS, which holds names of at most 1 KiB.
  if (scenario->run_id.empty() || scenario->run_id.size() > 256) {
    Die(kProgram,
        absl::InvalidArgumentError(absl::StrCat("--run-id must be 1 to 256 bytes (got ", scenario->run_id.size(), ")")),
        kExitUsage);
  }
  if (absl::Status s = CheckFlagsApply(ShapeOf(*scenario, training.has_value())); !s.ok()) {
    Die(kProgram, s, kExitUsage);
  }
  if (scenario->benchmark == Benchmark::kUpdates) {  // its flags, checked before connecting
    auto u = UpdatesSettingsFromFlags(scenario->num_workers);
    if (!u.ok()) Die(kProgram, u.status(), kExitUsage);
    if (u->timed) {
      auto plans = scenario->Plans();
      if (!plans.ok()) Die(kProgram, plans.status(), kExitUsage);
      if (absl::Status s = CheckReplay(*u, plans->front()); !s.ok()) Die(kProgram, s, kExitUsage);
    }
  }
  const bool job = TransportLaunchesAsJob(scenario->transport);
  if (scenario->ps.empty() && !job) {
    Die(kProgram, "--ps is required (host:port of each PS)", kExitUsage);
  }
  // Names resolve now: a typo fails at once, not after --connect-timeout.
  if (absl::Status s = CheckPsListResolves(scenario->ps, "--ps"); !s.ok()) Die(kProgram, s, kExitUsage);
  auto plans = scenario->Plans();
  if (!plans.ok()) Die(kProgram, plans.status(), kExitUsage);
  // A PS holds every outstanding payload it has received: keep that within reason.
  const bool windowed = scenario->benchmark == Benchmark::kBandwidth;
  const bool outstanding = scenario->benchmark == Benchmark::kThroughput;
  const bool open_loop = scenario->load.open() || scenario->load_sweep.has_value();
  const uint64_t depth = open_loop  ? scenario->max_in_flight
                         : windowed ? scenario->window
                         : outstanding ? scenario->outstanding : 1;
  for (const auto& plan : *plans) {
    for (size_t i = 0; i < plan.payloads.size(); ++i) {
      if (depth * plan.Bytes(i) > kMaxInFlightBytes) {
        Die(kProgram,
            absl::StrCat("a ", FormatSize(plan.Bytes(i)), " payload with ", depth,
                         " outstanding would keep over 8 GiB in flight per PS; ",
                         open_loop  ? "lower --max-in-flight"
                         : windowed ? "lower --window"
                         : outstanding ? "lower --outstanding" : "send smaller payloads"),
            kExitUsage);
      }
    }
  }

  std::string json_path = absl::GetFlag(FLAGS_json);
  // Fail before connecting and measuring, not after.
  // The trace may come from a scenario file, which no --trace flag names.
  std::string hdr_out = HdrOutFlag();
  // A scenario file's load has not been through the flag checks.
  if (!hdr_out.empty() && !open_loop) {
    Die(kProgram, "--hdr-out applies to an open-loop load only (the scenario's load is closed)", kExitUsage);
  }
  auto check_json_path = [&json_path, &scenario, &hdr_out, &training] {
    CheckOutputsOrDie(kProgram, json_path, {{"--trace", scenario->payload.trace_path}}, hdr_out);
    if (absl::Status s = hdr_out.empty() ? absl::OkStatus() : CheckHdrOut(hdr_out); !s.ok()) Die(kProgram, s, kExitUsage);
    // Worker 0 writes the trace, after training; the progress file is written as the run goes,
    // where a failed write would go unsaid.
    if (training && !training->write_trace.empty() && scenario->worker_index == 0) {
      if (absl::Status s = CheckOutputWritable("--write-trace", training->write_trace); !s.ok()) Die(kProgram, s, kExitUsage);
    }
    // It is written beside (FILE.tmp) and renamed over: the directory must take both.
    if (const std::string progress = absl::GetFlag(FLAGS_progress_file); !progress.empty() && progress != "-") {
      // Renamed over, a FIFO or a device (as root, /dev/null) would become a regular file.
      std::error_code ec;
      if (const auto st = std::filesystem::status(progress, ec);
          std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
        Die(kProgram,
            absl::StrCat("--progress-file=", progress,
                         std::filesystem::is_directory(st)
                             ? ": is a directory"
                             : ": is not a regular file (the progress is written beside it and renamed over it; "
                               "give a file, or - for stdout)"),
            kExitUsage);
      }
      if (absl::Status s = CheckOutputWritable("--progress-file", progress + ".tmp"); !s.ok()) {
        Die(kProgram, absl::StrCat(s.message(), " (written there, then renamed over ", progress, ")"), kExitUsage);
      }
    }
  };
  if (!job) check_json_path();

  // Payloads are declared before the client so they outlive it (the transport may
  // reference their memory until it is destroyed).
  std::vector<std::unique_ptr<Payload>> payloads;
  ClientOptions options;
  options.servers = scenario->ps;
  options.mode = scenario->mode;
  options.validate = scenario->validate;
  options.connect_timeout = scenario->connect_timeout;
  options.rpc_timeout = scenario->rpc_timeout;
  options.busy_poll = scenario->busy_poll;
  options.grpc_tx_zerocopy = scenario->grpc_tx_zerocopy;
  options.grpc_api = scenario->grpc_api;
  options.rdma = scenario->rdma;
  auto tls = TlsOptionsFromFlags(TlsSide::kClient);
  if (!tls.ok()) Die(kProgram, tls.status(), kExitUsage);
  options.tls = *tls;
  scenario->tls = tls->enabled();
  auto client = MakeClient(scenario->transport, options);
  if (!client.ok()) Die(kProgram, client.status(), kExitUsage);
  if (absl::Status s = (*client)->Connect(); !s.ok()) {
    // An unreachable PS is taken for a wrong --ps, and settings the PS or the device refuse
    // are bad input. A PS that answered and then stopped or went away, refused this worker's
    // credentials or had no room for it is a runtime failure.
    Die(kProgram, s, ConnectFailureIsUsage(s.code()) ? kExitUsage : kExitRuntime);
  }
  if (auto placement = (*client)->Placement()) {
    // Launched as one job: the job says how many workers there are and which one this is.
    const bool whole_scenario = !absl::GetFlag(FLAGS_scenario).empty() || !absl::GetFlag(FLAGS_scenario_base64).empty();
    if ((FlagWasSet("num-workers") || whole_scenario) &&
        scenario->num_workers != placement->num_workers) {
      Die(kProgram,
          absl::StrCat("--num-workers=", scenario->num_workers, " but the ",
                       scenario->transport, " job has ", placement->num_workers, " worker ranks"),
          kExitUsage);
    }
    if ((FlagWasSet("worker-index") || whole_scenario) &&
        scenario->worker_index != placement->worker_index) {
      Die(kProgram,
          absl::StrCat("--worker-index=", scenario->worker_index, " but this is worker ",
                       placement->worker_index, " of the ", scenario->transport, " job"),
          kExitUsage);
    }
    if (absl::Status s = CheckPointToPoint(
            *scenario, training.has_value(), placement->num_workers,
            absl::StrCat("this ", scenario->transport, " job has ", placement->num_workers, " worker ranks"));
        !s.ok()) {
      Die(kProgram, s, kExitUsage);
    }
    scenario->num_workers = placement->num_workers;
    scenario->worker_index = placement->worker_index;
    if (scenario->ps.empty()) {
      for (size_t i = 0; i < (*client)->num_servers(); ++i) {
        scenario->ps.push_back((*client)->server_address(i));
      }
    }
    if (absl::Status s = ValidateScenario(*scenario); !s.ok()) {
      Die(kProgram, absl::StrCat("in this ", scenario->transport, " job: ", s.message()), kExitUsage);
    }
    // Every worker of the job has this same command line: %w tells their files apart. Its
    // index is known only now.
    absl::StrReplaceAll({{"%w", absl::StrCat(scenario->worker_index)}}, &json_path);
    absl::StrReplaceAll({{"%w", absl::StrCat(scenario->worker_index)}}, &hdr_out);
    check_json_path();
  }

  WarnOfOtherBuilds(**client, scenario->worker_index);

  std::vector<std::string> command(argv, argv + argc);
  if (scenario->benchmark == Benchmark::kUpdates) {
    if (training) Die(kProgram, "--trainer and --benchmark=updates exclude each other", kExitUsage);
    auto settings = UpdatesSettingsFromFlags(scenario->num_workers);
    if (!settings.ok()) Die(kProgram, settings.status(), kExitUsage);
    return RunUpdatesWorker(*scenario, **client, *settings, json_path, absl::GetFlag(FLAGS_quiet),
                            command);
  }
#ifdef PSBENCH_HAVE_TRAINER
  if (training) {
    // The status line and psbench run's progress count training steps: the warm-up ones,
    // then the measured ones.
    Scenario steps = *scenario;
    steps.warmup_iterations = training->warmup_steps;
    steps.iterations = training->steps;
    ProgressReporter progress(steps, 1, 1, absl::GetFlag(FLAGS_progress_file), !absl::GetFlag(FLAGS_quiet));
    return RunTrainWorker(*scenario, **client, *training, json_path, absl::GetFlag(FLAGS_quiet),
                          command, progress);
  }
#endif
  // The benchmarks send each payload whole to a PS: one it would refuse is bad input, found
  // now rather than as a failed call.
  for (size_t i = 0; i < (*client)->num_servers(); ++i) {
    const size_t num_ps = (*client)->num_servers();
    if (absl::Status s = CheckPayloadsFitMessages(
            *plans, (*client)->max_message_bytes(i), absl::StrCat("PS ", (*client)->server_address(i), "'s"),
            PlacesOverPs(*scenario, num_ps) ? num_ps : 0,
            [&](const std::vector<uint64_t>& sizes) {
              return LimitedRequestBytes(scenario->transport, scenario->mode, scenario->validate, sizes);
            });
        !s.ok()) {
      Die(kProgram, s, kExitUsage);
    }
  }
  TablePrinter table(json_path == "-" ? stderr : stdout);
  // A status line on a terminal (unless --quiet), and the progress psbench run shows.
  // Each plan at each load (one, or a sweep's rates): a measurement and a record each.
  const std::vector<LoadSchedule> loads = LoadPoints(*scenario);
  ProgressReporter progress(*scenario, plans->size() * loads.size(),
                            scenario->benchmark == Benchmark::kThroughput ? (*client)->num_servers() : 1,
                            absl::GetFlag(FLAGS_progress_file), !absl::GetFlag(FLAGS_quiet));
  std::vector<Record> records;  // for --hdr-out
  auto write_hdr = [&hdr_out, &records, &json_path]() -> absl::Status {
    if (hdr_out.empty()) return absl::OkStatus();
    auto written = WriteHdrFiles(hdr_out, records);
    if (!written.ok()) return written.status();
    if (!absl::GetFlag(FLAGS_quiet)) {
      for (const std::string& line : *written) {
        std::fprintf(json_path == "-" ? stderr : stdout, "# wrote %s\n", line.c_str());
      }
    }
    return absl::OkStatus();
  };
  for (size_t p = 0; p < plans->size(); ++p) {
    const PayloadPlan& plan = (*plans)[p];
    auto set = RegisterPayloads(*scenario, **client, plan, &payloads);
    if (!set.ok()) Die(kProgram, set.status(), ExitCodeFor(set.status()));
    for (size_t k = 0; k < loads.size(); ++k) {
      // Each record's config is the one measurement it holds (a scenario a worker can run);
      // the sweep it belongs to is in its "load".
      Scenario point = *scenario;
      point.load = loads[k];
      point.load_sweep.reset();
      auto m = RunBenchmark(point, **client, *set, p * loads.size() + k);
      if (!m.ok()) {
        std::string what = m.status().code() != absl::StatusCode::kDataLoss ? "benchmark failed: "
                           : scenario->validate                                ? "validation failed: "
                                                                               : "data lost: ";
        progress.Stop();
        Die(kProgram, absl::StrCat(what, m.status().message()), kExitRuntime);
      }
      if (m->ops == 0) {  // the loops send at least one operation: a record of none is no figure
        progress.Stop();
        Die(kProgram, "benchmark failed: the measurement completed no operation", kExitRuntime);
      }
      auto hold = progress.Hold();  // no status line while this plan's results print
      Record record = MakeRecord(point, plan, *m);
      if (scenario->load_sweep) record.extra["load"]["sweep"] = LoadSweepName(*scenario->load_sweep);
      record.command = command;
      for (size_t i = 0; i < set->shards.size(); ++i) {
        record.shards.push_back({{"ps", (*client)->server_address(i)},
                                 {"tensors", set->shards[i].tensors.size()},
                                 {"bytes", set->shards[i].bytes}});
      }
      if (!set->shards.empty() && m->ops > 0) {  // placed: an operation carries one PS's part
        record.payload_bytes = static_cast<double>(m->bytes) / static_cast<double>(m->ops);
        record.payload_bytes_exact = false;
      }
      if (uint64_t lost = record.peers_lost.value_or(0); lost > 0) {
        // This worker's figures are its own and complete; the run it is part of lost workers.
        std::fprintf(stderr,
                     "%s: warning: %llu other worker%s left the PS during the measurement "
                     "without a goodbye (killed, crashed, failed or cut off): \"peers_lost\": "
                     "%llu in the record\n",
                     kProgram, static_cast<unsigned long long>(lost), lost == 1 ? "" : "s",
                     static_cast<unsigned long long>(lost));
      }
      if (!absl::GetFlag(FLAGS_quiet)) table.Print(record);
      if (!hdr_out.empty()) records.push_back(record);
      if (!json_path.empty()) {
        if (absl::Status s = AppendJsonLines(json_path, {record}); !s.ok()) {
          // What was measured, where the records could not go; the first failure said first.
          const absl::Status hdr = write_hdr();
          Die(kProgram, hdr.ok() ? std::string(s.message()) : absl::StrCat(s.message(), "; and ", hdr.message()),
              kExitRuntime);
        }
      }
      // The data plane's own count must be the benchmark's (the record written keeps both).
      if (std::string why = MovedDisagreement(record.extra["moved"]); !why.empty()) {
        hold.unlock();  // Stop clears the status line under the same lock
        progress.Stop();
        Die(kProgram, absl::StrCat("payload bytes not where the record says: ", why), kExitRuntime);
      }
    }
    // Nothing is in flight after a measurement: free this plan's payloads (a sweep to 1 GiB
    // would otherwise hold every size at once).
    for (int id : set->all_ids()) (*client)->Unregister(id);
    payloads.clear();
  }
  if (absl::Status s = write_hdr(); !s.ok()) Die(kProgram, s, kExitRuntime);
  return 0;
}

}  // namespace
}  // namespace psbench

int main(int argc, char** argv) {
  psbench::FixAllocatorPolicy();  // before any thread starts
  psbench::TurnOffMutexDeadlockDetection();
  return psbench::Main(argc, argv);
}
