// psbench: the one-machine driver. `psbench run` starts --num-ps psbench-ps and --num-workers
// psbench-worker processes on loopback, hands every worker the same scenario, gathers their
// JSON, prints the tables and exits non-zero if any process failed. With no --benchmark it
// runs the default tour: latency, bandwidth and throughput over the uniform, random and skew
// schemes. With --transports, runs the same scenario once per transport (or transport/mode)
// and prints one table comparing them.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "bench/cli.h"
#include "bench/report.h"
#include "bench/run_status.h"
#include "bench/scenario_flags.h"
#include "bench/sysinfo.h"
#include "transports/limit_flags.h"
#include "transports/rdma_flags.h"
#include "transports/tls_flags.h"
#include "transports/transport.h"
#include "deploy/local/process.h"
#include "deploy/local/train_command.h"
#include "deploy/cluster/cluster_command.h"
#include "deploy/local/launch.h"
#include "deploy/report/report_command.h"
#include "worker/trainer_flags.h"
#include "worker/updates_worker.h"
#ifdef PSBENCH_HAVE_TRAINER
#include "absl/algorithm/container.h"
#include "worker/trainer/network.h"
#endif
#include "fmt/core.h"

ABSL_FLAG(int, num_ps, 1, "PS processes to start (throughput; latency and bandwidth use 1)");
ABSL_FLAG(int, num_workers, 1, "worker processes to start (throughput; latency and bandwidth use 1)");
ABSL_FLAG(std::string, ps_cpu, "", "pin every PS to these CPUs (e.g. 0)");
ABSL_FLAG(std::string, worker_cpu, "", "pin every worker to these CPUs (e.g. 1)");
ABSL_FLAG(int, ps_threads, 1, "completion-queue threads per PS");
ABSL_FLAG(std::string, json, "", "append every result (JSON Lines) to this file");
ABSL_FLAG(absl::Duration, timeout, absl::ZeroDuration(),
          "end a run that takes longer than this (default: derived from warm-up and duration)");
ABSL_FLAG(std::string, mpirun, PSBENCH_MPIEXEC,
          "grpc+mpi: the MPI launcher that starts PS and workers as one job (default: the one "
          "psbench was built against)");
ABSL_FLAG(std::string, mpirun_args, "",
          "grpc+mpi: extra launcher arguments, space-separated (e.g. \"--mca btl self,vader\")");
ABSL_FLAG(std::string, transports, "",
          "compare: run the same scenario once per entry, TRANSPORT or TRANSPORT/MODE "
          "(e.g. grpc,grpc+verbs or grpc/non-serialized,grpc/serialized; at least two, no "
          "repeats; an entry without /MODE uses --mode), and print one table of the headline "
          "figures with ratios against the first entry; not with --transport");

namespace psbench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kProgram[] = "psbench";
constexpr char kUsage[] =
    "psbench run [flags] | psbench run --trainer=MODEL [flags] | psbench train --model=MODEL [flags]\n"
    "  | psbench report FILE.jsonl... [--html=OUT.html] (see psbench report --help)\n"
    "  | psbench ssh|slurm|mpirun [flags] (cluster runs; see psbench ssh --help)\n"
    "Runs psbench on this machine: starts PS and worker processes on loopback, runs the\n"
    "benchmark and prints the results. With no --benchmark, runs the default tour (latency,\n"
    "bandwidth and throughput over the uniform, random and skew schemes, about 45 s).\n"
    "With --transports=A,B,... runs it once per transport and prints one comparison table.\n"
    "With --trainer=MODEL each worker trains MODEL (embedded trainer) through the PS.\n"
    "With --benchmark=updates (--steps=N, --sync or --async) the workers check that the PS\n"
    "lost no update: the parameters must equal the exact sums of their integer gradients.\n"
    "`psbench train` times one model on this machine: images/s and a per-layer table.\n"
    "`psbench report` turns --json results into Markdown tables and an HTML page with plots.\n"
    "Exit status: 0 success, 1 a process or measurement failed, 2 bad input.";


struct Options {
  int num_ps = 1;
  int num_workers = 1;
  std::string ps_cpu, worker_cpu;
  int ps_threads = 1;
  absl::Duration timeout;
  fs::path bin_dir;
  fs::path work_dir;
  std::string mpirun;
  std::vector<std::string> mpirun_args;
  // Added to every worker's command line (the trainer's settings with --trainer).
  std::vector<std::string> worker_args;
  bool training = false;
  // --tls-* and the PS limits, for every PS and every worker started.
  std::vector<std::string> ps_security_args, worker_security_args;
};

fs::path BinDir() {
  if (const char* env = getenv("PSBENCH_BIN_DIR")) return env;
  return fs::read_symlink("/proc/self/exe").parent_path();
}

// The time a run may take: the scenario's, or for a training run, whose steps take what the
// model takes, an hour; --timeout overrides either.
absl::Duration Budget(const Options& o, const Scenario& s, size_t plans) {
  if (o.timeout > absl::ZeroDuration()) return o.timeout;
  return o.training || s.benchmark == Benchmark::kUpdates ? s.connect_timeout + absl::Hours(1)
                                                          : RunBudget(s, plans);
}

// Reads each worker's JSON Lines: per-worker records, plus one total record per plan for
// throughput.
absl::StatusOr<std::vector<json>> CollectResults(const std::vector<fs::path>& outputs,
                                                 size_t plans, bool aggregate) {
  std::vector<std::vector<json>> per_worker;
  std::vector<std::string> names;
  for (const auto& out : outputs) {
    auto records = ReadJsonLines(out.string());
    if (!records.ok()) return records.status();
    per_worker.push_back(*std::move(records));
    names.push_back(out.string());
  }
  return MergeWorkerRecords(std::move(per_worker), plans, aggregate, names);
}

// Worker w's scenario (`s` as worker w sees it) in the work directory, and the file it is to
// write its results to.
struct WorkerFiles {
  fs::path scenario;
  fs::path results;
};
absl::StatusOr<WorkerFiles> WriteWorkerScenario(Scenario& s, const Options& o, int run_number,
                                                int w) {
  s.worker_index = w;
  WorkerFiles files{o.work_dir / absl::StrCat("scenario-", run_number, "-", w, ".json"),
                    o.work_dir / absl::StrCat("results-", run_number, "-", w, ".jsonl")};
  std::ofstream file(files.scenario);
  file << ScenarioToJson(s).dump(2);
  file.close();
  if (!file) return absl::InternalError(absl::StrCat("cannot write ", files.scenario.string()));
  return files;
}

// grpc+mpi: one mpirun starts every PS and worker as ranks of one job (MPMD, one app context
// per process, so each worker gets its own scenario and result file): PS i is rank i, worker w
// is rank num_ps + w. Workers find the PS through the job. mpirun's output goes to a log that
// is relayed after the run (less the PS's "listening on" lines); when a rank fails, mpirun
// names its number and we name its role.
std::string RankRange(int first, int count, const char* what) {
  return count == 1 ? absl::StrCat("rank ", first, ": ", what)
                    : absl::StrCat("ranks ", first, "-", first + count - 1, ": ", what);
}

std::string RankRole(int rank, int num_ps) {
  return rank < num_ps ? absl::StrCat("PS ", rank) : absl::StrCat("worker ", rank - num_ps);
}

// "PS 0 (MPI rank 0) exited on signal 9 (Killed)" for the rank mpirun's log names as the
// cause, or "".
std::string FailedRankFromLog(const std::string& log, int num_ps, int ranks) {
  struct Marker {
    const char* text;    // precedes the rank number
    const char* after;   // what happened: follows the rank on the same line, from here
    const char* what;    // or, when null, this
  };
  // Open MPI 4: "process rank 1 with PID 123 on node vm exited on signal 9 (Killed).",
  // "MPI_ABORT was invoked on rank 2 in communicator ...", "Process name: [[4711,1],3]".
  // In that order: a rank that was killed, the first to exit non-zero, one that aborted.
  for (const Marker& m : {Marker{"process rank ", " exited ", nullptr},
                          Marker{"Process name: [[", nullptr, "exited with a non-zero status"},
                          Marker{"invoked on rank ", nullptr, "called MPI_Abort"}}) {
    size_t at = log.find(m.text);
    if (at == std::string::npos) continue;
    at += strlen(m.text);
    if (m.text[0] == 'P') {  // [[jobid,1],rank]
      at = log.find("],", at);
      if (at == std::string::npos) continue;
      at += 2;
    }
    int rank = -1;
    size_t end = log.find_first_not_of("0123456789", at);
    if (!absl::SimpleAtoi(log.substr(at, end - at), &rank) || rank < 0 || rank >= ranks) continue;
    std::string what = m.what ? m.what : "failed";
    if (m.after) {
      size_t line_end = log.find('\n', at);
      size_t from = log.find(m.after, at);
      if (from != std::string::npos && from < line_end) {
        what = log.substr(from + 1, line_end - from - 1);
        while (!what.empty() && what.back() == '.') what.pop_back();
      }
    }
    return absl::StrCat(RankRole(rank, num_ps), " (MPI rank ", rank, ") ", what);
  }
  return "";
}

std::string ReadFileText(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// What mpirun and the ranks printed, less the PS's "listening on" lines.
void RelayLog(const std::string& log) {
  for (absl::string_view line : absl::StrSplit(log, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "psbench-ps listening on ")) continue;
    fmt::print(stderr, "{}\n", std::string(line));
  }
}

absl::StatusOr<std::vector<json>> RunMpiJob(Scenario s, const Options& o, size_t plans,
                                            int run_number) {
  int num_ps = EveryWorkerToEveryPs(s.benchmark) ? o.num_ps : 1;
  int num_workers = EveryWorkerToEveryPs(s.benchmark) ? o.num_workers : 1;
  std::vector<std::string> argv = {o.mpirun};
  // Open MPI refuses root without this, and more ranks than cores without --oversubscribe;
  // --bind-to none leaves placement to --ps-cpu and --worker-cpu.
  if (geteuid() == 0) argv.push_back("--allow-run-as-root");
  for (const char* a : {"--oversubscribe", "--bind-to", "none"}) argv.push_back(a);
  for (const auto& a : o.mpirun_args) argv.push_back(a);
  for (int i = 0; i < num_ps; ++i) {
    if (i > 0) argv.push_back(":");
    for (const std::string& a :
         {std::string("-np"), std::string("1"), (o.bin_dir / "psbench-ps").string(),
          std::string("--listen=127.0.0.1"), std::string("--port=0"),
          "--transport=" + s.transport, absl::StrCat("--threads=", o.ps_threads)}) {
      argv.push_back(a);
    }
    if (!o.ps_cpu.empty()) argv.push_back("--cpu=" + o.ps_cpu);
    if (s.busy_poll) argv.push_back("--busy-poll");
    for (const auto& a : o.ps_security_args) argv.push_back(a);
  }
  s.ps.clear();  // the workers find every PS of the job
  s.num_workers = num_workers;
  s.run_id = absl::StrCat("run-", getpid(), "-", run_number);
  std::vector<fs::path> outputs;
  for (int w = 0; w < num_workers; ++w) {
    auto files = WriteWorkerScenario(s, o, run_number, w);
    if (!files.ok()) return files.status();
    for (const std::string& a :
         {std::string(":"), std::string("-np"), std::string("1"),
          (o.bin_dir / "psbench-worker").string(), "--scenario=" + files->scenario.string(),
          "--json=" + files->results.string(), std::string("--quiet")}) {
      argv.push_back(a);
    }
    if (auto f = RunStatus::Get().WorkerFlag(o.work_dir, run_number, w); !f.empty()) argv.push_back(f);
    for (const auto& a : o.worker_args) argv.push_back(a);
    for (const auto& a : o.worker_security_args) argv.push_back(a);
    if (!o.worker_cpu.empty()) argv.push_back("--cpu=" + o.worker_cpu);
    outputs.push_back(files->results);
  }
  fs::path log = o.work_dir / absl::StrCat("mpirun-", run_number, ".log");
  auto job = ChildProcess::Start("mpirun", argv, {.capture_stdout = false, .log_file = log.string(), .hold_stdin = false});
  if (!job.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        job.status().message(), " (grpc+mpi needs Open MPI's mpirun: install openmpi-bin, or "
        "give --mpirun=PATH)"));
  }
  absl::Duration budget = Budget(o, s, plans);
  absl::Time deadline = absl::Now() + budget;
  absl::Status failure;
  std::optional<int> status;
  RunStatus::Get().Start(s, num_ps);
  while (!(status = job->Poll())) {
    if (Interrupted()) {
      failure = absl::CancelledError("interrupted");
      break;
    }
    if (absl::Now() > deadline) {
      failure = absl::DeadlineExceededError(absl::StrCat(
          "the run did not finish within ", absl::FormatDuration(budget), " (see --timeout)"));
      break;
    }
    RunStatus::Get().Tick();
    absl::SleepFor(absl::Milliseconds(10));
  }
  RunStatus::Get().Stop();
  // mpirun takes its ranks down with it.
  if (!status) status = job->Stop(SIGTERM, absl::Seconds(5));
  std::string text = ReadFileText(log);
  if (failure.ok() && *status != 0) {
    std::string rank = FailedRankFromLog(text, num_ps, num_ps + num_workers);
    failure = absl::InternalError(absl::StrCat(
        rank.empty() ? absl::StrCat("mpirun (pid ", job->pid(), ") ", ChildProcess::Describe(*status))
                     : rank + ", and mpirun ended the job",
        " (", RankRange(0, num_ps, "PS"), ", ", RankRange(num_ps, num_workers, "workers"),
        "; mpirun's output is above)"));
  }
  RelayLog(text);
  if (!failure.ok()) return failure;
  return CollectResults(outputs, plans, s.benchmark == Benchmark::kThroughput && !o.training);
}

// Runs one scenario with fresh processes. Returns per-worker records, plus one total record
// per plan for throughput. A worker that dies fails the run, but the others go on to the end
// of their measurement (their PS keep serving them): their records, which say that a peer
// was lost ("peers_lost"), then go to *survivors (no total: it would be missing a worker).
absl::StatusOr<std::vector<json>> RunScenario(Scenario s, const Options& o, size_t plans,
                                              int run_number, std::vector<json>* survivors = nullptr) {
  if (TransportLaunchesAsJob(s.transport)) return RunMpiJob(std::move(s), o, plans, run_number);
  // Latency and bandwidth are point to point.
  int num_ps = EveryWorkerToEveryPs(s.benchmark) ? o.num_ps : 1;
  int num_workers = EveryWorkerToEveryPs(s.benchmark) ? o.num_workers : 1;
  std::vector<ChildProcess> ps;
  for (int i = 0; i < num_ps; ++i) {
    std::vector<std::string> argv = {(o.bin_dir / "psbench-ps").string(), "--listen=127.0.0.1",
                                     "--port=0", "--transport=" + s.transport,
                                     absl::StrCat("--threads=", o.ps_threads)};
    if (!o.ps_cpu.empty()) argv.push_back("--cpu=" + o.ps_cpu);
    if (s.busy_poll) argv.push_back("--busy-poll");
    if (s.transport == "grpc+verbs") {
      for (const auto& a : RdmaCommandLine(s.rdma)) argv.push_back(a);
    }
    for (const auto& a : o.ps_security_args) argv.push_back(a);
    auto child = ChildProcess::Start(absl::StrCat("PS ", i), argv, {.capture_stdout = true, .log_file = "", .hold_stdin = false});
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
    auto files = WriteWorkerScenario(s, o, run_number, w);
    if (!files.ok()) return files.status();
    const fs::path& output = files->results;
    std::vector<std::string> argv = {(o.bin_dir / "psbench-worker").string(),
                                     "--scenario=" + files->scenario.string(),
                                     "--json=" + output.string(), "--quiet"};
    if (auto f = RunStatus::Get().WorkerFlag(o.work_dir, run_number, w); !f.empty()) argv.push_back(f);
    for (const auto& a : o.worker_args) argv.push_back(a);
    for (const auto& a : o.worker_security_args) argv.push_back(a);
    if (!o.worker_cpu.empty()) argv.push_back("--cpu=" + o.worker_cpu);
    auto child = ChildProcess::Start(absl::StrCat("worker ", w), argv, {});
    if (!child.ok()) return child.status();
    workers.push_back(*std::move(child));
    outputs.push_back(output);
  }

  // Wait for the workers; stop everything at the first failure, except a lost worker (it
  // exited non-zero while its PS stayed up): the others then get to finish their measurement.
  RunStatus::Get().Start(s, num_ps);
  absl::Time deadline =
      absl::Now() + Budget(o, s, plans);
  absl::Status failure;
  absl::Status lost;  // the first worker that failed while its PS kept serving the others
  std::vector<bool> succeeded(workers.size(), false);
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
    for (size_t wi = 0; wi < workers.size(); ++wi) {
      auto& w = workers[wi];
      if (auto st = w.Poll()) {
        succeeded[wi] = *st == 0;
        if (*st != 0 && failure.ok() && lost.ok()) {
          // Give a PS that is going down a moment to be reaped, so it is named as the cause.
          absl::SleepFor(absl::Milliseconds(200));
          for (auto& p : ps) {
            if (auto pst = p.Poll(); pst && failure.ok()) {
              failure = absl::InternalError(absl::StrCat(
                  p.name(), " (pid ", p.pid(), ") ", ChildProcess::Describe(*pst), " during the run"));
            }
          }
        }
        if (*st != 0 && failure.ok() && lost.ok()) {
          lost = absl::InternalError(
              absl::StrCat(w.name(), " (pid ", w.pid(), ") ", ChildProcess::Describe(*st)));
          // Alone, or no one to keep records for: nothing to wait for. Else the others get
          // as long as a measurement takes from here (one that lost its peer at a barrier
          // would otherwise wait out the barrier's long deadline).
          if (workers.size() == 1 || !survivors) {
            failure = lost;
          } else if (s.iterations <= 0) {
            deadline = std::min(deadline, absl::Now() + s.warmup + s.duration + absl::Seconds(10));
          }
        }
        ++done;
      }
    }
    if (Interrupted()) failure = absl::CancelledError("interrupted");
    if (failure.ok() && absl::Now() > deadline) {
      failure = absl::DeadlineExceededError(absl::StrCat(
          "the run did not finish within ",
          absl::FormatDuration(Budget(o, s, plans)),
          " (see --timeout)"));
    }
    RunStatus::Get().Tick();
    if (done < workers.size() && failure.ok()) absl::SleepFor(absl::Milliseconds(10));
  }
  RunStatus::Get().Stop();
  for (auto& w : workers) w.Stop(SIGTERM, absl::Seconds(2));
  for (auto& p : ps) {
    int st = p.Stop(SIGTERM, absl::Seconds(5));
    if (st != 0 && failure.ok()) {
      failure = absl::InternalError(
          absl::StrCat(p.name(), " (pid ", p.pid(), ") ", ChildProcess::Describe(st), " at shutdown"));
    }
  }
  if (!failure.ok()) return failure;
  if (!lost.ok()) {
    // The workers that finished wrote valid records of their own; keep them.
    std::vector<fs::path> kept;
    for (size_t w = 0; w < workers.size(); ++w) {
      if (succeeded[w]) kept.push_back(outputs[w]);
    }
    if (!kept.empty()) {
      auto records = CollectResults(kept, plans, /*aggregate=*/false);
      if (records.ok()) *survivors = *std::move(records);
    }
    return absl::InternalError(absl::StrCat(
        lost.message(), "; ", kept.size(), " of ", workers.size(),
        " workers finished, their records (which say a peer was lost) are kept"));
  }

  return CollectResults(outputs, plans, s.benchmark == Benchmark::kThroughput && !o.training);
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

// --- --transports: one scenario under several transports, one comparison table ---------------

// One entry of --transports: a transport and the wire mode it runs in.
struct CompareEntry {
  std::string transport;
  WireMode mode = WireMode::kNonSerialized;
  std::string label;  // how the table and the JSON name it: "grpc", or "grpc/serialized"
};

// Parses "TRANSPORT[/MODE],TRANSPORT[/MODE],...": at least two entries, distinct (transport,
// mode) pairs, every transport one of TransportNames(). Entries without /MODE use
// `default_mode` (--mode). Labels carry the mode only when the entries' modes differ.
absl::StatusOr<std::vector<CompareEntry>> ParseTransportList(const std::string& text,
                                                            WireMode default_mode) {
  const std::string flag = "--transports=" + text;
  const std::string at_least_two =
      ": give at least two entries to compare, TRANSPORT or TRANSPORT/MODE separated by "
      "commas (e.g. grpc/non-serialized,grpc/serialized); for one transport use --transport";
  if (text.empty()) return absl::InvalidArgumentError(flag + at_least_two);
  std::vector<CompareEntry> out;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    if (item.empty()) {
      return absl::InvalidArgumentError(
          flag + ": an empty entry; give TRANSPORT or TRANSPORT/MODE separated by commas");
    }
    CompareEntry e{std::string(item), default_mode, ""};
    if (auto slash = item.find('/'); slash != absl::string_view::npos) {
      e.transport = std::string(item.substr(0, slash));
      std::string mode(item.substr(slash + 1));
      auto parsed = ParseWireMode(mode);
      if (!parsed.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(flag, ": in '", std::string(item), "', '",
                                                       mode, "' is not a mode; use "
                                                       "serialized or non-serialized"));
      }
      e.mode = *parsed;
    }
    std::vector<std::string> names = TransportNames();
    if (std::find(names.begin(), names.end(), e.transport) == names.end()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": ", e.transport,
                                                     " is not a transport; available: ",
                                                     absl::StrJoin(names, ", ")));
    }
    for (const CompareEntry& prev : out) {
      if (prev.transport == e.transport && prev.mode == e.mode) {
        return absl::InvalidArgumentError(absl::StrCat(
            flag, ": ", e.transport, "/", std::string(WireModeName(e.mode)),
            " is listed twice (an entry without /MODE uses --mode=",
            std::string(WireModeName(default_mode)), ")"));
      }
    }
    out.push_back(std::move(e));
  }
  if (out.size() < 2) return absl::InvalidArgumentError(flag + at_least_two);
  bool one_mode = std::all_of(out.begin(), out.end(),
                              [&](const CompareEntry& e) { return e.mode == out[0].mode; });
  for (CompareEntry& e : out) {
    e.label = one_mode ? e.transport
                       : absl::StrCat(e.transport, "/", std::string(WireModeName(e.mode)));
  }
  return out;
}

// The headline figures of a benchmark: what the comparison table shows and compares.
struct Metric {
  const char* key;     // in the comparison record: "p50_us", "mean_us", "mb_per_s", "rpc_per_s"
  const char* column;  // table column
  int decimals;
};

std::vector<Metric> HeadlineMetrics(const std::string& benchmark) {
  if (benchmark == "latency") return {{"p50_us", "p50", 2}, {"mean_us", "mean", 2}};
  if (benchmark == "bandwidth") return {{"mb_per_s", "MB/s", 2}};
  return {{"rpc_per_s", "RPC/s", 1}, {"mb_per_s", "MB/s", 2}};
}

bool LowerIsBetter(const std::string& benchmark) { return benchmark == "latency"; }

double MetricValue(const json& record, const std::string& key) {
  if (key == "p50_us") return record["latency_us"]["p50"].get<double>();
  if (key == "mean_us") return record["latency_us"]["mean"].get<double>();
  return record[key].get<double>();
}

// The records a comparison row is made of: the worker's for latency and bandwidth (one
// worker), the total over the workers for throughput.
std::vector<json> HeadlineRecords(const std::vector<json>& results) {
  std::vector<json> out;
  for (const json& r : results) {
    bool throughput = r.value("benchmark", "") == "throughput";
    if (r.value("scope", "") == (throughput ? "total" : "worker")) out.push_back(r);
  }
  return out;
}

// One row of the comparison: the same benchmark and payload, one record per entry (empty
// where that entry's run did not complete).
struct CompareRow {
  std::vector<std::optional<json>> records;
  const json& first() const { return *records[0]; }
};

std::optional<double> Ratio(const CompareRow& row, size_t entry, const std::string& key) {
  if (!row.records[0] || !row.records[entry]) return std::nullopt;
  double base = MetricValue(*row.records[0], key);
  if (base == 0) return std::nullopt;
  return MetricValue(*row.records[entry], key) / base;
}

std::string PayloadBytesText(const json& r) {
  return r["payload_bytes"].is_number_integer()
             ? std::to_string(r["payload_bytes"].get<uint64_t>())
             : fmt::format("~{:.0f}", r["payload_bytes"].get<double>());
}

// "warm-up 5 iterations | measure 20 iterations | ..." from a record's config.
std::string MeasurementText(const json& r) {
  const json& cfg = r["config"];
  std::string text = fmt::format(
      "warm-up {} | measure {}",
      cfg.value("warmup_iterations", -1) >= 0
          ? fmt::format("{} iterations", cfg.value("warmup_iterations", 0))
          : fmt::format("{:g}s", cfg.value("warmup_s", 0.0)),
      cfg.value("iterations", 0) > 0 ? fmt::format("{} iterations", cfg.value("iterations", 0))
                                     : fmt::format("{:g}s", cfg.value("duration_s", 0.0)));
  std::string bench = r["benchmark"];
  if (bench == "bandwidth") text += fmt::format(" | window {}", cfg.value("window", 0));
  if (bench == "throughput") {
    text += fmt::format(" | {} workers x {} PS, {} outstanding per PS", r.value("workers", 0),
                        r.value("ps", 0), cfg.value("outstanding", 0));
  }
  text += fmt::format(" | validate {} | busy-poll {} | tls {}", r.value("validate", false) ? "on" : "off",
                      cfg.value("busy_poll", false) ? "on" : "off", r.value("tls", false) ? "on" : "off");
  return text;
}

// The comparison table: a block per benchmark (its rows in run order), a column group per
// entry with the headline figures, then a group per later entry with its ratios to the first.
void PrintComparison(std::FILE* out, const std::vector<CompareEntry>& entries,
                     const std::vector<CompareRow>& rows) {
  const std::string& base = entries[0].label;
  std::vector<std::string> labels;
  for (const auto& e : entries) labels.push_back(e.label);
  bool one_mode = entries[0].label == entries[0].transport;
  fmt::print(out, "\n# psbench comparison: {} (baseline = {}){}\n", absl::StrJoin(labels, " | "),
             base,
             one_mode ? absl::StrCat(" | mode ", std::string(WireModeName(entries[0].mode)))
                      : std::string());
  fmt::print(out,
             "# ratio columns \"B vs A\" = B's figure / A's figure, A = the baseline (the first "
             "of --transports)\n"
             "#   latency usec: lower is better, below 1x = B faster | MB/s, RPC/s: higher is "
             "better, above 1x = B faster\n");
  constexpr int kCol = 10;
  constexpr int kFixed = 8 + 1 + 12;
  for (const char* bench : {"latency", "bandwidth", "throughput"}) {
    std::vector<const CompareRow*> block;
    for (const auto& row : rows) {
      if (row.first()["benchmark"] == bench) block.push_back(&row);
    }
    if (block.empty()) continue;
    const std::vector<Metric> metrics = HeadlineMetrics(bench);
    const int n = static_cast<int>(metrics.size());
    struct Group {
      std::string title;
      int width;
    };
    std::vector<Group> groups;
    for (const auto& e : entries) groups.push_back({e.label, 0});
    for (size_t t = 1; t < entries.size(); ++t) {
      groups.push_back({absl::StrCat(entries[t].label, " vs ", base), 0});
    }
    for (auto& g : groups) {
      g.width = std::max(static_cast<int>(g.title.size()), n * kCol + (n - 1));
    }
    // Cells of one group, right-aligned; the first column takes any width the title adds.
    auto cells = [&](const Group& g, const std::vector<std::string>& values) {
      std::string text;
      for (int i = 0; i < n; ++i) {
        int w = i == 0 ? g.width - (n - 1) * (kCol + 1) : kCol;
        text += fmt::format("{}{:>{}}", i == 0 ? "" : " ", values[i], w);
      }
      return text;
    };
    std::string what =
        std::string(bench) == "latency"     ? "round trip usec, lower is better"
        : std::string(bench) == "bandwidth" ? "MB/s (10^6 B/s), higher is better"
                                            : "RPC/s and MB/s, total over the workers, higher is better";
    fmt::print(out, "\n# {}: {} | {}\n", bench, what, MeasurementText(block[0]->first()));
    std::string line1 = fmt::format("{:<{}}", "#", kFixed);
    std::string line2 = fmt::format("{:>8} {:>12}", "#scheme", "#bytes");
    std::vector<std::string> columns;
    for (const auto& m : metrics) columns.push_back(m.column);
    for (const auto& g : groups) {
      line1 += fmt::format("  {:>{}}", g.title, g.width);
      line2 += "  " + cells(g, columns);
    }
    fmt::print(out, "{}\n{}\n", line1, line2);
    for (const CompareRow* row : block) {
      const json& first = row->first();
      std::string line = fmt::format("{:>8} {:>12}", first["scheme"].get<std::string>(),
                                     PayloadBytesText(first));
      for (size_t t = 0; t < entries.size(); ++t) {
        std::vector<std::string> values;
        for (const auto& m : metrics) {
          values.push_back(row->records[t]
                               ? fmt::format("{:.{}f}", MetricValue(*row->records[t], m.key),
                                             m.decimals)
                               : std::string("-"));
        }
        line += "  " + cells(groups[t], values);
      }
      for (size_t t = 1; t < entries.size(); ++t) {
        std::vector<std::string> values;
        for (const auto& m : metrics) {
          auto ratio = Ratio(*row, t, m.key);
          values.push_back(ratio ? fmt::format("{:.2f}x", *ratio) : std::string("-"));
        }
        line += "  " + cells(groups[entries.size() - 1 + t], values);
      }
      fmt::print(out, "{}\n", line);
    }
  }
  std::fflush(out);
}

// The machine-readable row: the figures of every entry and their ratios to the first.
json ComparisonRecord(const std::vector<CompareEntry>& entries, const CompareRow& row,
                      const std::vector<std::string>& command) {
  const json& first = row.first();
  std::string bench = first["benchmark"];
  json transports = json::array();
  for (const auto& e : entries) {
    transports.push_back({{"label", e.label},
                          {"transport", e.transport},
                          {"mode", std::string(WireModeName(e.mode))}});
  }
  json values = json::object(), ratios = json::object(), iterations = json::array();
  for (const auto& m : HeadlineMetrics(bench)) {
    json v = json::array(), r = json::array();
    for (size_t t = 0; t < entries.size(); ++t) {
      v.push_back(MetricValue(*row.records[t], m.key));
      auto ratio = Ratio(row, t, m.key);
      r.push_back(ratio ? json(*ratio) : json(nullptr));
    }
    values[m.key] = v;
    ratios[m.key] = r;
  }
  for (const auto& rec : row.records) iterations.push_back((*rec)["iterations"]);
  return {{"kind", "comparison"},
          {"benchmark", bench},
          {"scheme", first["scheme"]},
          {"buffers", first["buffers"]},
          {"payload_summary", first["payload_summary"]},
          {"payload_bytes", first["payload_bytes"]},
          {"scope", first["scope"]},
          {"workers", first["workers"]},
          {"ps", first["ps"]},
          {"seed", first["seed"]},
          {"validate", first["validate"]},
          {"tls", first.value("tls", false)},
          {"transports", transports},
          {"baseline", entries[0].label},
          {"ratio", "value / baseline value (ratios[m][i] = values[m][i] / values[m][0])"},
          {"better", LowerIsBetter(bench) ? "lower" : "higher"},
          {"values", values},
          {"ratios", ratios},
          {"iterations", iterations},
          {"command", command},
          {"timestamp", absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone())}};
}

// Runs every scenario under every entry, entry by entry (fresh processes for each run), then
// prints the comparison and appends its records. Stops at the first failed run: prints what
// completed, names the entry on stderr and returns 1 (130 when interrupted).
int RunComparison(const std::vector<CompareEntry>& entries,
                  const std::vector<std::pair<Scenario, size_t>>& runs, const Options& o,
                  const std::string& json_path, const std::vector<std::string>& command) {
  std::vector<CompareRow> rows;
  std::vector<std::vector<size_t>> rows_of_run(runs.size());
  const size_t total = entries.size() * runs.size();
  std::string failure;
  int exit_code = 0;
  for (size_t t = 0; t < entries.size() && failure.empty(); ++t) {
    const CompareEntry& e = entries[t];
    for (size_t r = 0; r < runs.size(); ++r) {
      Scenario s = runs[r].first;
      s.transport = e.transport;
      s.mode = e.mode;
      const size_t number = t * runs.size() + r;
      std::string what = absl::StrCat(std::string(BenchmarkName(s.benchmark)), " ",
                                      s.sweep ? std::string("sweep")
                                              : std::string(SchemeName(s.payload.scheme)));
      absl::Time start = absl::Now();
      RunStatus::Get().SetRun(static_cast<int>(number) + 1, static_cast<int>(total));
      auto results = RunScenario(s, o, runs[r].second, static_cast<int>(number));
      std::vector<json> headline;
      if (results.ok()) {
        for (json& rec : *results) {
          rec["worker_command"] = rec["command"];
          rec["command"] = command;
        }
        headline = HeadlineRecords(*results);
        if (t > 0 && headline.size() != rows_of_run[r].size()) {
          results = absl::DataLossError(absl::StrCat(headline.size(), " results where ",
                                                     entries[0].label, " had ",
                                                     rows_of_run[r].size()));
        }
      }
      if (!results.ok()) {
        failure = absl::StrCat("transport ", e.label, ": ", what, ": ",
                               std::string(results.status().message()));
        exit_code = Interrupted() ? 130 : kExitRuntime;
        break;
      }
      if (!json_path.empty()) {
        if (absl::Status st = AppendJsonLines(json_path, *results); !st.ok()) {
          failure = std::string(st.message());
          exit_code = kExitRuntime;
          break;
        }
      }
      for (size_t i = 0; i < headline.size(); ++i) {
        if (t == 0) {
          rows_of_run[r].push_back(rows.size());
          rows.push_back({std::vector<std::optional<json>>(entries.size())});
        }
        rows[rows_of_run[r][i]].records[t] = std::move(headline[i]);
      }
      fmt::print("# run {}/{}: {}: {} done ({:.1f} s)\n", number + 1, total, e.label, what,
                 absl::ToDoubleSeconds(absl::Now() - start));
      std::fflush(stdout);
    }
  }
  if (!rows.empty()) PrintComparison(stdout, entries, rows);
  if (failure.empty() && !json_path.empty()) {
    std::vector<json> records;
    for (const auto& row : rows) records.push_back(ComparisonRecord(entries, row, command));
    if (absl::Status st = AppendJsonLines(json_path, records); !st.ok()) {
      failure = std::string(st.message());
      exit_code = kExitRuntime;
    } else {
      fmt::print("# results (per transport, then \"kind\":\"comparison\"): {}\n", json_path);
    }
  }
  std::fflush(stdout);
  if (!failure.empty()) fmt::print(stderr, "{}: {}\n", kProgram, failure);
  return exit_code;
}

struct Headline {
  std::string scheme;
  std::map<std::string, std::string> by_benchmark;
};

void CheckMpirun(const Options& o) {
  if (!o.mpirun.empty() && access(o.mpirun.c_str(), X_OK) == 0) return;
  Die(kProgram,
      absl::StrCat("--mpirun=", o.mpirun.empty() ? "(none)" : o.mpirun,
                   " is not an executable MPI launcher; grpc+mpi needs Open MPI's mpirun "
                   "(deploy/install-deps.sh installs openmpi-bin)"),
      kExitUsage);
}

// Once the input is known good: where the binaries are, a work directory for scenario and
// result files (removed by the caller), and signals that stop a run cleanly.
void PrepareToLaunch(Options& o) {
  o.bin_dir = BinDir();
  char tmpl[] = "/tmp/psbench-run-XXXXXX";
  if (const char* t = mkdtemp(tmpl)) o.work_dir = t;
  else Die(kProgram, "cannot create a temporary directory", kExitRuntime);
  StopOnSignals();
}

// psbench run --trainer=MODEL: PS and workers as for throughput (every worker to every PS),
// each worker training MODEL and exchanging its gradients for parameters every step. Prints
// images/s per worker and in total, and the per-step split of compute and communication.
int RunTraining(Options& o, Scenario s, const std::string& json_path,
                const std::vector<std::string>& command) {
  auto settings = TrainerSettingsFromFlags(/*model_flag=*/false);
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
  for (const char* flag : {"benchmark", "transports", "scheme", "sizes", "duration", "iterations"}) {
    if (FlagWasSet(flag)) {
      Die(kProgram, absl::StrCat("--", flag, " does not apply to --trainer (a training run's "
                                 "payloads are the model's gradients; see --steps)"),
          kExitUsage);
    }
  }
  s.benchmark = Benchmark::kThroughput;  // the topology: every worker to every PS
  if (absl::Status st = ValidateScenario(s); !st.ok()) Die(kProgram, st, kExitUsage);
  if (TransportLaunchesAsJob(s.transport)) CheckMpirun(o);
  o.training = true;
  o.worker_args = TrainerWorkerArgs(*settings);
  PrepareToLaunch(o);
  fmt::print("# psbench training: {} batch {} per worker, {} workers x {} PS over {} ({}), {} SGD, "
             "{} steps after {} warm-up, tls {}\n",
             settings->model, settings->batch, o.num_workers, o.num_ps, s.transport,
             std::string(WireModeName(s.mode)), settings->sync ? "synchronous" : "asynchronous",
             settings->steps, settings->warmup_steps, s.tls ? "on" : "off");
  auto results = RunScenario(s, o, 1, 0);
  if (!results.ok()) {
    fmt::print(stderr, "{}: training: {}\n", kProgram, std::string(results.status().message()));
    return Interrupted() ? 130 : kExitRuntime;
  }
  double total = 0;
  fmt::print("{:>8} {:>12} {:>12} {:>12} {:>12} {:>10}\n", "#worker", "images/s", "step ms",
             "compute ms", "comm ms", "loss");
  for (json& rec : *results) {
    rec["worker_command"] = rec["command"];
    rec["command"] = command;
    total += rec["images_per_s"].get<double>();
    fmt::print("{:>8} {:>12.2f} {:>12.1f} {:>12.1f} {:>12.1f} {:>10.3f}\n",
               rec["worker_index"].get<int>(), rec["images_per_s"].get<double>(),
               1e3 * rec["step"]["mean_s"].get<double>(), 1e3 * rec["compute"]["mean_s"].get<double>(),
               1e3 * rec["communication"]["mean_s"].get<double>(), rec["loss_last"].get<double>());
  }
  json summary = {{"kind", "train_total"},
                  {"model", settings->model},
                  {"batch", settings->batch},
                  {"transport", s.transport},
                  {"mode", WireModeName(s.mode)},
                  {"tls", s.tls},
                  {"sync", settings->sync},
                  {"num_ps", o.num_ps},
                  {"num_workers", o.num_workers},
                  {"images_per_s", total},
                  {"command", command}};
  fmt::print("{:>8} {:>12.2f}\n", "total", total);
  results->push_back(summary);
  return SaveRecords(kProgram, json_path, *results);
}

// psbench run --benchmark=updates: the "no lost update" check (worker/updates_worker.h),
// every worker to every PS. Prints one line per worker and what each PS applied; a worker
// that finds a parameter that is not exact names it on stderr and the run exits 1.
int RunUpdates(Options& o, Scenario s, const std::string& json_path,
               const std::vector<std::string>& command) {
  auto settings = UpdatesSettingsFromFlags(o.num_workers);
  if (!settings.ok()) Die(kProgram, settings.status(), kExitUsage);
  if (absl::Status st = ValidateScenario(s); !st.ok()) Die(kProgram, st, kExitUsage);
  auto plans = s.Plans();
  if (!plans.ok()) Die(kProgram, plans.status(), kExitUsage);
  const size_t tensors = plans->front().Sizes(0).size();
  if (tensors < static_cast<size_t>(o.num_ps)) {
    Die(kProgram, absl::StrCat("--benchmark=updates: ", tensors, " tensors (the payload's buffers) for ",
                               o.num_ps, " PS; each PS needs at least one (raise --buffers)"),
        kExitUsage);
  }
  if (TransportLaunchesAsJob(s.transport)) CheckMpirun(o);
  o.worker_args = UpdatesWorkerArgs(*settings);
  PrepareToLaunch(o);
  fmt::print("# psbench updates (no lost update): {} workers x {} PS over {} ({}), {} SGD, {} steps, "
             "model {} ({} tensors), seed {}, tls {}\n",
             o.num_workers, o.num_ps, s.transport, std::string(WireModeName(s.mode)),
             settings->sync ? "synchronous" : "asynchronous", settings->steps,
             plans->front().Summary(), tensors, s.payload.seed, s.tls ? "on" : "off");
  auto results = RunScenario(s, o, 1, 0);
  if (!results.ok()) {
    fmt::print(stderr, "{}: updates: {}\n", kProgram, std::string(results.status().message()));
    return Interrupted() ? 130 : kExitRuntime;
  }
  fmt::print("{:>8} {:>8} {:>10} {:>10} {:>10} {:>12} {:>8}  {}\n", "#worker", "steps", "seconds",
             "steps/s", "MB/s", "elements", "result", "updates each PS had applied when read");
  for (json& rec : *results) {
    rec["worker_command"] = rec["command"];
    rec["command"] = command;
    std::string applied;
    for (const json& p : rec["placement"]) {
      absl::StrAppend(&applied, applied.empty() ? "" : " ", p["applied"]["updates"].get<uint64_t>());
    }
    fmt::print("{:>8} {:>8} {:>10.3f} {:>10.1f} {:>10.1f} {:>12} {:>8}  {}\n",
               rec["worker_index"].get<int>(), rec["steps"].get<int>(), rec["seconds"].get<double>(),
               rec["steps_per_s"].get<double>(), rec["mb_per_s"].get<double>(),
               rec["elements_checked"].get<uint64_t>(), rec["result"].get<std::string>(), applied);
  }
  return SaveRecords(kProgram, json_path, *results);
}

int Main(int argc, char** argv) {
  // psbench report has flags of its own (and none of run's).
  if (argc > 1 && std::string_view(argv[1]) == "report") return RunReportCommand(argc, argv, BinDir());
  // So do the cluster launchers (psbench ssh | slurm | mpirun).
  if (argc > 1 && IsClusterCommand(argv[1])) return RunClusterCommand(argc, argv, BinDir().string());
  auto positional = ParseFlagsOrExit(argc, argv, kUsage,
                                     {"/deploy/local/psbench_main.cc", "/bench/scenario_flags.cc",
                                      kRdmaFlagsFile, kTrainerFlagsFile, kTlsFlagsFile,
                                      kLimitFlagsFile});
  if (!positional.empty() && positional[0] == "train") {
    if (positional.size() > 1) Die(kProgram, "unexpected argument '" + positional[1] + "'", kExitUsage);
    return RunTrainCommand(absl::GetFlag(FLAGS_json));
  }
  if (positional.empty() || positional[0] != "run") {
    Die(kProgram,
        positional.empty() ? std::string("missing command; usage: psbench run|train [flags]")
                           : "unknown command '" + positional[0] + "'; usage: psbench run|train [flags]",
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
  o.mpirun = absl::GetFlag(FLAGS_mpirun);
  o.mpirun_args = absl::StrSplit(absl::GetFlag(FLAGS_mpirun_args), ' ', absl::SkipEmpty());
  std::string json_path = absl::GetFlag(FLAGS_json);
  if (!json_path.empty()) {
    if (absl::Status s = AppendJsonLines(json_path, {}); !s.ok()) Die(kProgram, s, JsonPathExitCode(s));
  }

  auto base = ScenarioFromFlags();
  if (!base.ok()) Die(kProgram, base.status(), kExitUsage);
  auto tls = TlsOptionsFromFlags(TlsSide::kLauncher);
  if (!tls.ok()) Die(kProgram, tls.status(), kExitUsage);
  base->tls = tls->enabled();
  ServerOptions limits;
  if (absl::Status s = LimitsFromFlags(&limits); !s.ok()) Die(kProgram, s, kExitUsage);
  o.ps_security_args = TlsCommandLine(*tls, TlsSide::kServer);
  for (const auto& a : LimitsCommandLine(limits)) o.ps_security_args.push_back(a);
  o.worker_security_args = TlsCommandLine(*tls, TlsSide::kClient);
  std::vector<CompareEntry> compare;
  if (FlagWasSet("transports")) {
    if (FlagWasSet("transport")) {
      Die(kProgram, "give --transport or --transports, not both", kExitUsage);
    }
    auto entries = ParseTransportList(absl::GetFlag(FLAGS_transports), base->mode);
    if (!entries.ok()) Die(kProgram, entries.status(), kExitUsage);
    compare = *std::move(entries);
  }
  if (base->busy_poll) WarnIfSpinnersShareCpus(o);
  if (FlagWasSet("trainer")) {
    int code = RunTraining(o, *base, json_path, std::vector<std::string>(argv, argv + argc));
    std::error_code ec;
    fs::remove_all(o.work_dir, ec);
    return code;
  }
  if (base->benchmark == Benchmark::kUpdates) {
    int code = RunUpdates(o, *base, json_path, std::vector<std::string>(argv, argv + argc));
    std::error_code ec;
    fs::remove_all(o.work_dir, ec);
    return code;
  }

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
      for (const CompareEntry& e : compare) {
        Scenario c = s;
        c.transport = e.transport;
        c.mode = e.mode;
        if (absl::Status st = ValidateScenario(c); !st.ok()) {
          Die(kProgram, absl::StrCat(e.label, ": ", std::string(st.message())), kExitUsage);
        }
      }
      auto plans = s.Plans();
      if (!plans.ok()) Die(kProgram, plans.status(), kExitUsage);
      runs.emplace_back(s, plans->size());
    }
  }

  bool mpi = TransportLaunchesAsJob(base->transport);
  for (const CompareEntry& e : compare) mpi |= TransportLaunchesAsJob(e.transport);
  if (mpi) CheckMpirun(o);
  PrepareToLaunch(o);

  if (tour) {
    fmt::print("# psbench default tour: {} runs{}, warm-up {} + {} each; throughput {} workers x {} PS\n{}",
               runs.size() * std::max<size_t>(compare.size(), 1),
               compare.empty() ? std::string()
                               : absl::StrCat(" (", runs.size(), " per transport x ",
                                              compare.size(), ")"),
               absl::FormatDuration(base->warmup), absl::FormatDuration(base->duration),
               o.num_workers, o.num_ps, compare.empty() ? "\n" : "");
  }
  std::vector<std::string> command(argv, argv + argc);
  if (!compare.empty()) {
    int code = RunComparison(compare, runs, o, json_path, command);
    std::error_code ec;
    fs::remove_all(o.work_dir, ec);
    return code;
  }
  TablePrinter table;
  std::vector<Headline> headlines;
  int exit_code = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    const auto& [s, plans] = runs[r];
    RunStatus::Get().SetRun(static_cast<int>(r) + 1, static_cast<int>(runs.size()));
    std::vector<json> survivors;
    auto results = RunScenario(s, o, plans, static_cast<int>(r), &survivors);
    if (!results.ok() && !survivors.empty()) {
      // A lost worker fails the run; the others' records are still measurements.
      for (json& rec : survivors) {
        rec["worker_command"] = rec["command"];
        rec["command"] = command;
        table.Print(rec);
      }
      if (!json_path.empty()) {
        if (absl::Status st = AppendJsonLines(json_path, survivors); !st.ok()) {
          fmt::print(stderr, "{}: {}\n", kProgram, std::string(st.message()));
        }
      }
      std::fflush(stdout);
    }
    if (!results.ok()) {
      fmt::print(stderr, "{}: {} {}: {}\n", kProgram, std::string(BenchmarkName(s.benchmark)),
                 SchemeName(s.payload.scheme), std::string(results.status().message()));
      exit_code = Interrupted() ? 130 : kExitRuntime;
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

int main(int argc, char** argv) {
  // Ranks orphaned by a dying mpirun come back to us and are reaped before we exit.
  psbench::AdoptOrphans();
  int code = psbench::Main(argc, argv);
  psbench::ReapOrphans(absl::Seconds(5));
  return code;
}
