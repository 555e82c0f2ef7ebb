// psbench ssh | slurm | mpirun: the cluster launchers. What they run is the session of
// psbench run (cli/session.h); what differs is where the slots are and how a process starts.
#include "cli/cluster_command.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/cli.h"
#include "bench/report.h"
#include "bench/scenario_flags.h"
#include "cli/launch/launch.h"
#include "cli/launch_flags.h"
#include "cli/session.h"
#include "fmt/core.h"
#include "transports/limit_flags.h"
#include "transports/rdma_flags.h"
#include "transports/transport_flags.h"
#include "transports/tls_flags.h"
#include "worker/trainer_flags.h"

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
ABSL_FLAG(std::string, srun, "srun", "psbench slurm: the srun command");
ABSL_FLAG(std::string, srun_args, "",
          "psbench slurm: more srun options for every step (split on spaces), e.g. "
          "\"--mpi=pmix\"");

namespace psbench {
namespace {

namespace fs = std::filesystem;

constexpr char kClusterUsage[] =
    "psbench ssh --hostfile=FILE [flags] | psbench slurm [flags] | psbench mpirun --hostfile=FILE [flags]\n"
    "Runs psbench across cluster nodes, as psbench run does on one machine (every benchmark,\n"
    "the tour, --transports, --trainer, --benchmark=updates): PS on the first --num-ps slots,\n"
    "workers on the next --num-workers (default: the rest). ssh starts each process over ssh (a\n"
    "host list such as $PBS_NODEFILE); slurm runs inside an allocation (sbatch\n"
    "deploy/slurm/psbench.sbatch or salloc) with srun steps; mpirun starts them with Open MPI.\n"
    "grpc+mpi runs as one MPI job: under mpirun and slurm. The binaries must be at the same\n"
    "path on every node (--remote-bin-dir), and so must any file a flag names (--trace,\n"
    "--tls-*). Results: one table, and --json=FILE.\n"
    "Exit status: 0 success, 1 a process or measurement failed, 2 bad input.";

// Each launcher's own flags are refused by the others (they would do nothing there).
void RefuseOtherLaunchersFlags(const std::string& command) {
  const bool ssh = command == "ssh", slurm = command == "slurm", mpirun = command == "mpirun";
  if (FlagWasSet("hostfile") && slurm) {
    Die(kProgram, "--hostfile is not a psbench slurm flag (the allocation says where to run)", kExitUsage);
  }
  if (FlagWasSet("ssh") && !ssh) Die(kProgram, "--ssh is a psbench ssh flag", kExitUsage);
  if ((FlagWasSet("srun") || FlagWasSet("srun-args")) && !slurm) {
    Die(kProgram, "--srun and --srun-args are psbench slurm flags", kExitUsage);
  }
  if ((FlagWasSet("mpirun") || FlagWasSet("mpirun-args")) && !mpirun) {
    Die(kProgram, absl::StrCat("--mpirun and --mpirun-args are psbench mpirun (and psbench run) "
                               "flags; psbench ", command, " does not start mpirun"),
        kExitUsage);
  }
}

// The host list psbench ssh and mpirun read: --hostfile, else $PBS_NODEFILE ("" = none).
std::string HostFilePath() {
  std::string hostfile = absl::GetFlag(FLAGS_hostfile);
  if (hostfile.empty()) {
    if (const char* pbs = getenv("PBS_NODEFILE")) hostfile = pbs;
  }
  return hostfile;
}

// The launcher and its slots; `work_dir` holds what srun reads.
std::shared_ptr<Launcher> MakeLauncher(const std::string& command, const std::string& work_dir) {
  absl::StatusOr<std::unique_ptr<Launcher>> launcher;
  if (command == "slurm") {
    std::vector<std::string> args = absl::StrSplit(absl::GetFlag(FLAGS_srun_args), ' ', absl::SkipEmpty());
    launcher = MakeSlurmLauncher(absl::GetFlag(FLAGS_srun), args, work_dir);
  } else {
    const std::string hostfile = HostFilePath();
    if (hostfile.empty()) {
      launcher = absl::InvalidArgumentError(absl::StrCat("psbench ", command, " needs --hostfile=FILE (or $PBS_NODEFILE)"));
    } else if (auto slots = ReadHostFile(hostfile); !slots.ok()) {
      launcher = slots.status();
    } else if (command == "ssh") {
      launcher = MakeSshLauncher(*std::move(slots), absl::GetFlag(FLAGS_ssh));
    } else {
      launcher = MakeMpirunLauncher(*std::move(slots), MpirunFlag(), MpirunArgsFlag());
      // psbench mpirun starts every transport with it: a missing one is bad input now.
      if (launcher.ok()) {
        if (absl::Status s = (*launcher)->Check(); !s.ok()) launcher = s;
      }
    }
  }
  if (!launcher.ok()) Die(kProgram, launcher.status(), kExitUsage);
  return *std::move(launcher);
}

// PS and workers per slot: --num-workers, else every slot after the PS (one for a
// point-to-point benchmark).
void FitToSlots(LaunchOptions& o, const Launcher& launcher, const Scenario& s) {
  auto usage_error = [&](const std::string& message) { Die(kProgram, message, kExitUsage); };
  const int slots = static_cast<int>(launcher.slots().size());
  const bool point_to_point = FlagWasSet("benchmark") && !FlagWasSet("trainer") &&
                              !EveryWorkerToEveryPs(s.benchmark);
  if (!FlagWasSet("num-workers")) o.num_workers = point_to_point ? 1 : slots - o.num_ps;
  if (o.num_workers < 1) {
    usage_error(absl::StrCat(launcher.name(), " gives ", slots, " slot(s): no slot is left for a worker after --num-ps=", o.num_ps));
  }
  if (o.num_workers > kMaxWorkers) {  // only a default from the slots gets here
    usage_error(absl::StrCat(launcher.name(), " gives ", slots, " slots: ", o.num_workers,
                             " workers after the PS, over the ", kMaxWorkers,
                             " a run takes; give --num-workers (1 to ", kMaxWorkers, ")"));
  }
  if (o.num_ps + o.num_workers > slots) {
    usage_error(absl::StrCat(o.num_ps, " PS + ", o.num_workers, " workers need ", o.num_ps + o.num_workers,
                             " slots; ", launcher.name(), " gives ", slots));
  }
}

}  // namespace

bool IsClusterCommand(const std::string& command) {
  return command == "ssh" || command == "slurm" || command == "mpirun";
}

int RunClusterCommand(int argc, char** argv, const std::string& bin_dir) {
  auto positional = ParseFlagsOrExit(
      argc, argv, kClusterUsage,
      {"/cli/cluster_command.cc", kLaunchFlagsFile, "/bench/scenario_flags.cc", kTransportFlagsFile, kRdmaFlagsFile,
       kTrainerFlagsFile, kTlsFlagsFile, kLimitFlagsFile});
  const std::string command = positional.at(0);
  if (positional.size() > 1) Die(kProgram, "unexpected argument '" + positional[1] + "'", kExitUsage);
  RefuseOtherLaunchersFlags(command);
  auto options = LaunchOptionsFromFlags(std::vector<std::string>(argv, argv + argc), /*one_machine=*/false);
  if (!options.ok()) Die(kProgram, options.status(), kExitUsage);
  auto scenario = ScenarioFromFlags();
  if (!scenario.ok()) Die(kProgram, scenario.status(), kExitUsage);
  CheckRunFlagsOrDie(*scenario);
  // Where each PS listens: an interface's address, or every interface (dialed by host name).
  std::string iface = absl::GetFlag(FLAGS_ps_interface);
  if (FlagWasSet("ps-interface") && iface.empty()) {
    Die(kProgram, "--ps-interface is empty; give an interface such as ib0 or eth0", kExitUsage);
  }
  options->ps_listen = iface.empty() ? std::string("0.0.0.0") : iface;
  options->bin_dir = absl::GetFlag(FLAGS_remote_bin_dir);
  // Each node resolves it on its own, from whatever directory its shell starts in.
  if (FlagWasSet("remote-bin-dir") && (options->bin_dir.empty() || options->bin_dir[0] != '/')) {
    Die(kProgram,
        absl::StrCat("--remote-bin-dir='", options->bin_dir,
                     "': give the absolute path of psbench-ps and psbench-worker on the nodes"),
        kExitUsage);
  }
  if (options->bin_dir.empty()) options->bin_dir = bin_dir;
  std::string json_path = JsonFlag();
  // $PBS_NODEFILE is an input as much as --hostfile (which the check finds by itself).
  std::vector<NamedPath> host_list;
  if (command != "slurm" && absl::GetFlag(FLAGS_hostfile).empty() && !HostFilePath().empty()) {
    host_list.push_back({"$PBS_NODEFILE", HostFilePath()});
  }
  CheckOutputsOrDie(kProgram, json_path, host_list);
  KeepStdoutForRecords(kProgram, json_path);

  // Removed at exit (a static's destructor), when psbench dies (Die's hook), or, after a
  // SIGKILL, by the next psbench.
  static std::unique_ptr<ScratchDir> scratch;
  auto made = ScratchDir::Create("cluster");
  if (!made.ok()) Die(kProgram, made.status(), kExitRuntime);
  scratch = *std::move(made);
  SetDieHook([] { scratch.reset(); });
  const std::string work_dir = scratch->path();
  std::shared_ptr<Launcher> launcher = MakeLauncher(command, work_dir);
  FitToSlots(*options, *launcher, *scenario);

  Session session;
  session.name = command;
  session.options = *std::move(options);
  session.json_path = json_path;
  session.launcher = launcher;
  if (launcher->StartsMpiJobs()) session.job_launcher = launcher;
  // Printed once the session has checked everything (bad input prints nothing on stdout).
  session.announce = [&session, command, iface] {
    const LaunchOptions& o = session.options;
    const auto& slots = session.launcher->slots();
    fmt::print("# psbench {}: {} PS on {} | {} workers on {}{}\n", command, o.num_ps,
               absl::StrJoin(std::vector<std::string>(slots.begin(), slots.begin() + o.num_ps), ","),
               o.num_workers,
               absl::StrJoin(std::vector<std::string>(slots.begin() + o.num_ps, slots.begin() + o.num_ps + o.num_workers), ","),
               iface.empty() ? std::string() : " | PS on " + iface);
    std::fflush(stdout);
  };
  return RunSession(session, *scenario);
}

}  // namespace psbench
