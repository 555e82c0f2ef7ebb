// What psbench run and psbench ssh | slurm | mpirun share once their launcher is made: the
// resolved scenario becomes runs (the default tour, one benchmark, --transports, --trainer,
// --benchmark=updates), each run is one job on the launcher (cli/launch/job.h), and its
// records become tables on stdout and JSON Lines in --json. One path, every launcher.
#ifndef PSBENCH_CLI_SESSION_H_
#define PSBENCH_CLI_SESSION_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/flag_scope.h"
#include "bench/scenario.h"
#include "cli/launch/job.h"
#include "cli/launch/launchers.h"
#include "nlohmann/json.hpp"

namespace psbench {

// How psbench's own messages begin ("psbench: ...").
inline constexpr char kProgram[] = "psbench";

struct Session {
  std::string name;  // the subcommand: "run", "ssh", "slurm", "mpirun"
  // Starts PS and workers as processes of their own (every transport but grpc+mpi).
  std::shared_ptr<Launcher> launcher;
  // Starts PS and workers as one MPI job (grpc+mpi); null where this command cannot.
  std::shared_ptr<Launcher> job_launcher;
  LaunchOptions options;
  std::string json_path;

  // The launcher a transport needs (null: none of this command's can start it).
  Launcher* LauncherFor(const std::string& transport) const;
  // Called once what the flags ask for has been checked, before anything starts: the
  // command's header line.
  std::function<void()> announce;

  // Everything is checked: signals now stop the run cleanly (StopOnSignals), and the
  // command announces itself.
  void Begin();
  // One run of `s` with fresh processes: its records, stamped (see RunJob).
  absl::StatusOr<std::vector<Record>> Run(const Scenario& s, size_t plans, int number,
                                          std::vector<Record>* survivors = nullptr);
};

// Checks that every transport of this session can be started by one of its launchers, with
// one line naming the launcher that can when not (exit 2 is the caller's).
absl::Status CheckTransportsLaunch(const Session& session, const std::vector<std::string>& transports);

// Whether this session's launcher checks the default payload-memory budget itself: only when
// its workers run here (psbench run); elsewhere each worker checks it on its own host.
Scenario::PayloadMemoryCheck PayloadMemoryCheckOf(const Session& session);

// Runs what the flags ask for: the tour (no --benchmark), one benchmark, --transports, a
// training run (--trainer) or the updates check. `base` is the scenario from the flags.
// Returns the exit status.
int RunSession(Session& session, Scenario base);
// Exits 2 naming the first flag given that would change nothing about the run the flags ask
// for (bench/flag_scope.h), or a bad --transports list. Every command calls it before
// RunSession, so that nothing is printed or started before.
RunShape CheckRunFlagsOrDie(const Scenario& base);

// psbench run --trainer and --benchmark=updates (cli/training_runs.cc).
int RunTraining(Session& session, Scenario s);
int RunUpdates(Session& session, Scenario s);

}  // namespace psbench

#endif  // PSBENCH_CLI_SESSION_H_
