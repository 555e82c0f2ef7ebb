// psbench: one command per job. The subcommands each parse their own flags:
//   run              PS and workers on this machine           (cli/run_command.cc)
//   ssh|slurm|mpirun the same across cluster nodes             (cli/cluster_command.cc)
//   train            the embedded trainer alone, no PS         (cli/train_command.cc)
//   report           tables and plots from --json records      (cli/report/)
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <string_view>

#include "bench/process/alloc_policy.h"
#include "bench/process/mutex_policy.h"
#include "bench/cli.h"
#include "bench/sysinfo.h"
#include "cli/cluster_command.h"
#include "cli/launch/process.h"
#include "cli/launch/scratch.h"
#include "cli/report/report_command.h"
#include "cli/run_command.h"
#include "cli/train_command.h"

namespace psbench {
namespace {

constexpr char kUsage[] =
    "usage: psbench COMMAND [flags]   (psbench COMMAND --help for its flags)\n"
    "  run      PS and workers on this machine: the default tour, one --benchmark,\n"
    "           --transports comparisons, --trainer=MODEL, --benchmark=updates\n"
    "  ssh      the same across nodes, over ssh (--hostfile or $PBS_NODEFILE)\n"
    "  slurm    the same inside a Slurm allocation (srun steps)\n"
    "  mpirun   the same with Open MPI's mpirun (--hostfile)\n"
    "  train    time one model of the embedded trainer here (no PS)\n"
    "  report   Markdown tables and an HTML page with plots from --json results\n"
    "  --version  this build's version (every record carries it; a worker compares its PS's with its own)\n"
    "Exit status: 0 success, 1 a process or measurement failed, 2 bad input.\n";

// Where psbench-ps, psbench-worker and psbench_plot.py are: beside this psbench.
std::filesystem::path BinDir() {
  if (const char* env = getenv("PSBENCH_BIN_DIR")) return env;
  return std::filesystem::read_symlink("/proc/self/exe").parent_path();
}

int Dispatch(int argc, char** argv) {
  const std::string_view command = argc > 1 ? argv[1] : "";
  // What a psbench killed with SIGKILL left in $TMPDIR goes now.
  SweepStaleScratch();
  if (command == "run") return RunRunCommand(argc, argv, BinDir().string());
  if (IsClusterCommand(std::string(command))) return RunClusterCommand(argc, argv, BinDir().string());
  if (command == "train") return RunTrainCommand(argc, argv);
  if (command == "report") return RunReportCommand(argc, argv, BinDir());
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (command == "--version" || command == "-version" || command == "version") {
    std::printf("psbench %s\n", PsbenchVersion().c_str());
    return 0;
  }
  std::fprintf(stderr, "psbench: %s; commands: run, ssh, slurm, mpirun, train, report (see psbench --help)\n",
               command.empty() ? "missing command"
                               : ("unknown command '" + std::string(command) + "'").c_str());
  return kExitUsage;
}

}  // namespace
}  // namespace psbench

int main(int argc, char** argv) {
  // As the PS and workers, so that what runs in this process (the floors' records, psbench
  // train's in-process parts) says the same.
  psbench::FixAllocatorPolicy();
  psbench::TurnOffMutexDeadlockDetection();
  // Ranks orphaned by a dying mpirun come back to us and are reaped before we exit.
  psbench::AdoptOrphans();
  int code = psbench::Dispatch(argc, argv);
  psbench::ReapOrphans(absl::Seconds(5));
  return code;
}
