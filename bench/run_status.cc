#include "bench/run_status.h"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "fmt/core.h"

namespace psbench {

RunStatus& RunStatus::Get() {
  static RunStatus* status = new RunStatus;
  return *status;
}

RunStatus::RunStatus() : line_(STDERR_FILENO) {}

void RunStatus::SetRun(int number, int total) {
  run_ = number;
  runs_ = total;
}

void RunStatus::SetSteps(std::string title, int64_t warmup_steps, int64_t steps) {
  title_ = std::move(title);
  steps_ = std::pair{warmup_steps, steps};
}

std::string RunStatus::WorkerFlag() const { return enabled() ? "--progress-file=-" : ""; }

void RunStatus::Start(const Scenario& s, size_t servers, int workers) {
  if (!enabled()) return;
  samples_.assign(workers, "");
  scenario_ = s;
  if (steps_) std::tie(scenario_.warmup_iterations, scenario_.iterations) = *steps_;
  servers_ = steps_ ? 1 : servers;  // a step is one operation, whatever the PS
  running_ = true;
  start_ns_ = SteadyNs();
  last_draw_ns_ = 0;
  recent_.clear();
}

void RunStatus::Update(int w, const std::string& line) {
  if (running_ && w >= 0 && static_cast<size_t>(w) < samples_.size()) samples_[w] = line;
}

void RunStatus::Tick() {
  if (!running_) return;
  const int64_t now = SteadyNs();
  if (now - last_draw_ns_ < 200'000'000) return;
  last_draw_ns_ = now;
  std::string prefix = runs_ > 0 ? fmt::format("run {}/{} ", run_, runs_) : std::string();
  prefix += !title_.empty() ? title_
                           : absl::StrCat(BenchmarkName(scenario_.benchmark), " ", SchemeLabel(scenario_));
  // The slowest worker says where the run is and how long it has left.
  std::optional<ProgressSample> slowest;
  std::optional<double> left;
  bool every_worker = true;
  Total total{now, 0, 0};
  for (const std::string& text : samples_) {
    auto p = ParseProgressLine(text);
    if (!p.ok()) {
      every_worker = false;
      continue;
    }
    total.ops += p->ops;
    total.bytes += p->bytes;
    auto l = SecondsLeft(scenario_, servers_, *p);
    if (!l) every_worker = false;
    if (!slowest || (l && left && *l > *left)) slowest = *p;
    if (l && (!left || *l > *left)) left = l;
  }
  const double elapsed = (now - start_ns_) / 1e9;
  if (!slowest) {
    line_.Show(fmt::format("{} | starting | {:.0f} s elapsed", prefix, elapsed));
    return;
  }
  recent_.push_back(total);
  while (recent_.size() > 2 && now - recent_.front().ns > 1'000'000'000) recent_.pop_front();
  double dt = (now - recent_.front().ns) / 1e9;
  double ops = dt > 0 ? (total.ops - recent_.front().ops) / dt : 0;
  double mb = dt > 0 ? (total.bytes - recent_.front().bytes) / dt / 1e6 : 0;
  line_.Show(StatusText(prefix, *slowest, elapsed, every_worker ? left : std::nullopt, ops, mb));
}

void RunStatus::Stop() {
  running_ = false;
  samples_.clear();
  line_.Clear();
}

}  // namespace psbench
