// psbench run: the local launcher. PS and workers are processes on this machine, on loopback
// (grpc+mpi: one mpirun job on this machine, the same mpirun launcher as a cluster's); the
// session (cli/session.h) is the same as on a cluster.
#include "cli/run_command.h"

#include <unistd.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "bench/cli.h"
#include "bench/report.h"
#include "bench/scenario_flags.h"
#include "bench/sysinfo.h"
#include "cli/launch/launch.h"
#include "cli/launch_flags.h"
#include "cli/session.h"
#include "fmt/core.h"
#include "transports/limit_flags.h"
#include "transports/rdma_flags.h"
#include "transports/transport_flags.h"
#include "transports/tls_flags.h"
#include "worker/trainer_flags.h"

namespace psbench {
namespace {

constexpr char kRunUsage[] =
    "psbench run [flags]\n"
    "Runs psbench on this machine: starts PS and worker processes on loopback, runs the\n"
    "benchmark and prints the results. With no --benchmark, runs the default tour (latency,\n"
    "bandwidth and throughput over the uniform, random and skew schemes, about 45 s).\n"
    "With --transports=A,B,... runs it once per transport and prints one comparison table.\n"
    "With --repetitions=N runs each benchmark N times and prints medians and their spread.\n"
    "With --trainer=MODEL each worker trains MODEL (embedded trainer) through the PS.\n"
    "With --benchmark=updates (--steps=N, --sync or --async) the workers check that the PS\n"
    "lost no update: the parameters must equal the exact sums of their integer gradients.\n"
    "The same flags run it across nodes: psbench ssh | slurm | mpirun (see their --help).\n"
    "Exit status: 0 success, 1 a process or measurement failed, 2 bad input.";

// Busy-polling processes that share a CPU take turns by the scheduler's time slice, which
// turns microseconds into milliseconds: say so before measuring.
void WarnIfSpinnersShareCpus(const LaunchOptions& o) {
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

// The CPUs named must exist here (on a cluster, the nodes say).
void CheckCpusExist(const LaunchOptions& o) {
  for (const auto& [flag, list] : {std::pair{"--ps-cpu", o.ps_cpu}, {"--worker-cpu", o.worker_cpu}}) {
    if (list.empty()) continue;
    auto cpus = ParseCpuList(list);  // the loop must not range over a temporary's contents
    for (int c : *cpus) {
      if (c >= sysconf(_SC_NPROCESSORS_ONLN)) {
        Die(kProgram, absl::StrCat(flag, "=", list, ": CPU ", c, " does not exist"), kExitUsage);
      }
    }
  }
}

}  // namespace

int RunRunCommand(int argc, char** argv, const std::string& bin_dir) {
  auto positional = ParseFlagsOrExit(argc, argv, kRunUsage,
                                     {kLaunchFlagsFile, "/bench/scenario_flags.cc", kTransportFlagsFile, kRdmaFlagsFile,
                                      kTrainerFlagsFile, kTlsFlagsFile, kLimitFlagsFile});
  if (positional.size() > 1) Die(kProgram, "unexpected argument '" + positional[1] + "'", kExitUsage);
  auto options = LaunchOptionsFromFlags(std::vector<std::string>(argv, argv + argc), /*one_machine=*/true);
  if (!options.ok()) Die(kProgram, options.status(), kExitUsage);
  CheckCpusExist(*options);
  auto base = ScenarioFromFlags();
  if (!base.ok()) Die(kProgram, base.status(), kExitUsage);
  const RunShape shape = CheckRunFlagsOrDie(*base);
  // On one machine mpirun starts only the transports that run as one job.
  const bool any_job = std::any_of(shape.transports.begin(), shape.transports.end(),
                                   [](const std::string& t) { return TransportLaunchesAsJob(t); });
  for (const char* flag : {"mpirun", "mpirun-args"}) {
    if (FlagWasSet(flag) && !any_job) {
      Die(kProgram, absl::StrCat("--", flag, " applies to grpc+mpi only (psbench run starts the other "
                                 "transports itself)"), kExitUsage);
    }
  }
  std::string json_path = JsonFlag();
  CheckOutputsOrDie(kProgram, json_path);
  KeepStdoutForRecords(kProgram, json_path);
  // The tour measures PS throughput with 2 workers x 2 PS unless told otherwise.
  if (!FlagWasSet("benchmark") && !FlagWasSet("trainer")) {
    if (!FlagWasSet("num-ps")) options->num_ps = 2;
    if (!FlagWasSet("num-workers")) options->num_workers = 2;
  }
  if (base->busy_poll) WarnIfSpinnersShareCpus(*options);

  Session session;
  session.name = "run";
  options->bin_dir = bin_dir;
  options->ps_listen = "127.0.0.1";
  session.options = *std::move(options);
  session.json_path = json_path;
  const int slots = session.options.num_ps + session.options.num_workers;
  session.launcher = MakeLocalLauncher(slots);
  auto job = MakeMpirunLauncher(std::vector<std::string>(slots, "localhost"), MpirunFlag(), MpirunArgsFlag());
  if (!job.ok()) Die(kProgram, job.status(), kExitUsage);
  session.job_launcher = *std::move(job);
  return RunSession(session, *base);
}

}  // namespace psbench
