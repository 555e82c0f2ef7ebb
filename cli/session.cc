#include "cli/session.h"

#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "bench/cli.h"
#include "bench/comparison.h"
#include "bench/figures.h"
#include "bench/flag_scope.h"
#include "bench/hdr_text.h"
#include "bench/load_report.h"
#include "bench/report.h"
#include "bench/run_status.h"
#include "bench/scenario_flags.h"
#include "cli/compare.h"
#include "cli/launch/launch.h"
#include "cli/launch_flags.h"
#include "cli/reading_aid.h"
#include "fmt/core.h"
#include "transports/limit_flags.h"

namespace psbench {
namespace {

using nlohmann::json;


// The tour's summary: per scheme, its payload and the headline figure of each benchmark (of
// a repeated run, the median over its repetitions' last records).
void AddHeadline(std::vector<TourRow>& rows, const Scenario& s, const std::vector<Record>& lasts) {
  const Record& last = lasts.back();
  std::string scheme(SchemeName(s.payload.scheme));
  const double none = std::numeric_limits<double>::quiet_NaN();
  if (rows.empty() || rows.back().scheme != scheme) {
    rows.push_back({scheme, last.payload_summary.value_or(""),
                    static_cast<uint64_t>(last.payload_bytes.value_or(0)), none, none, none});
  }
  // The benchmark's headline figure (its first), a median as every comparison takes one.
  ComparisonCell cell;
  for (const Record& r : lasts) cell.records.push_back(&r);
  const BenchmarkKind* kind = KindOf(last);
  const double value = kind ? cell.Value(kind->figures.front()).value_or(none) : none;
  TourRow& row = rows.back();
  if (s.benchmark == Benchmark::kLatency) row.latency_p50_us = value;
  if (s.benchmark == Benchmark::kBandwidth) row.bandwidth_mb_per_s = value;
  if (s.benchmark == Benchmark::kThroughput) row.throughput_rpc_per_s = value;
}

// What to run: the chosen benchmark and scheme, or the tour over what was not chosen. Every
// plan is resolved now, so a bad trace fails before any process starts.
std::vector<std::pair<Scenario, size_t>> ResolveRuns(Scenario& base, bool tour,
                                                     const std::vector<CompareEntry>& compare,
                                                     uint64_t ps_max_message_bytes, size_t num_ps,
                                                     Scenario::PayloadMemoryCheck memory_check) {
  std::vector<Benchmark> benchmarks = {base.benchmark};
  std::vector<Scheme> schemes = {base.payload.scheme};
  if (tour) {
    benchmarks = {Benchmark::kLatency, Benchmark::kBandwidth, Benchmark::kThroughput};
    if (!FlagWasSet("scheme") && !base.sweep) {
      schemes = {Scheme::kUniform, Scheme::kRandom, Scheme::kSkew};
      if (base.payload.categories.size() < 2) schemes = {Scheme::kUniform};
    }
    if (!FlagWasSet("warmup") && !FlagWasSet("warmup-iterations")) base.warmup = absl::Seconds(1);
    if (!FlagWasSet("duration") && !FlagWasSet("iterations")) base.duration = absl::Seconds(3);
  }
  std::vector<std::pair<Scenario, size_t>> runs;
  for (Scheme scheme : schemes) {
    for (Benchmark b : benchmarks) {
      Scenario s = base;
      s.benchmark = b;
      s.payload.scheme = scheme;
      if (absl::Status st = ValidateScenario(s); !st.ok()) Die(kProgram, st, kExitUsage);
      for (const CompareEntry& e : compare) {
        Scenario c = s;
        c.transport = e.transport;
        c.mode = e.mode;
        if (absl::Status st = ValidateScenario(c); !st.ok()) {
          Die(kProgram, absl::StrCat(e.label, ": ", std::string(st.message())), kExitUsage);
        }
      }
      auto plans = s.Plans(memory_check);
      if (!plans.ok()) Die(kProgram, plans.status(), kExitUsage);
      // Each transport that will run, as it counts a message (--transports: each entry's).
      std::vector<std::pair<std::string, WireMode>> counted;
      for (const CompareEntry& e : compare) counted.emplace_back(e.transport, e.mode);
      if (counted.empty()) counted.emplace_back(s.transport, s.mode);
      for (const auto& entry : counted) {
        const std::string& transport = entry.first;  // not a structured binding: clang 14 will not capture one
        const WireMode mode = entry.second;
        if (absl::Status st = CheckPayloadsFitMessages(
                *plans, ps_max_message_bytes, "the PS's", PlacesOverPs(s, num_ps) ? num_ps : 0,
                [&](const std::vector<uint64_t>& sizes) { return LimitedRequestBytes(transport, mode, s.validate, sizes); });
            !st.ok()) {
          Die(kProgram, compare.empty() ? std::string(st.message()) : absl::StrCat(transport, ": ", st.message()), kExitUsage);
        }
      }
      runs.emplace_back(s, plans->size() * LoadPoints(s).size());  // a record per plan and load
    }
  }
  return runs;
}

// The summary of repeated runs: per payload, the median and spread of what `headlines`
// holds; their records too when `save` (not after a failure, as a comparison).
int PrintRepetitions(const Session& session, const Scenario& s, const std::vector<std::vector<Record>>& headlines,
                     bool save) {
  const LaunchOptions& o = session.options;
  if (o.repetitions <= 1 || headlines[0].empty()) return 0;
  const std::vector<CompareEntry> one = {{s.transport, s.mode, o.label.empty() ? s.transport : o.label}};
  PrintComparison(stdout, one, headlines, o.repetitions, /*stopped=*/!save);
  if (!save || session.json_path.empty()) return 0;
  if (absl::Status st = AppendJsonLines(session.json_path, ComparisonRecords(one, headlines, o.command)); !st.ok()) {
    fmt::print(stderr, "{}: {}\n", kProgram, std::string(st.message()));
    return kExitRuntime;
  }
  return 0;
}

// Runs `runs` one after the other (each --repetitions times in a row), a table row per
// record as it comes; stops at the first failure (records that stand, a lost worker's
// survivors' or those of a worker whose check failed, still print and are saved, and so does
// the summary of the repetitions that completed). Repeated runs end with their summary: per
// payload, the median and spread. Returns the exit status.
int RunBenchmarks(Session& session, const std::vector<std::pair<Scenario, size_t>>& runs, bool tour) {
  TablePrinter table;
  std::vector<TourRow> headlines;
  std::vector<Record> open_loop;  // for --hdr-out
  std::vector<std::vector<Record>> repeated(1);  // every headline record, for the summary
  const std::string& json_path = session.json_path;
  const int repetitions = session.options.repetitions;
  const int total = static_cast<int>(runs.size()) * repetitions;
  // The records cannot be saved (a full disk): the run stops, and the histograms of what was
  // measured are still written.
  auto saving_failed = [&open_loop](const absl::Status& st) {
    fmt::print(stderr, "{}: {}\n", kProgram, std::string(st.message()));
    WriteHdrOrWarn(HdrOutFlag(), open_loop);
    return kExitRuntime;
  };
  for (size_t r = 0; r < runs.size(); ++r) {
    const auto& [s, plans] = runs[r];
    std::vector<Record> lasts;  // each repetition's last record
    for (int rep = 0; rep < repetitions; ++rep) {
      const int number = static_cast<int>(r) * repetitions + rep;
      RunStatus::Get().SetRun(number + 1, total);
      std::vector<Record> survivors;
      auto results = session.Run(s, plans, number, &survivors);
      MarkRepetition(survivors, rep + 1, repetitions);
      if (!results.ok() && !survivors.empty()) {
        // The run failed; these records are still measurements (and say what went wrong).
        for (const Record& rec : survivors) table.Print(rec);
        PrintOpenLoop(stdout, survivors);
        for (const Record& rec : survivors) {
          if (IsHeadline(rec) && LoadPointOf(rec)) open_loop.push_back(rec);
        }
        if (!json_path.empty()) {
          if (absl::Status st = AppendJsonLines(json_path, survivors); !st.ok()) {
            fmt::print(stderr, "{}: {}\n", kProgram, std::string(st.message()));
          }
        }
        std::fflush(stdout);
      }
      if (!results.ok()) {
        PrintRepetitions(session, s, repeated, /*save=*/false);
        WriteHdrOrWarn(HdrOutFlag(), open_loop);  // what completed
        fmt::print(stderr, "{}: {} {}{}: {}\n", kProgram, std::string(BenchmarkName(s.benchmark)),
                   SchemeLabel(s), RepetitionSuffix(rep + 1, repetitions),
                   std::string(results.status().message()));
        return FailedRunExitCode(results.status());
      }
      MarkRepetition(*results, rep + 1, repetitions);
      for (const Record& rec : *results) table.Print(rec);
      PrintOpenLoop(stdout, *results);
      for (const Record& rec : *results) {
        if (IsHeadline(rec) && LoadPointOf(rec)) open_loop.push_back(rec);
        if (IsHeadline(rec)) repeated[0].push_back(rec);
      }
      if (!json_path.empty()) {
        if (absl::Status st = AppendJsonLines(json_path, *results); !st.ok()) return saving_failed(st);
      }
      lasts.push_back(results->back());
    }
    if (tour) AddHeadline(headlines, s, lasts);
  }
  if (!runs.empty()) {
    if (int st = PrintRepetitions(session, runs[0].first, repeated, /*save=*/true); st != 0) {
      WriteHdrOrWarn(HdrOutFlag(), open_loop);
      return st;
    }
  }
  if (tour) {
    PrintTourSummary(TransportWithMode(runs[0].first.transport, runs[0].first.mode), headlines,
                     session.options.repetitions);
    std::fflush(stdout);
    std::vector<Record> floors = PrintReadingAid(session.options, session.name == "run", headlines);
    if (!json_path.empty() && !floors.empty()) {
      if (absl::Status st = AppendJsonLines(json_path, floors); !st.ok()) return saving_failed(st);
    }
    if (Interrupted()) {  // during the floors: what was measured is kept
      WriteHdrOrWarn(HdrOutFlag(), open_loop);
      fmt::print(stderr, "{}: the floors: {}\n", kProgram, std::string(InterruptedError().message()));
      return FailedRunExitCode(InterruptedError());
    }
    if (!json_path.empty()) fmt::print("# results: {}\n", json_path);
  }
  return WriteHdrOrWarn(HdrOutFlag(), open_loop);
}

}  // namespace

void Session::Begin() {
  // Every worker holds a session on every PS: past the PS's cap, workers are refused.
  if (options.ps_max_connections > 0 && options.num_workers > options.ps_max_connections) {
    Die(kProgram,
        absl::StrCat("--max-connections=", options.ps_max_connections, " is below the run's ", options.num_workers,
                     " workers: each holds a session on every PS"),
        kExitUsage);
  }
  StopOnSignals();
  if (announce) announce();
}

Launcher* Session::LauncherFor(const std::string& transport) const {
  return TransportLaunchesAsJob(transport) ? job_launcher.get() : launcher.get();
}

absl::StatusOr<std::vector<Record>> Session::Run(const Scenario& s, size_t plans, int number,
                                                 std::vector<Record>* survivors) {
  Launcher* l = LauncherFor(s.transport);
  if (l == nullptr) return absl::FailedPreconditionError(absl::StrCat("psbench ", name, " cannot start ", s.transport));
  const bool aggregate = s.benchmark == Benchmark::kThroughput && !options.training;
  return RunJob(*l, options, s, plans, number, aggregate, survivors);
}

Scenario::PayloadMemoryCheck PayloadMemoryCheckOf(const Session& session) {
  return session.launcher && session.launcher->name() == "local" ? Scenario::PayloadMemoryCheck::kThisProcess
                                                                 : Scenario::PayloadMemoryCheck::kExplicitOnly;
}

absl::Status CheckTransportsLaunch(const Session& session, const std::vector<std::string>& transports) {
  for (const std::string& t : transports) {
    Launcher* l = session.LauncherFor(t);
    if (l == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--transport=", t, " runs PS and workers as one MPI job, which psbench ", session.name,
          " cannot start: use psbench run (one machine), psbench mpirun or psbench slurm"));
    }
    if (absl::Status st = l->Check(); !st.ok()) return st;
  }
  return absl::OkStatus();
}

namespace {

// The --transports entries of a payload run (none without the flag); exits 2 on a bad list.
std::vector<CompareEntry> CompareEntriesOrDie(const Scenario& base) {
  if (!FlagWasSet("transports") || FlagWasSet("trainer") || base.benchmark == Benchmark::kUpdates) return {};
  if (FlagWasSet("transport")) Die(kProgram, "give --transport or --transports, not both", kExitUsage);
  auto entries = ParseTransportList(TransportsFlag(), base.mode);
  if (!entries.ok()) Die(kProgram, entries.status(), kExitUsage);
  return *std::move(entries);
}

}  // namespace

RunShape CheckRunFlagsOrDie(const Scenario& base) {
  RunShape shape = ShapeOf(base, FlagWasSet("trainer"), /*tour=*/!FlagWasSet("benchmark"));
  if (auto compare = CompareEntriesOrDie(base); !compare.empty()) {
    shape.transports.clear();
    for (const auto& e : compare) shape.transports.push_back(e.transport);
  }
  if (absl::Status st = CheckFlagsApply(shape); !st.ok()) Die(kProgram, st, kExitUsage);
  return shape;
}

int RunSession(Session& session, Scenario base) {
  base.tls = session.options.tls;
  if (absl::Status st = HdrOutFlag().empty() ? absl::OkStatus() : CheckHdrOut(HdrOutFlag()); !st.ok()) {
    Die(kProgram, st, kExitUsage);
  }
  if (FlagWasSet("trainer")) return RunTraining(session, base);
  if (base.benchmark == Benchmark::kUpdates) return RunUpdates(session, base);
  const bool tour = !FlagWasSet("benchmark");
  const std::vector<CompareEntry> compare = CompareEntriesOrDie(base);
  std::vector<std::string> transports = {base.transport};
  if (!compare.empty()) {
    transports.clear();
    for (const auto& e : compare) transports.push_back(e.transport);
  }
  const LaunchOptions& o = session.options;
  if (!tour && !EveryWorkerToEveryPs(base.benchmark) && (o.num_ps > 1 || o.num_workers > 1)) {
    Die(kProgram,
        absl::StrCat("--benchmark=", BenchmarkName(base.benchmark),
                     " is point to point (1 PS, 1 worker); use --benchmark=throughput for "
                     "--num-ps/--num-workers above 1"),
        kExitUsage);
  }
  auto runs = ResolveRuns(base, tour, compare, o.ps_max_message_bytes, o.num_ps, PayloadMemoryCheckOf(session));
  if (absl::Status st = CheckTransportsLaunch(session, transports); !st.ok()) Die(kProgram, st, kExitUsage);
  session.Begin();
  if (tour) {
    const size_t per = runs.size() * static_cast<size_t>(o.repetitions);
    std::string split;
    if (!compare.empty()) absl::StrAppend(&split, " (", per, " per transport x ", compare.size(), ")");
    if (o.repetitions > 1) absl::StrAppend(&split, compare.empty() ? " (" : " [", runs.size(), " x ", o.repetitions,
                                           " repetitions", compare.empty() ? ")" : "]");
    // Each phase by count when given one, else by time.
    const std::string warmup = base.warmup_iterations >= 0 ? absl::StrCat(base.warmup_iterations, " iterations")
                                                           : absl::FormatDuration(base.warmup);
    const std::string measure =
        base.iterations > 0 ? absl::StrCat(base.iterations, " iterations") : absl::FormatDuration(base.duration);
    fmt::print("# psbench default tour: {} runs{}, warm-up {} + {} each; throughput {} workers x {} PS\n{}",
               per * std::max<size_t>(compare.size(), 1), split, warmup, measure, o.num_workers, o.num_ps,
               compare.empty() ? "\n" : "");
  }
  std::fflush(stdout);
  if (!compare.empty()) {
    RunOne run_one = [&session](const Scenario& s, size_t plans, int number) {
      return session.Run(s, plans, number);
    };
    return RunComparison(compare, runs, o.repetitions, run_one, session.json_path, HdrOutFlag(), o.command);
  }
  return RunBenchmarks(session, runs, tour);
}

}  // namespace psbench
