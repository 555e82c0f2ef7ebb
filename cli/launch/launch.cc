#include "cli/launch/launch.h"

#include <signal.h>

#include <atomic>

#include "absl/strings/str_cat.h"
#include "bench/cli.h"
#include "bench/report.h"
#include "fmt/core.h"

namespace psbench {
namespace {

// The first stopping signal, 0 before any.
std::atomic<int> g_signal{0};
void OnSignal(int sig) {
  int none = 0;
  g_signal.compare_exchange_strong(none, sig);
}

}  // namespace

void StopOnSignals() {
  // SIGHUP too: a closed terminal or a dropped ssh session stops the run as cleanly. A signal
  // ignored when psbench started (nohup, a background job's SIGINT) stays ignored.
  signal(SIGTERM, OnSignal);
  for (int sig : {SIGINT, SIGHUP}) {
    if (signal(sig, SIG_IGN) != SIG_IGN) signal(sig, OnSignal);
  }
  signal(SIGPIPE, SIG_IGN);
}

bool Interrupted() { return g_signal != 0; }

absl::Status InterruptedError() {
  const char* name = sigabbrev_np(g_signal);
  return absl::CancelledError(absl::StrCat("interrupted by SIG", name != nullptr ? name : "?"));
}

int FailedRunExitCode(const absl::Status& failure) {
  if (Interrupted()) return 128 + g_signal;
  return ExitCodeFor(failure);
}

absl::Duration RunBudget(const Scenario& s, size_t plans, size_t num_ps) {
  absl::Duration per_plan = absl::Seconds(30) + s.rpc_timeout;
  if (s.warmup_iterations < 0) per_plan += s.warmup;
  if (s.iterations == 0) per_plan += s.duration;
  else per_plan += absl::Minutes(10);  // bounded by the op deadlines in practice
  absl::Duration total = s.connect_timeout + per_plan * static_cast<int64_t>(plans);
  // Open loop by count (warm-up or measurement): every planned operation is sent on its
  // schedule, which sets how long that phase takes at each rate (all PS from one worker).
  const std::vector<LoadSchedule> loads = LoadPoints(s);
  const int64_t counted = std::max<int64_t>(s.iterations, 0) + std::max<int64_t>(s.warmup_iterations, 0);
  if ((s.load.open() || s.load_sweep) && counted > 0 && !loads.empty()) {
    const size_t servers = s.benchmark == Benchmark::kThroughput ? std::max<size_t>(num_ps, 1) : 1;
    const double operations = static_cast<double>(counted) * static_cast<double>(servers);
    const int64_t plans_per_load = static_cast<int64_t>(plans / loads.size());
    for (const LoadSchedule& load : loads) total += absl::Seconds(operations / load.rate) * plans_per_load;
  }
  return total;
}

absl::StatusOr<std::vector<Record>> MergeWorkerRecords(
    std::vector<std::vector<Record>> per_worker, size_t plans, bool aggregate,
    const std::vector<std::string>& names) {
  for (size_t w = 0; w < per_worker.size(); ++w) {
    if (per_worker[w].size() != plans) {
      return absl::DataLossError(absl::StrCat(names[w], ": ", per_worker[w].size(),
                                              " results for ", plans, " payloads"));
    }
  }
  std::vector<Record> results;
  for (size_t p = 0; p < plans; ++p) {
    std::vector<Record> group;
    for (auto& w : per_worker) group.push_back(std::move(w[p]));
    results.insert(results.end(), group.begin(), group.end());
    if (aggregate) results.push_back(AggregateThroughput(group));
  }
  return results;
}

int SaveRecords(const char* program, const std::string& json_path,
                const std::vector<Record>& records) {
  if (json_path.empty()) return 0;
  if (absl::Status st = AppendJsonLines(json_path, records); !st.ok()) {
    fmt::print(stderr, "{}: {}\n", program, std::string(st.message()));
    return kExitRuntime;
  }
  fmt::print("# results: {}\n", json_path);
  return 0;
}

}  // namespace psbench
