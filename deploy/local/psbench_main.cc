// psbench: the one-machine driver. `psbench run` starts --num-ps psbench-ps and --num-workers
// psbench-worker processes on loopback, hands every worker the same scenario, gathers their
// JSON, prints the tables and exits non-zero if any process failed. With no --benchmark it
// runs the default tour: latency, bandwidth and throughput over the uniform, random and skew
// schemes.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/cli.h"
#include "bench/report.h"
#include "bench/scenario_flags.h"
#include "bench/sysinfo.h"
#include "transports/rdma_flags.h"
#include "deploy/local/process.h"
#include "fmt/core.h"

ABSL_FLAG(int, num_ps, 1, "PS processes to start (throughput; latency and bandwidth use 1)");
ABSL_FLAG(int, num_workers, 1, "worker processes to start (throughput; latency and bandwidth use 1)");
ABSL_FLAG(std::string, ps_cpu, "", "pin every PS to these CPUs (e.g. 0)");
ABSL_FLAG(std::string, worker_cpu, "", "pin every worker to these CPUs (e.g. 1)");
ABSL_FLAG(int, ps_threads, 1, "completion-queue threads per PS");
ABSL_FLAG(std::string, json, "", "append every result (JSON Lines) to this file");
ABSL_FLAG(absl::Duration, timeout, absl::ZeroDuration(),
          "end a run that takes longer than this (default: derived from warm-up and duration)");

namespace psbench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kProgram[] = "psbench";
constexpr char kUsage[] =
    "psbench run [flags]\n"
    "Runs psbench on this machine: starts PS and worker processes on loopback, runs the\n"
    "benchmark and prints the results. With no --benchmark, runs the default tour (latency,\n"
    "bandwidth and throughput over the uniform, random and skew schemes, about 45 s).\n"
    "Exit status: 0 success, 1 a process or measurement failed, 2 bad input.";

std::atomic<bool> g_interrupted{false};
void OnSignal(int) { g_interrupted = true; }

struct Options {
  int num_ps = 1;
  int num_workers = 1;
  std::string ps_cpu, worker_cpu;
  int ps_threads = 1;
  absl::Duration timeout;
  fs::path bin_dir;
  fs::path work_dir;
};

fs::path BinDir() {
  if (const char* env = getenv("PSBENCH_BIN_DIR")) return env;
  return fs::read_symlink("/proc/self/exe").parent_path();
}

absl::Duration RunBudget(const Scenario& s, size_t plans) {
  absl::Duration per_plan = absl::Seconds(30) + s.rpc_timeout;
  if (s.warmup_iterations < 0) per_plan += s.warmup;
  if (s.iterations == 0) per_plan += s.duration;
  else per_plan += absl::Minutes(10);  // bounded by the op deadlines in practice
  return s.connect_timeout + per_plan * static_cast<int64_t>(plans);
}

// Runs one scenario with fresh processes. Returns per-worker records, plus one total record
// per plan for throughput.
absl::StatusOr<std::vector<json>> RunScenario(Scenario s, const Options& o, size_t plans,
                                              int run_number) {
  // Latency and bandwidth are point to point.
  int num_ps = s.benchmark == Benchmark::kThroughput ? o.num_ps : 1;
  int num_workers = s.benchmark == Benchmark::kThroughput ? o.num_workers : 1;
  std::vector<ChildProcess> ps;
  for (int i = 0; i < num_ps; ++i) {
    std::vector<std::string> argv = {(o.bin_dir / "psbench-ps").string(), "--host=127.0.0.1",
                                     "--port=0", "--transport=" + s.transport,
                                     absl::StrCat("--threads=", o.ps_threads)};
    if (!o.ps_cpu.empty()) argv.push_back("--cpu=" + o.ps_cpu);
    if (s.busy_poll) argv.push_back("--busy-poll");
    if (s.transport == "grpc+verbs") {
      for (const auto& a : RdmaCommandLine(s.rdma)) argv.push_back(a);
    }
    auto child = ChildProcess::Start(absl::StrCat("PS ", i), argv, /*capture_stdout=*/true);
    if (!child.ok()) return child.status();
    auto line = child->ReadLine(absl::Now() + absl::Seconds(20));
    int port = 0;
    auto pos = line.ok() ? line->find("listening on ") : std::string::npos;
    if (pos != std::string::npos) {
      std::string rest = line->substr(pos + 13);
      rest = rest.substr(rest.rfind(':', rest.find(' ')) + 1);
      (void)absl::SimpleAtoi(rest.substr(0, rest.find(' ')), &port);
    }
    if (port == 0) {
      int st = child->Stop(SIGKILL, absl::Seconds(1));
      return absl::InternalError(absl::StrCat("PS ", i, " did not start (",
                                              ChildProcess::Describe(st), ")"));
    }
    s.ps.push_back(absl::StrCat("127.0.0.1:", port));
    ps.push_back(*std::move(child));
  }
  s.num_workers = num_workers;
  s.run_id = absl::StrCat("run-", getpid(), "-", run_number);
  std::vector<ChildProcess> workers;
  std::vector<fs::path> outputs;
  for (int w = 0; w < num_workers; ++w) {
    s.worker_index = w;
    fs::path scenario_file = o.work_dir / absl::StrCat("scenario-", run_number, "-", w, ".json");
    fs::path output = o.work_dir / absl::StrCat("results-", run_number, "-", w, ".jsonl");
    std::ofstream file(scenario_file);
    file << ScenarioToJson(s).dump(2);
    file.close();
    if (!file) return absl::InternalError(absl::StrCat("cannot write ", scenario_file.string()));
    std::vector<std::string> argv = {(o.bin_dir / "psbench-worker").string(),
                                     "--scenario=" + scenario_file.string(),
                                     "--json=" + output.string(), "--quiet"};
    if (!o.worker_cpu.empty()) argv.push_back("--cpu=" + o.worker_cpu);
    auto child = ChildProcess::Start(absl::StrCat("worker ", w), argv, /*capture_stdout=*/false);
    if (!child.ok()) return child.status();
    workers.push_back(*std::move(child));
    outputs.push_back(output);
  }

  // Wait for the workers; stop everything at the first failure.
  absl::Time deadline =
      absl::Now() + (o.timeout > absl::ZeroDuration() ? o.timeout : RunBudget(s, plans));
  absl::Status failure;
  size_t done = 0;
  while (done < workers.size() && failure.ok()) {
    done = 0;
    // PS first: when a PS dies its workers fail too, and the PS is the cause to report.
    for (auto& p : ps) {
      if (auto st = p.Poll(); st && failure.ok()) {
        failure = absl::InternalError(absl::StrCat(p.name(), " (pid ", p.pid(), ") ",
                                                   ChildProcess::Describe(*st), " during the run"));
      }
    }
    for (auto& w : workers) {
      if (auto st = w.Poll()) {
        if (*st != 0 && failure.ok()) {
          // Give a PS that is going down a moment to be reaped, so it is named as the cause.
          absl::SleepFor(absl::Milliseconds(200));
          for (auto& p : ps) {
            if (auto pst = p.Poll(); pst && failure.ok()) {
              failure = absl::InternalError(absl::StrCat(
                  p.name(), " (pid ", p.pid(), ") ", ChildProcess::Describe(*pst), " during the run"));
            }
          }
        }
        if (*st != 0 && failure.ok()) {
          failure = absl::InternalError(
              absl::StrCat(w.name(), " (pid ", w.pid(), ") ", ChildProcess::Describe(*st)));
        }
        ++done;
      }
    }
    if (g_interrupted) failure = absl::CancelledError("interrupted");
    if (failure.ok() && absl::Now() > deadline) {
      failure = absl::DeadlineExceededError(absl::StrCat(
          "the run did not finish within ",
          absl::FormatDuration(o.timeout > absl::ZeroDuration() ? o.timeout : RunBudget(s, plans)),
          " (see --timeout)"));
    }
    if (done < workers.size() && failure.ok()) absl::SleepFor(absl::Milliseconds(10));
  }
  for (auto& w : workers) w.Stop(SIGTERM, absl::Seconds(2));
  for (auto& p : ps) {
    int st = p.Stop(SIGTERM, absl::Seconds(5));
    if (st != 0 && failure.ok()) {
      failure = absl::InternalError(
          absl::StrCat(p.name(), " (pid ", p.pid(), ") ", ChildProcess::Describe(st), " at shutdown"));
    }
  }
  if (!failure.ok()) return failure;

  std::vector<std::vector<json>> per_worker;
  for (const auto& out : outputs) {
    auto records = ReadJsonLines(out.string());
    if (!records.ok()) return records.status();
    if (records->size() != plans) {
      return absl::DataLossError(absl::StrCat(out.string(), ": ", records->size(),
                                              " results for ", plans, " payloads"));
    }
    per_worker.push_back(*std::move(records));
  }
  std::vector<json> results;
  for (size_t p = 0; p < plans; ++p) {
    std::vector<json> group;
    for (auto& w : per_worker) group.push_back(w[p]);
    results.insert(results.end(), group.begin(), group.end());
    if (s.benchmark == Benchmark::kThroughput) results.push_back(AggregateThroughput(group));
  }
  return results;
}

// Busy-polling processes that share a CPU take turns by the scheduler's time slice, which
// turns microseconds into milliseconds: say so before measuring.
void WarnIfSpinnersShareCpus(const Options& o) {
  auto cpus = [](const std::string& list) {
    std::set<int> out;
    auto parsed = ParseCpuList(list.empty() ? CurrentAffinity() : list);
    if (parsed.ok()) out.insert(parsed->begin(), parsed->end());
    return out;
  };
  std::set<int> ps = cpus(o.ps_cpu), workers = cpus(o.worker_cpu), all = ps;
  all.insert(workers.begin(), workers.end());
  size_t spinners = static_cast<size_t>(o.num_ps + o.num_workers);
  bool shared = !o.ps_cpu.empty() && !o.worker_cpu.empty()
                    ? std::any_of(ps.begin(), ps.end(), [&](int c) { return workers.contains(c); })
                    : all.size() < spinners;
  if (shared) {
    fmt::print(stderr,
               "{}: warning: --busy-poll with PS and workers sharing CPUs: spinning processes "
               "will wait for each other's time slices; give each its own CPU "
               "(--ps-cpu, --worker-cpu)\n",
               kProgram);
  }
}

struct Headline {
  std::string scheme;
  std::map<std::string, std::string> by_benchmark;
};

int Main(int argc, char** argv) {
  auto positional =
      ParseFlagsOrExit(argc, argv, kUsage, {"/deploy/local/psbench_main.cc", "/bench/scenario_flags.cc", kRdmaFlagsFile});
  if (positional.empty() || positional[0] != "run") {
    Die(kProgram,
        positional.empty() ? std::string("missing command; usage: psbench run [flags]")
                           : "unknown command '" + positional[0] + "'; usage: psbench run [flags]",
        kExitUsage);
  }
  if (positional.size() > 1) Die(kProgram, "unexpected argument '" + positional[1] + "'", kExitUsage);

  Options o;
  o.num_ps = absl::GetFlag(FLAGS_num_ps);
  o.num_workers = absl::GetFlag(FLAGS_num_workers);
  o.ps_cpu = absl::GetFlag(FLAGS_ps_cpu);
  o.worker_cpu = absl::GetFlag(FLAGS_worker_cpu);
  o.ps_threads = absl::GetFlag(FLAGS_ps_threads);
  o.timeout = absl::GetFlag(FLAGS_timeout);
  if (o.timeout < absl::ZeroDuration()) Die(kProgram, "--timeout must not be negative (0 = derived from the scenario)", kExitUsage);
  if (o.num_ps < 1 || o.num_ps > 64) Die(kProgram, "--num-ps must be in [1, 64]", kExitUsage);
  if (o.num_workers < 1 || o.num_workers > 256) {
    Die(kProgram, "--num-workers must be in [1, 256]", kExitUsage);
  }
  if (o.ps_threads < 1 || o.ps_threads > 256) Die(kProgram, "--ps-threads must be in [1, 256]", kExitUsage);
  for (const auto& [flag, list] : {std::pair{"--ps-cpu", o.ps_cpu}, {"--worker-cpu", o.worker_cpu}}) {
    if (list.empty()) continue;
    auto cpus = ParseCpuList(list);
    if (!cpus.ok()) Die(kProgram, absl::StrCat(flag, "=", list, " is not a CPU list"), kExitUsage);
    for (int c : *cpus) {
      if (c >= sysconf(_SC_NPROCESSORS_ONLN)) {
        Die(kProgram, absl::StrCat(flag, "=", list, ": CPU ", c, " does not exist"), kExitUsage);
      }
    }
  }
  std::string json_path = absl::GetFlag(FLAGS_json);
  if (!json_path.empty()) {
    if (absl::Status s = AppendJsonLines(json_path, {}); !s.ok()) Die(kProgram, s, kExitUsage);
  }

  auto base = ScenarioFromFlags();
  if (!base.ok()) Die(kProgram, base.status(), kExitUsage);
  if (base->busy_poll) WarnIfSpinnersShareCpus(o);

  // What to run: the chosen benchmark and scheme, or the tour over what was not chosen.
  bool tour = !FlagWasSet("benchmark");
  std::vector<Benchmark> benchmarks = {base->benchmark};
  std::vector<Scheme> schemes = {base->payload.scheme};
  if (tour) {
    benchmarks = {Benchmark::kLatency, Benchmark::kBandwidth, Benchmark::kThroughput};
    if (!FlagWasSet("scheme") && !base->sweep) {
      schemes = {Scheme::kUniform, Scheme::kRandom, Scheme::kSkew};
      if (base->payload.categories.size() < 2) schemes = {Scheme::kUniform};
    }
    if (!FlagWasSet("warmup") && !FlagWasSet("warmup-iterations")) base->warmup = absl::Seconds(1);
    if (!FlagWasSet("duration") && !FlagWasSet("iterations")) base->duration = absl::Seconds(3);
    if (!FlagWasSet("num-ps")) o.num_ps = 2;
    if (!FlagWasSet("num-workers")) o.num_workers = 2;
  } else if (base->benchmark != Benchmark::kThroughput && (o.num_ps > 1 || o.num_workers > 1)) {
    Die(kProgram,
        absl::StrCat("--benchmark=", BenchmarkName(base->benchmark),
                     " is point to point (1 PS, 1 worker); use --benchmark=throughput for "
                     "--num-ps/--num-workers above 1"),
        kExitUsage);
  }
  // Resolve every plan now so a bad trace fails before any process starts.
  std::vector<std::pair<Scenario, size_t>> runs;
  for (Scheme scheme : schemes) {
    for (Benchmark b : benchmarks) {
      Scenario s = *base;
      s.benchmark = b;
      s.payload.scheme = scheme;
      if (absl::Status st = ValidateScenario(s); !st.ok()) Die(kProgram, st, kExitUsage);
      auto plans = s.Plans();
      if (!plans.ok()) Die(kProgram, plans.status(), kExitUsage);
      runs.emplace_back(s, plans->size());
    }
  }

  o.bin_dir = BinDir();
  char tmpl[] = "/tmp/psbench-run-XXXXXX";
  if (const char* t = mkdtemp(tmpl)) o.work_dir = t;
  else Die(kProgram, "cannot create a temporary directory", kExitRuntime);
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  signal(SIGPIPE, SIG_IGN);

  if (tour) {
    fmt::print("# psbench default tour: {} runs, warm-up {} + {} each; throughput {} workers x {} PS\n\n",
               runs.size(), absl::FormatDuration(base->warmup), absl::FormatDuration(base->duration),
               o.num_workers, o.num_ps);
  }
  std::vector<std::string> command(argv, argv + argc);
  TablePrinter table;
  std::vector<Headline> headlines;
  int exit_code = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    const auto& [s, plans] = runs[r];
    auto results = RunScenario(s, o, plans, static_cast<int>(r));
    if (!results.ok()) {
      fmt::print(stderr, "{}: {} {}: {}\n", kProgram, std::string(BenchmarkName(s.benchmark)),
                 SchemeName(s.payload.scheme), std::string(results.status().message()));
      exit_code = g_interrupted ? 130 : kExitRuntime;
      break;
    }
    for (json& rec : *results) {
      rec["worker_command"] = rec["command"];
      rec["command"] = command;
      table.Print(rec);
    }
    if (!json_path.empty()) {
      if (absl::Status st = AppendJsonLines(json_path, *results); !st.ok()) {
        fmt::print(stderr, "{}: {}\n", kProgram, std::string(st.message()));
        exit_code = kExitRuntime;
        break;
      }
    }
    if (tour) {
      std::string scheme(SchemeName(s.payload.scheme));
      if (headlines.empty() || headlines.back().scheme != scheme) headlines.push_back({scheme, {}});
      const json& last = results->back();
      std::string cell;
      if (s.benchmark == Benchmark::kLatency) cell = fmt::format("{:.1f}", last["latency_us"]["p50"].get<double>());
      if (s.benchmark == Benchmark::kBandwidth) cell = fmt::format("{:.1f}", last["mb_per_s"].get<double>());
      if (s.benchmark == Benchmark::kThroughput) cell = fmt::format("{:.1f}", last["rpc_per_s"].get<double>());
      headlines.back().by_benchmark[std::string(BenchmarkName(s.benchmark))] = cell;
    }
  }
  if (tour && exit_code == 0) {
    fmt::print("\n# Summary ({} {}): latency p50 usec | bandwidth MB/s | throughput total RPC/s\n",
               runs[0].first.transport, std::string(WireModeName(runs[0].first.mode)));
    fmt::print("{:>10} {:>14} {:>16} {:>18}\n", "#scheme", "latency p50", "bandwidth MB/s", "throughput RPC/s");
    for (const auto& h : headlines) {
      auto get = [&h](const char* k) {
        auto it = h.by_benchmark.find(k);
        return it == h.by_benchmark.end() ? std::string("-") : it->second;
      };
      fmt::print("{:>10} {:>14} {:>16} {:>18}\n", h.scheme, get("latency"), get("bandwidth"), get("throughput"));
    }
    if (!json_path.empty()) fmt::print("# results: {}\n", json_path);
  }
  std::error_code ec;
  fs::remove_all(o.work_dir, ec);
  return exit_code;
}

}  // namespace
}  // namespace psbench

int main(int argc, char** argv) { return psbench::Main(argc, argv); }
