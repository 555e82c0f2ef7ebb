// psbench's status line: while a run's workers work, takes the progress lines they print on
// their stdout (bench/progress.h; every launcher gathers them) and shows, on stderr when it
// is a terminal,
//   run 2/6 latency sweep | payload 3/13 measure | 4 s elapsed, ~12 s left | 21340 op/s 87.4 MB/s
// redrawn a few times a second and cleared when the run ends. When stderr is not a terminal
// the workers print no progress and nothing is drawn.
#ifndef PSBENCH_BENCH_RUN_STATUS_H_
#define PSBENCH_BENCH_RUN_STATUS_H_

#include <cstdint>
#include <deque>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/progress.h"
#include "bench/scenario.h"

namespace psbench {

class RunStatus {
 public:
  static RunStatus& Get();  // the driver's one status line
  bool enabled() const { return line_.enabled(); }

  // "run i/N" in the line from now on (0: none).
  void SetRun(int number, int total);
  // Runs that count steps, not payload operations (training): the line says `title` instead
  // of the benchmark and scheme, and the time left counts `warmup_steps`, then `steps`.
  void SetSteps(std::string title, int64_t warmup_steps, int64_t steps);
  // The worker flag that makes a worker print its progress on stdout
  // ("--progress-file=-"), or "" when disabled.
  std::string WorkerFlag() const;
  // The workers are started: draw from now on. `servers`: PS each worker sends to.
  void Start(const Scenario& s, size_t servers, int workers);
  // Worker w's latest progress line (without its "#progress " prefix).
  void Update(int w, const std::string& line);
  // From the driver's wait loop: at most every 200 ms, redraws.
  void Tick();
  // The run is over: clear the line and forget its samples.
  void Stop();

 private:
  RunStatus();
  TerminalLine line_;
  int run_ = 0, runs_ = 0;
  std::vector<std::string> samples_;  // per worker: its latest progress line
  Scenario scenario_;
  std::string title_;
  std::optional<std::pair<int64_t, int64_t>> steps_;
  size_t servers_ = 1;
  bool running_ = false;
  int64_t start_ns_ = 0, last_draw_ns_ = 0;
  struct Total {
    int64_t ns;
    uint64_t ops, bytes;
  };
  std::deque<Total> recent_;  // the rate shown is over the last second or so
};

}  // namespace psbench

#endif  // PSBENCH_BENCH_RUN_STATUS_H_
