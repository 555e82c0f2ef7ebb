// psbench run --trainer and --benchmark=updates, on any launcher: PS and workers as for
// throughput (every worker to every PS), then a table per worker and the records.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/cli.h"
#include "bench/run_status.h"
#include "bench/scenario_flags.h"
#include "bench/table.h"
#include "cli/launch/job.h"
#include "cli/launch/launch.h"
#include "cli/session.h"
#include "fmt/core.h"
#include "inputs/input_file.h"
#include "worker/timed_replay.h"
#include "worker/trainer_flags.h"
#include "worker/updates_worker.h"
#ifdef PSBENCH_HAVE_TRAINER
#include "absl/algorithm/container.h"
#include "worker/trainer/network.h"
#endif

namespace psbench {
namespace {
using nlohmann::json;

// Training and the updates check exchange parameters with the PS.
void RequireExchanges(const char* what, const std::string& transport) {
  if (TransportHas(transport, &TransportTraits::supports_exchange)) return;
  Die(kProgram, absl::StrCat(what, ": ", transport, " does not serve exchanges; use one of ",
                             TransportsWith(&TransportTraits::supports_exchange)),
      kExitUsage);
}
}  // namespace

int RunTraining(Session& session, Scenario s) {
  LaunchOptions& o = session.options;
  const std::vector<std::string>& command = o.command;
  auto settings = TrainerSettingsFromFlags();
  if (!settings.ok()) Die(kProgram, settings.status(), kExitUsage);
#ifdef PSBENCH_HAVE_TRAINER
  // Refuse a bad model or engine here, before any process starts.
  if (auto model = trainer::BuildModel(settings->model); !model.ok())
    Die(kProgram, absl::StrCat("--trainer: ", model.status().message()), kExitUsage);
  if (!absl::c_linear_search(trainer::EngineNames(), settings->engine)) {
    Die(kProgram, absl::StrCat("--engine=", settings->engine, " is not built in; this psbench has: ",
                               absl::StrJoin(trainer::EngineNames(), ", ")),
        kExitUsage);
  }
#else
  Die(kProgram, "--trainer: this psbench was built without the trainer (oneDNN not found; see "
                "deploy/install-deps.sh)", kExitUsage);
#endif
  RequireExchanges("--trainer", s.transport);
  // Worker 0 writes the trace where it runs: here for psbench run (a cluster's worker checks it).
  if (!settings->write_trace.empty() && session.name == "run") {
    if (absl::Status st = CheckOutputWritable("--write-trace", settings->write_trace); !st.ok()) Die(kProgram, st, kExitUsage);
  }
  s.benchmark = Benchmark::kThroughput;  // the topology: every worker to every PS
  if (absl::Status st = ValidateScenario(s); !st.ok()) Die(kProgram, st, kExitUsage);
  if (absl::Status st = CheckTransportsLaunch(session, {s.transport}); !st.ok()) Die(kProgram, st, kExitUsage);
  o.training = true;
  o.worker_args = TrainerWorkerArgs(*settings);
  session.Begin();
  fmt::print("# psbench training: {} batch {} per worker, {} workers x {} PS over {}, {} SGD, "
             "{} steps after {} warm-up, tls {}\n",
             settings->model, settings->batch, o.num_workers, o.num_ps,
             TransportWithMode(s.transport, s.mode), settings->sync ? "synchronous" : "asynchronous",
             settings->steps, settings->warmup_steps, s.tls ? "on" : "off");
  RunStatus::Get().SetSteps(absl::StrCat("training ", settings->model), settings->warmup_steps, settings->steps);
  std::vector<Record> kept;  // the records that stand if the run fails
  auto results = session.Run(s, 1, 0, &kept);
  if (!results.ok()) {
    if (!kept.empty()) SaveRecords(kProgram, session.json_path, kept);
    fmt::print(stderr, "{}: training: {}\n", kProgram, std::string(results.status().message()));
    return FailedRunExitCode(results.status());
  }
  double total = 0;
  StreamingTable table(stdout, {{"#worker", 8}, {"images/s", 12}, {"step ms", 12}, {"compute ms", 12},
                                {"comm ms", 12}, {"loss", 10}});
  table.PrintHeader();
  auto ms = [](const std::optional<StepStats>& st) { return st ? fmt::format("{:.1f}", 1e3 * st->mean_s) : "-"; };
  for (const Record& rec : *results) {
    total += rec.images_per_s.value_or(0);
    table.PrintRow({std::to_string(rec.worker_index.value_or(0)), fmt::format("{:.2f}", rec.images_per_s.value_or(0)),
                    ms(rec.step), ms(rec.compute), ms(rec.communication),
                    fmt::format("{:.3f}", rec.loss_last.value_or(0))});
  }
  Record summary;
  summary.kind = "train_total";
  summary.model = settings->model;
  summary.batch = settings->batch;
  summary.transport = s.transport;
  if (TransportHonoursMode(s.transport)) summary.mode = std::string(WireModeName(s.mode));
  summary.tls = s.tls;
  summary.sync = settings->sync;
  summary.num_ps = o.num_ps;
  summary.num_workers = o.num_workers;
  summary.images_per_s = total;
  summary.command = command;
  if (!o.label.empty()) summary.label = o.label;
  summary.cluster = results->front().cluster;
  table.PrintRow({"total", fmt::format("{:.2f}", total)});
  results->push_back(summary);
  return SaveRecords(kProgram, session.json_path, *results);
}

// The first timed record's tensors that took longest from their part's start to their
// parameters back (the record has every tensor).
void PrintSlowestTensors(const std::vector<Record>& records) {
  constexpr size_t kShown = 5;
  for (const Record& rec : records) {
    if (!rec.extra.contains("replay") || !rec.extra.at("replay").contains("per_tensor")) continue;
    const nlohmann::json& all = rec.extra.at("replay").at("per_tensor");
    std::vector<nlohmann::json> tensors(all.begin(), all.end());
    auto p50 = [](const nlohmann::json& t) { return t.at("latency_us").at("p50").get<double>(); };
    std::stable_sort(tensors.begin(), tensors.end(),
                     [&](const nlohmann::json& a, const nlohmann::json& b) { return p50(a) > p50(b); });
    if (tensors.size() > kShown) tensors.resize(kShown);
    fmt::print("# slowest tensors of worker {} (latency: its part's start to its parameters back; "
               "ready->back: from when its gradient was ready)\n",
               rec.worker_index.value_or(0));
    StreamingTable table(stdout, {{"#tensor", 28}, {"PS", 4}, {"bytes", 12}, {"p50 us", 12}, {"p99 us", 12},
                                  {"ready->back p50 us", 20}});
    table.PrintHeader();
    for (const nlohmann::json& t : tensors) {
      std::string name = t.at("name").get<std::string>();
      if (name.empty()) name = "-";
      table.PrintRow({name, std::to_string(t.at("ps").get<size_t>()), std::to_string(t.at("bytes").get<uint64_t>()),
                      fmt::format("{:.1f}", p50(t)), fmt::format("{:.1f}", t.at("latency_us").at("p99").get<double>()),
                      fmt::format("{:.1f}", t.at("ready_to_back_us").at("p50").get<double>())});
    }
    return;
  }
}

// --replay=timed: per worker, the replayed steps against their recorded compute, and the
// parts' round trips (worker/timed_replay.h). A summary this psbench cannot read (a worker of
// another version) is named, not fatal: the records are saved after this.
void PrintTimedReplays(const std::vector<Record>& records) {
  fmt::print("# timed replay, ms per step (median over steps); exposed = step - recorded compute\n");
  StreamingTable table(stdout, {{"#worker", 8}, {"buckets", 8}, {"parts", 6}, {"compute", 10}, {"step", 10},
                                {"exposed", 10}, {"part p50 us", 12}, {"part p99 us", 12}, {"late", 6}});
  table.PrintHeader();
  try {
    for (const Record& rec : records) {
      if (!rec.extra.contains("replay")) continue;
      const nlohmann::json& r = rec.extra.at("replay");
      if (!r.is_object() || r.value("mode", "") != "timed") continue;
      table.PrintRow({std::to_string(rec.worker_index.value_or(0)), std::to_string(r.at("buckets").get<size_t>()),
                      std::to_string(r.at("parts").get<size_t>()),
                      fmt::format("{:.3f}", r.at("median_compute_us").get<double>() / 1e3),
                      fmt::format("{:.3f}", r.at("median_step_us").get<double>() / 1e3),
                      fmt::format("{:.3f}", r.at("median_exposed_us").get<double>() / 1e3),
                      fmt::format("{:.1f}", r.at("part_latency_us").at("p50").get<double>()),
                      fmt::format("{:.1f}", r.at("part_latency_us").at("p99").get<double>()),
                      std::to_string(r.at("late_starts").get<uint64_t>())});
    }
    PrintSlowestTensors(records);
  } catch (const nlohmann::json::exception& e) {
    fmt::print("# (a worker's timed-replay summary is not one this psbench reads: {})\n", e.what());
  }
}

namespace {

// One line per worker: what it checked and found, and what each PS had applied.
void PrintUpdates(const std::vector<Record>& results) {
  StreamingTable table(stdout, {{"#worker", 8}, {"steps", 8}, {"seconds", 10}, {"steps/s", 10}, {"MB/s", 10},
                                {"elements", 12}, {"result", 8}, {"updates each PS had applied when read", 0}});
  table.PrintHeader();
  for (const Record& rec : results) {
    table.PrintRow({std::to_string(rec.worker_index.value_or(0)), std::to_string(rec.steps.value_or(0)),
                    fmt::format("{:.3f}", rec.seconds.value_or(0)), fmt::format("{:.1f}", rec.steps_per_s.value_or(0)),
                    fmt::format("{:.1f}", rec.mb_per_s.value_or(0)), std::to_string(rec.elements_checked.value_or(0)),
                    rec.result.value_or("?"), absl::StrJoin(rec.AppliedUpdates(), " ")});
  }
}

}  // namespace

// psbench run --benchmark=updates: the "no lost update" check (worker/updates_worker.h),
// every worker to every PS. Prints one line per worker and what each PS applied; a worker
// that finds a parameter that is not exact names it on stderr and the run exits 1.
int RunUpdates(Session& session, Scenario s) {
  LaunchOptions& o = session.options;
  auto settings = UpdatesSettingsFromFlags(o.num_workers);
  if (!settings.ok()) Die(kProgram, settings.status(), kExitUsage);
  if (absl::Status st = ValidateScenario(s); !st.ok()) Die(kProgram, st, kExitUsage);
  RequireExchanges("--benchmark=updates", s.transport);
  auto plans = s.Plans(PayloadMemoryCheckOf(session));
  if (!plans.ok()) Die(kProgram, plans.status(), kExitUsage);
  if (absl::Status st = CheckReplay(*settings, plans->front()); !st.ok()) Die(kProgram, st, kExitUsage);
  const size_t tensors = UpdatesModelBytes(*settings, plans->front()).size();
  if (absl::Status st = CheckUpdatesModel(tensors, o.num_ps); !st.ok()) {
    Die(kProgram, st, kExitUsage);
  }
  if (absl::Status st = CheckTransportsLaunch(session, {s.transport}); !st.ok()) Die(kProgram, st, kExitUsage);
  if (settings->timed) {
    // The replay waits out the trace's compute: a --timeout shorter ends the run with nothing;
    // without one, the run's hour of exchanges comes on top of it.
    const absl::Duration compute = ReplayedCompute(*plans->front().timing, settings->steps);
    if (o.timeout > absl::ZeroDuration() && compute >= o.timeout) {
      Die(kProgram, absl::StrCat("--replay=timed: ", settings->steps, " steps of the trace's recorded compute take ",
                                 absl::FormatDuration(compute), ", not less than --timeout=", absl::FormatDuration(o.timeout)),
          kExitUsage);
    }
    if (o.timeout <= absl::ZeroDuration()) o.timeout = JobBudget(o, s, 1) + compute;
  }
  o.worker_args = UpdatesWorkerArgs(*settings);
  session.Begin();
  fmt::print("# psbench updates (no lost update): {} workers x {} PS over {}, {} SGD, {} steps{}, "
             "model {} ({} tensors), seed {}, tls {}\n",
             o.num_workers, o.num_ps, TransportWithMode(s.transport, s.mode),
             settings->sync ? "synchronous" : "asynchronous", settings->steps,
             settings->timed ? " replayed as timed" : "", plans->front().Summary(), tensors, s.payload.seed,
             s.tls ? "on" : "off");
  std::vector<Record> kept;  // the records that stand if the run fails: they say what each worker found
  auto results = session.Run(s, 1, 0, &kept);
  if (!results.ok()) {
    if (!kept.empty()) {
      PrintUpdates(kept);
      SaveRecords(kProgram, session.json_path, kept);
    }
    fmt::print(stderr, "{}: updates: {}\n", kProgram, std::string(results.status().message()));
    return FailedRunExitCode(results.status());
  }
  PrintUpdates(*results);
  if (settings->timed) PrintTimedReplays(*results);
  return SaveRecords(kProgram, session.json_path, *results);
}

}  // namespace psbench
