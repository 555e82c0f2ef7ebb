// One run's processes, the same on every launcher: the plan (PS on the launcher's first
// --num-ps slots, workers on the next ones, their command lines), the start (the PS first,
// their "listening on" lines giving the workers their addresses; one MPI job of both for a
// transport that launches as a job), the gathering (every worker's records and progress come
// back on its stdout) and the stop. `psbench run` is this on the local launcher; `psbench
// ssh | slurm | mpirun` on theirs.
#ifndef PSBENCH_CLI_LAUNCH_JOB_H_
#define PSBENCH_CLI_LAUNCH_JOB_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/scenario.h"
#include "cli/launch/launchers.h"
#include "bench/record.h"
#include "nlohmann/json.hpp"

namespace psbench {

// What every run of one psbench command shares, whatever its scenario.
struct LaunchOptions {
  int num_ps = 1;
  int num_workers = 1;
  std::string ps_cpu, worker_cpu;  // pin every PS / worker to these CPUs ("" = not pinned)
  int ps_threads = 1;
  absl::Duration timeout;          // > 0: the bound of every run; else derived per run
  std::string bin_dir;             // where psbench-ps and psbench-worker are, on every node
  std::string ps_listen = "127.0.0.1";  // each PS's --listen: an address, interface or 0.0.0.0
  // --tls-* and the PS limits (for every PS), the matching client flags (every worker).
  std::vector<std::string> ps_security_args, worker_security_args;
  uint64_t ps_max_message_bytes = 0;  // every PS's --max-message-size (0: not known)
  int ps_max_connections = 0;         // every PS's --max-connections (0: not known)
  // Added to every worker's command line: the trainer's or the updates check's settings.
  std::vector<std::string> worker_args;
  bool tls = false;                // --tls-* given: every gRPC channel of the run is TLS
  bool training = false;           // workers train (--trainer): runs take what the model takes
  std::string label;               // stamped on every record when not empty
  int repetitions = 1;             // each payload benchmark run this many times (--repetitions)
  std::vector<std::string> command;  // the psbench command line, stamped on every record
};

// How long one run of `s` may take (--timeout, else from the scenario; a training or
// updates run an hour).
absl::Duration JobBudget(const LaunchOptions& o, const Scenario& s, size_t plans);

// Runs scenario `s` (its `ps` list is filled here) with fresh processes on `launcher`:
// returns each worker's records in plan order, then per plan (with `aggregate`, throughput)
// the total over the workers, every record saying where and how it ran. Latency and
// bandwidth are point to point (1 PS, 1 worker). A worker that fails fails the run; where
// the launcher starts members as processes of their own (local, ssh), the others go on to
// the end of their measurement, and their records, which say a peer was lost, go to
// *survivors (when given). Whenever the run fails, every worker's records go there that
// wrote one per plan (one that exited 1 on a failed check of its own too, which is no lost
// worker). With survivors, the others go on after a lost worker except in training and
// updates runs, which end at the first.
absl::StatusOr<std::vector<Record>> RunJob(Launcher& launcher, const LaunchOptions& o,
                                                   Scenario s, size_t plans, int run_number,
                                                   bool aggregate,
                                           std::vector<Record>* survivors = nullptr);

// The command line of every PS of a run of `s` (one builder for every launcher).
std::vector<std::string> PsCommandLine(const LaunchOptions& o, const Scenario& s);
// Worker w's command line: the scenario (as JSON, base64url) and its place in the run.
std::vector<std::string> WorkerCommandLine(const LaunchOptions& o, const Scenario& s, int w);

}  // namespace psbench

#endif  // PSBENCH_CLI_LAUNCH_JOB_H_
