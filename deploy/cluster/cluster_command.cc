#include "deploy/cluster/cluster_command.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/cli.h"
#include "bench/report.h"
#include "bench/scenario.h"
#include "bench/scenario_flags.h"
#include "deploy/cluster/launchers.h"
#include "deploy/local/launch.h"
#include "fmt/core.h"
#include "nlohmann/json.hpp"
#include "transports/limit_flags.h"
#include "transports/rdma_flags.h"
#include "transports/tls_flags.h"
#include "transports/transport.h"

// Shared with psbench run (deploy/local/psbench_main.cc).
ABSL_DECLARE_FLAG(int, num_ps);
ABSL_DECLARE_FLAG(int, num_workers);
ABSL_DECLARE_FLAG(std::string, ps_cpu);
ABSL_DECLARE_FLAG(std::string, worker_cpu);
ABSL_DECLARE_FLAG(int, ps_threads);
ABSL_DECLARE_FLAG(std::string, json);
ABSL_DECLARE_FLAG(absl::Duration, timeout);
ABSL_DECLARE_FLAG(std::string, mpirun);
ABSL_DECLARE_FLAG(std::string, mpirun_args);

ABSL_FLAG(std::string, hostfile, "",
          "psbench ssh | mpirun: hosts, one per line and once per slot ($PBS_NODEFILE), or "
          "HOST slots=N; PS take the first --num-ps slots, workers the next ones");
ABSL_FLAG(std::string, ssh, "ssh -o BatchMode=yes",
          "psbench ssh: the ssh client command (split on spaces), e.g. \"ssh -p 2222 -i key\"");
ABSL_FLAG(std::string, remote_bin_dir, "",
          "where psbench-ps and psbench-worker are on the nodes (default: beside this psbench)");
ABSL_FLAG(std::string, ps_interface, "",
          "the network interface (ib0, eth0, ...) whose address each PS listens on and workers "
          "dial, so one job measures IPoIB or Ethernet; default: every interface, dialed by "
          "the PS node's host name");
ABSL_FLAG(std::string, label, "",
          "a name for this run's results (e.g. ipoib, rdma): every record carries it, and "
          "psbench report draws one line per label");
ABSL_FLAG(std::string, srun, "srun", "psbench slurm: the srun command");
ABSL_FLAG(std::string, srun_args, "",
          "psbench slurm: more srun options for every step (split on spaces), e.g. "
          "\"--mpi=pmix\"");

namespace psbench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kProgram[] = "psbench";
constexpr char kUsage[] =
    "psbench ssh --hostfile=FILE [flags] | psbench slurm [flags] | psbench mpirun --hostfile=FILE [flags]\n"
    "Runs one benchmark across cluster nodes: PS on the first --num-ps slots, workers on the\n"
    "next --num-workers (default: the rest). ssh starts each process over ssh (a host list such\n"
    "as $PBS_NODEFILE); slurm runs inside an allocation (sbatch deploy/slurm/psbench.sbatch or\n"
    "salloc) with srun steps; mpirun starts them with Open MPI (and is how grpc+mpi runs).\n"
    "The binaries must be at the same path on every node (--remote-bin-dir), and so must any\n"
    "file a flag names (--trace, --tls-*). Results: one table, and --json=FILE.\n"
    "Exit status: 0 success, 1 a process or measurement failed, 2 bad input.";


// The flags the user gave that every worker takes as they are: the scenario's, RDMA's and
// the trainer's, as --name=value.
std::vector<std::string> ForwardedWorkerFlags() {
  std::vector<std::string> out;
  for (const std::string& name : FlagsSet()) {
    std::string underscored = name;
    std::replace(underscored.begin(), underscored.end(), '-', '_');
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(underscored);
    if (flag == nullptr) continue;
    if (absl::EndsWith(flag->Filename(), "/bench/scenario_flags.cc") ||
        absl::EndsWith(flag->Filename(), kRdmaFlagsFile)) {
      out.push_back(absl::StrCat("--", name, "=", flag->CurrentValue()));
    }
  }
  return out;
}

// "psbench-ps listening on ADDR:PORT transport=T pid=P cpus=C host=H" -> the address workers
// dial: ADDR:PORT, or H:PORT when the PS listens on every interface.
std::optional<std::string> DialAddress(const std::string& line) {
  static constexpr absl::string_view kPrefix = "psbench-ps listening on ";
  if (!absl::StartsWith(line, kPrefix)) return std::nullopt;
  std::vector<std::string> words = absl::StrSplit(line.substr(kPrefix.size()), ' ');
  std::string address = words[0];
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  std::string host = address.substr(0, colon), port = address.substr(colon + 1);
  if (host == "0.0.0.0" || host == "[::]") {
    for (const auto& w : words) {
      if (absl::StartsWith(w, "host=")) return absl::StrCat(w.substr(5), ":", port);
    }
    return std::nullopt;
  }
  return address;
}

struct Cluster {
  std::unique_ptr<ClusterLauncher> launcher;
  Scenario scenario;
  int num_ps = 1;
  int num_workers = 1;
  std::string bin_dir;  // on the nodes
  std::vector<std::string> ps_flags, worker_flags;
  absl::Duration budget;
  std::string label;
  std::vector<std::string> command;
};

// Reads the PS group's lines until every PS has printed its address. Lines that are not the
// address are relayed to stderr.
absl::StatusOr<std::vector<std::string>> AwaitPsAddresses(ProcessGroup& ps, const Cluster& c,
                                                         absl::Time deadline) {
  std::vector<std::optional<std::string>> addresses(c.num_ps);
  int known = 0;
  while (known < c.num_ps) {
    if (Interrupted()) return absl::CancelledError("interrupted");
    auto line = ps.ReadLine(std::min(deadline, absl::Now() + absl::Milliseconds(200)));
    if (!line.ok()) {
      if (absl::Now() < deadline) continue;
      return absl::DeadlineExceededError(absl::StrCat(
          c.num_ps - known, " of ", c.num_ps, " PS printed no address within ",
          absl::FormatDuration(c.scenario.connect_timeout + absl::Seconds(30))));
    }
    if (!line->has_value()) {
      ps.Stop(SIGTERM, absl::Seconds(2));
      return absl::InternalError(absl::StrCat("the PS exited before listening (",
                                 ChildProcess::Describe(ps.Poll().value_or(-1)), ")"));
    }
    auto [member, text] = **line;
    auto address = DialAddress(text);
    if (address && member >= 0 && member < c.num_ps && !addresses[member]) {
      addresses[member] = *address;
      ++known;
    } else {
      fmt::print(stderr, "{}\n", member >= 0 ? absl::StrCat("PS ", member, ": ", text) : text);
    }
  }
  std::vector<std::string> out;
  for (auto& a : addresses) out.push_back(*a);
  return out;
}

// Reads the workers' lines until their group ends: JSON records per worker; anything else
// goes to stderr, named. A PS that exits meanwhile fails the run.
absl::StatusOr<std::vector<std::vector<json>>> GatherRecords(ProcessGroup& workers,
                                                            ProcessGroup* ps, int first_worker,
                                                            const Cluster& c) {
  std::vector<std::vector<json>> records(c.num_workers);
  // srun and mpirun forward output in chunks (srun: 1 KiB, each labelled as a line of its
  // own), so a record may come in pieces: a worker's text is gathered until it parses.
  std::vector<std::string> pending(c.num_workers);
  constexpr size_t kMaxRecordBytes = 64 << 20;
  absl::Time deadline = absl::Now() + c.budget;
  while (true) {
    if (Interrupted()) return absl::CancelledError("interrupted");
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the run did not finish within ", absl::FormatDuration(c.budget), " (see --timeout)"));
    }
    if (ps != nullptr) {
      if (auto st = ps->Poll()) {
        return absl::InternalError(absl::StrCat("the PS ", ChildProcess::Describe(*st), " during the run"));
      }
    }
    auto line = workers.ReadLine(absl::Now() + absl::Milliseconds(200));
    if (!line.ok()) continue;  // nothing yet
    if (!line->has_value()) break;
    auto [member, text] = **line;
    int w = member - first_worker;
    if (w >= 0 && w < c.num_workers && (absl::StartsWith(text, "{") || !pending[w].empty())) {
      pending[w] += text;
      if (!json::accept(pending[w])) {
        if (pending[w].size() <= kMaxRecordBytes) continue;
        return absl::DataLossError(absl::StrCat("worker ", w, " printed ", pending[w].size(),
                                                " bytes that are not a JSON record"));
      }
      json record = json::parse(pending[w]);
      pending[w].clear();
      if (!record.is_object() || !record.contains("benchmark") || !record.contains("scope")) {
        return absl::DataLossError(absl::StrCat("worker ", w, " printed a JSON line that is not a psbench record"));
      }
      records[w].push_back(std::move(record));
      continue;
    }
    if (member >= 0 && member < first_worker) continue;  // a PS of the job: its address line
    fmt::print(stderr, "{}\n", w >= 0 ? absl::StrCat("worker ", w, ": ", text) : text);
  }
  // stdout is closed: the processes are exiting.
  absl::Time exit_deadline = absl::Now() + absl::Seconds(30);
  std::optional<int> status;
  while (!(status = workers.Poll()) && absl::Now() < exit_deadline) absl::SleepFor(absl::Milliseconds(10));
  if (!status) status = workers.Stop(SIGTERM, absl::Seconds(5));
  if (*status != 0) {
    auto member = workers.FailedMember();
    return absl::InternalError(absl::StrCat(member ? absl::StrCat("worker ", *member - first_worker) : "a worker",
                               " ", ChildProcess::Describe(*status),
                               " (its messages are above)"));
  }
  return records;
}

// The records of a finished run: per worker, plus the total over workers per plan for
// throughput, each saying how it was launched.
absl::StatusOr<std::vector<json>> Assemble(std::vector<std::vector<json>> per_worker, size_t plans,
                                           const Cluster& c, const json& placement) {
  std::vector<std::string> names;
  for (int w = 0; w < c.num_workers; ++w) names.push_back(absl::StrCat("worker ", w));
  auto out = MergeWorkerRecords(std::move(per_worker), plans,
                                c.scenario.benchmark == Benchmark::kThroughput, names);
  if (!out.ok()) return out.status();
  for (json& r : *out) {
    if (r.contains("command")) r["worker_command"] = r["command"];
    r["command"] = c.command;
    // "placement" already says where each process ran (host, CPUs); this says how.
    r["cluster"] = placement;
    if (!c.label.empty()) r["label"] = c.label;
  }
  return out;
}

absl::StatusOr<std::vector<json>> RunOnCluster(Cluster& c, size_t plans) {
  const auto& slots = c.launcher->slots();
  std::vector<std::string> ps_hosts(slots.begin(), slots.begin() + c.num_ps);
  std::vector<std::string> worker_hosts(slots.begin() + c.num_ps,
                                        slots.begin() + c.num_ps + c.num_workers);
  std::string run_id = absl::StrCat("cluster-", getpid(), "-", absl::ToUnixMillis(absl::Now()));
  // Every PS gets the same command line: each picks a free port and says which.
  std::vector<std::string> ps_argv = {c.bin_dir + "/psbench-ps", "--port=0",
                                      "--transport=" + c.scenario.transport};
  ps_argv.insert(ps_argv.end(), c.ps_flags.begin(), c.ps_flags.end());
  auto worker_argv = [&](int w, const std::vector<std::string>& ps) {
    std::vector<std::string> argv = {c.bin_dir + "/psbench-worker", "--json=-", "--quiet",
                                     absl::StrCat("--num-workers=", c.num_workers),
                                     absl::StrCat("--worker-index=", w), "--run-id=" + run_id};
    if (!ps.empty()) argv.push_back("--ps=" + absl::StrJoin(ps, ","));
    argv.insert(argv.end(), c.worker_flags.begin(), c.worker_flags.end());
    return argv;
  };
  json placement = {{"launcher", c.launcher->name()}, {"ps_hosts", ps_hosts}, {"worker_hosts", worker_hosts}};

  if (TransportLaunchesAsJob(c.scenario.transport)) {
    // One MPI job: ranks 0..P-1 are the PS, the workers find them through the job.
    std::vector<std::string> hosts = ps_hosts;
    hosts.insert(hosts.end(), worker_hosts.begin(), worker_hosts.end());
    std::vector<std::vector<std::string>> argvs(c.num_ps, ps_argv);
    for (int w = 0; w < c.num_workers; ++w) argvs.push_back(worker_argv(w, {}));
    auto job = c.launcher->Start("job", hosts, argvs);
    if (!job.ok()) return job.status();
    auto records = GatherRecords(**job, nullptr, c.num_ps, c);
    (*job)->Stop(SIGTERM, absl::Seconds(5));
    if (!records.ok()) return records.status();
    return Assemble(*std::move(records), plans, c, placement);
  }

  std::vector<std::vector<std::string>> ps_argvs(c.num_ps, ps_argv);
  auto ps = c.launcher->Start("ps", ps_hosts, ps_argvs);
  if (!ps.ok()) return ps.status();
  auto addresses = AwaitPsAddresses(**ps, c,
                                    absl::Now() + c.scenario.connect_timeout + absl::Seconds(30));
  if (!addresses.ok()) {
    (*ps)->Stop(SIGTERM, absl::Seconds(5));
    return addresses.status();
  }
  placement["ps_addresses"] = *addresses;
  for (int i = 0; i < c.num_ps; ++i) {
    fmt::print("# PS {} ({}) listening on {}\n", i, ps_hosts[i], (*addresses)[i]);
  }
  std::fflush(stdout);
  std::vector<std::vector<std::string>> worker_argvs;
  for (int w = 0; w < c.num_workers; ++w) worker_argvs.push_back(worker_argv(w, *addresses));
  auto workers = c.launcher->Start("workers", worker_hosts, worker_argvs);
  if (!workers.ok()) {
    (*ps)->Stop(SIGTERM, absl::Seconds(5));
    return workers.status();
  }
  auto records = GatherRecords(**workers, ps->get(), 0, c);
  if (!records.ok()) (*workers)->Stop(SIGTERM, absl::Seconds(5));
  int ps_status = (*ps)->Stop(SIGTERM, absl::Seconds(10));
  if (!records.ok()) return records.status();
  // A PS told to stop exits 0 (what ssh passes on; srun and mpirun report their own ending).
  if ((*ps)->StopStatusIsMembers() && ps_status != 0) {
    return absl::InternalError(absl::StrCat("the PS ", ChildProcess::Describe(ps_status), " at shutdown"));
  }
  return Assemble(*std::move(records), plans, c, placement);
}

}  // namespace

bool IsClusterCommand(const std::string& command) {
  return command == "ssh" || command == "slurm" || command == "mpirun";
}

int RunClusterCommand(int argc, char** argv, const std::string& bin_dir) {
  auto positional = ParseFlagsOrExit(
      argc, argv, kUsage,
      {"/deploy/cluster/cluster_command.cc", "/deploy/local/psbench_main.cc",
       "/bench/scenario_flags.cc", kRdmaFlagsFile, kTlsFlagsFile, kLimitFlagsFile});
  const std::string command = positional.at(0);
  if (positional.size() > 1) Die(kProgram, "unexpected argument '" + positional[1] + "'", kExitUsage);
  for (const char* flag : {"transports", "trainer"}) {
    if (FlagWasSet(flag)) {
      Die(kProgram, absl::StrCat("--", flag, " is not supported by psbench ", command,
                                 " (yet): run one transport per job and compare the results with psbench report"),
          kExitUsage);
    }
  }
  if (absl::CommandLineFlag* b = absl::FindCommandLineFlag("benchmark"); b && b->CurrentValue() == "updates") {
    Die(kProgram, absl::StrCat("--benchmark=updates is not supported by psbench ", command,
                               " (yet): start psbench-worker --benchmark=updates on each node "
                               "(--num-workers, --worker-index, --steps, --sync|--async), or use psbench run"),
        kExitUsage);
  }
  const bool ssh = command == "ssh", slurm = command == "slurm";
  for (const char* flag : {"hostfile", "ssh"}) {
    if (FlagWasSet(flag) && slurm) {
      Die(kProgram, absl::StrCat("--", flag, " is not a psbench slurm flag (the allocation says where to run)"), kExitUsage);
    }
  }
  if (FlagWasSet("ssh") && !ssh) Die(kProgram, "--ssh is a psbench ssh flag", kExitUsage);
  if ((FlagWasSet("srun") || FlagWasSet("srun-args")) && !slurm) {
    Die(kProgram, "--srun and --srun-args are psbench slurm flags", kExitUsage);
  }

  auto scenario = ScenarioFromFlags();
  if (!scenario.ok()) Die(kProgram, scenario.status(), kExitUsage);
  if (absl::Status st = ValidateScenario(*scenario); !st.ok()) Die(kProgram, st, kExitUsage);
  auto plans = scenario->Plans();
  if (!plans.ok()) Die(kProgram, plans.status(), kExitUsage);

  Cluster c;
  c.scenario = *scenario;
  c.num_ps = absl::GetFlag(FLAGS_num_ps);
  c.label = absl::GetFlag(FLAGS_label);
  c.command.assign(argv, argv + argc);
  c.bin_dir = absl::GetFlag(FLAGS_remote_bin_dir);
  if (c.bin_dir.empty()) c.bin_dir = bin_dir;
  if (c.num_ps < 1 || c.num_ps > 64) Die(kProgram, "--num-ps must be in [1, 64]", kExitUsage);
  int ps_threads = absl::GetFlag(FLAGS_ps_threads);
  if (ps_threads < 1 || ps_threads > 256) Die(kProgram, "--ps-threads must be in [1, 256]", kExitUsage);

  // Where each PS listens: an interface's address, or every interface (dialed by host name).
  std::string iface = absl::GetFlag(FLAGS_ps_interface);
  if (FlagWasSet("ps-interface") && iface.empty()) {
    Die(kProgram, "--ps-interface is empty; give an interface such as ib0 or eth0", kExitUsage);
  }
  c.ps_flags = {"--listen=" + (iface.empty() ? std::string("0.0.0.0") : iface),
                absl::StrCat("--threads=", ps_threads)};
  if (std::string cpu = absl::GetFlag(FLAGS_ps_cpu); !cpu.empty()) c.ps_flags.push_back("--cpu=" + cpu);
  if (c.scenario.busy_poll) c.ps_flags.push_back("--busy-poll");
  if (c.scenario.transport == "grpc+verbs") {
    for (const auto& a : RdmaCommandLine(c.scenario.rdma)) c.ps_flags.push_back(a);
  }
  auto tls = TlsOptionsFromFlags(TlsSide::kLauncher);
  if (!tls.ok()) Die(kProgram, tls.status(), kExitUsage);
  ServerOptions limits;
  if (absl::Status s = LimitsFromFlags(&limits); !s.ok()) Die(kProgram, s, kExitUsage);
  for (const auto& a : TlsCommandLine(*tls, TlsSide::kServer)) c.ps_flags.push_back(a);
  for (const auto& a : LimitsCommandLine(limits)) c.ps_flags.push_back(a);
  c.worker_flags = ForwardedWorkerFlags();
  for (const auto& a : TlsCommandLine(*tls, TlsSide::kClient)) c.worker_flags.push_back(a);
  if (std::string cpu = absl::GetFlag(FLAGS_worker_cpu); !cpu.empty()) c.worker_flags.push_back("--cpu=" + cpu);

  std::string json_path = absl::GetFlag(FLAGS_json);
  if (!json_path.empty()) {
    if (absl::Status s = AppendJsonLines(json_path, {}); !s.ok()) Die(kProgram, s, JsonPathExitCode(s));
  }

  char tmpl[] = "/tmp/psbench-cluster-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) Die(kProgram, "cannot create a temporary directory", kExitRuntime);
  const std::string work_dir = tmpl;
  absl::StatusOr<std::unique_ptr<ClusterLauncher>> launcher;
  if (slurm) {
    std::vector<std::string> args = absl::StrSplit(absl::GetFlag(FLAGS_srun_args), ' ', absl::SkipEmpty());
    launcher = MakeSlurmLauncher(absl::GetFlag(FLAGS_srun), args, work_dir);
  } else {
    std::string hostfile = absl::GetFlag(FLAGS_hostfile);
    if (hostfile.empty()) {
      if (const char* pbs = getenv("PBS_NODEFILE")) hostfile = pbs;
    }
    if (hostfile.empty()) {
      fs::remove_all(work_dir);
      Die(kProgram, absl::StrCat("psbench ", command, " needs --hostfile=FILE (or $PBS_NODEFILE)"), kExitUsage);
    }
    auto slots = ReadHostFile(hostfile);
    if (!slots.ok()) {
      fs::remove_all(work_dir);
      Die(kProgram, slots.status(), kExitUsage);
    }
    if (ssh) {
      launcher = MakeSshLauncher(*std::move(slots), absl::GetFlag(FLAGS_ssh));
    } else {
      std::vector<std::string> args = absl::StrSplit(absl::GetFlag(FLAGS_mpirun_args), ' ', absl::SkipEmpty());
      launcher = MakeMpirunLauncher(*std::move(slots), absl::GetFlag(FLAGS_mpirun), args);
    }
  }
  if (!launcher.ok()) {
    fs::remove_all(work_dir);
    Die(kProgram, launcher.status(), kExitUsage);
  }
  c.launcher = *std::move(launcher);
  for (const auto& a : c.launcher->ProcessFlags()) {
    c.ps_flags.push_back(a);
    c.worker_flags.push_back(a);
  }

  auto usage_error = [&](const std::string& message) {
    fs::remove_all(work_dir);
    Die(kProgram, message, kExitUsage);
  };
  const int slots = static_cast<int>(c.launcher->slots().size());
  if (TransportLaunchesAsJob(c.scenario.transport) && !c.launcher->StartsMpiJobs()) {
    usage_error(absl::StrCat("--transport=", c.scenario.transport, " runs PS and workers as one MPI job: use psbench mpirun or psbench slurm"));
  }
  c.num_workers = FlagWasSet("num-workers") ? absl::GetFlag(FLAGS_num_workers) : slots - c.num_ps;
  if (c.num_workers < 1) {
    usage_error(absl::StrCat(c.launcher->name(), " gives ", slots, " slot(s): no slot is left for a worker after --num-ps=", c.num_ps));
  }
  if (c.num_ps + c.num_workers > slots) {
    usage_error(absl::StrCat(c.num_ps, " PS + ", c.num_workers, " workers need ", c.num_ps + c.num_workers,
                             " slots; ", c.launcher->name(), " gives ", slots));
  }
  if (c.scenario.benchmark != Benchmark::kThroughput && (c.num_ps > 1 || c.num_workers > 1)) {
    usage_error(absl::StrCat("--benchmark=", BenchmarkName(c.scenario.benchmark),
                             " is point to point: give --num-ps=1 --num-workers=1, or use --benchmark=throughput"));
  }
  c.budget = absl::GetFlag(FLAGS_timeout) > absl::ZeroDuration() ? absl::GetFlag(FLAGS_timeout)
                                                                 : RunBudget(c.scenario, plans->size());
  StopOnSignals();

  fmt::print("# psbench {}: {} PS on {} | {} workers on {} | {} {}{}\n", command, c.num_ps,
             absl::StrJoin(std::vector<std::string>(c.launcher->slots().begin(), c.launcher->slots().begin() + c.num_ps), ","),
             c.num_workers,
             absl::StrJoin(std::vector<std::string>(c.launcher->slots().begin() + c.num_ps,
                                                    c.launcher->slots().begin() + c.num_ps + c.num_workers), ","),
             c.scenario.transport, std::string(WireModeName(c.scenario.mode)),
             iface.empty() ? std::string() : " | PS on " + iface);
  std::fflush(stdout);
  auto results = RunOnCluster(c, plans->size());
  fs::remove_all(work_dir);
  if (!results.ok()) {
    fmt::print(stderr, "{}: {} {}: {}\n", kProgram, command, std::string(BenchmarkName(c.scenario.benchmark)),
               std::string(results.status().message()));
    return Interrupted() ? 130 : kExitRuntime;
  }
  TablePrinter table;
  for (const json& r : *results) table.Print(r);
  return SaveRecords(kProgram, json_path, *results);
}

}  // namespace psbench
