// Live progress of long runs: the benchmark loop counts what it completes (LoopProgress), a
// worker thread samples that a few times a second (ProgressReporter) and writes it to a file
// that psbench run reads, or draws it on its own terminal. The status line goes to stderr
// only when stderr is a terminal, and is cleared before anything else is printed, so it
// never ends up in tables, JSON or logs.
#ifndef PSBENCH_BENCH_PROGRESS_H_
#define PSBENCH_BENCH_PROGRESS_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "bench/scenario.h"

namespace psbench {

// Nanoseconds on the steady clock, the one time base of progress and status lines.
int64_t SteadyNs();

// Updated by the one thread that runs the benchmark loop, read by the reporter thread.
struct LoopCounters {
  enum Phase { kIdle = 0, kWarmup = 1, kMeasure = 2 };
  std::atomic<int> plan{0};
  std::atomic<int> phase{kIdle};
  std::atomic<int64_t> phase_start_ns{0};  // steady clock
  std::atomic<uint64_t> phase_ops{0};
  std::atomic<uint64_t> ops{0};    // since the process started
  std::atomic<uint64_t> bytes{0};  // since the process started

  void StartPhase(int p);
  // One operation completed. A single writer: load + store, no locked instruction in the loop.
  void Completed(uint64_t op_bytes) {
    phase_ops.store(phase_ops.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    ops.store(ops.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    bytes.store(bytes.load(std::memory_order_relaxed) + op_bytes, std::memory_order_relaxed);
  }
};
LoopCounters& LoopProgress();  // this process's

// One sample of a worker's progress (what the progress file holds, one JSON line).
struct ProgressSample {
  int plan = 0;  // 0-based
  int plans = 1;
  int phase = LoopCounters::kIdle;
  double phase_s = 0;  // time in the current phase
  uint64_t phase_ops = 0;
  uint64_t ops = 0, bytes = 0;
  double elapsed_s = 0;  // since the worker started sampling
};
std::string ProgressLine(const ProgressSample& s);
absl::StatusOr<ProgressSample> ParseProgressLine(const std::string& line);

// Seconds left for a worker, from the scenario (warm-up and measurement by time or by count)
// and its sample; a count-bound phase is estimated at the rate of the current phase. nullopt
// while there is no rate to estimate from.
std::optional<double> SecondsLeft(const Scenario& s, size_t servers, const ProgressSample& p);

// "run 2/6 latency | plan 3/13 measure | 4.2 s, ~12 s left | 21340 op/s 87.4 MB/s"
std::string StatusText(const std::string& prefix, const ProgressSample& p, double elapsed_s,
                       std::optional<double> left_s, double ops_per_s, double mb_per_s);

// A status line on a terminal: redrawn in place, cut to the terminal's width (a wrapped
// line could not be redrawn), cleared on request. Does nothing when `fd` is not a terminal.
class TerminalLine {
 public:
  explicit TerminalLine(int fd);
  ~TerminalLine() { Clear(); }
  bool enabled() const { return enabled_; }
  void Show(const std::string& text);
  void Clear();
  // With mu() held: to print something else between a Clear and the next Show.
  std::mutex& mu() { return mu_; }
  void ShowLocked(const std::string& text);
  void ClearLocked();

 private:
  int fd_;
  bool enabled_;
  bool shown_ = false;
  std::mutex mu_;
};

// The worker's sampler: every 250 ms writes a ProgressLine to `file` (replaced atomically,
// for psbench run) and/or draws the status line on stderr when it is a terminal and
// `terminal` is set (a standalone psbench-worker). Runs until Stop or destruction.
class ProgressReporter {
 public:
  ProgressReporter(const Scenario& s, size_t plans, size_t servers, std::string file, bool terminal);
  ~ProgressReporter() { Stop(); }
  void Stop();
  // Clears the status line and keeps it off while the lock is held (print results then).
  std::unique_lock<std::mutex> Hold() {
    std::unique_lock<std::mutex> lock(line_.mu());
    line_.ClearLocked();
    return lock;
  }

 private:
  void Loop();
  const Scenario scenario_;
  const int plans_;
  const size_t servers_;
  const std::string file_;
  TerminalLine line_;
  bool draw_;
  // The sampler sleeps on this between samples, not in short naps: it shares the CPUs with
  // what it watches, and Stop wakes it at once.
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace psbench

#endif  // PSBENCH_BENCH_PROGRESS_H_
