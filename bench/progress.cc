#include "bench/progress.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "fmt/core.h"
#include "inputs/input_file.h"
#include "nlohmann/json.hpp"

namespace psbench {

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

const char* PhaseName(int phase) {
  return phase == LoopCounters::kWarmup ? "warm-up" : phase == LoopCounters::kMeasure ? "measure" : "setup";
}

std::string Duration(double s) {
  if (s < 60) return fmt::format("{:.0f} s", s);
  if (s < 3600) return fmt::format("{:.0f} min {:02.0f} s", std::floor(s / 60), std::fmod(s, 60));
  return fmt::format("{:.0f} h {:02.0f} min", std::floor(s / 3600), std::fmod(s, 3600) / 60);
}

}  // namespace

void LoopCounters::StartPhase(int p) {
  phase_ops.store(0, std::memory_order_relaxed);
  phase_start_ns.store(SteadyNs(), std::memory_order_relaxed);
  phase.store(p, std::memory_order_relaxed);
}

LoopCounters& LoopProgress() {
  static LoopCounters counters;
  return counters;
}

std::string ProgressLine(const ProgressSample& s) {
  nlohmann::json j = {{"plan", s.plan},       {"plans", s.plans},         {"phase", s.phase},
                      {"phase_s", s.phase_s}, {"phase_ops", s.phase_ops}, {"ops", s.ops},
                      {"bytes", s.bytes},     {"elapsed_s", s.elapsed_s}};
  return j.dump() + "\n";
}

absl::StatusOr<ProgressSample> ParseProgressLine(const std::string& line) {
  auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError("not a progress line");
  ProgressSample s;
  try {
    s.plan = j.at("plan").get<int>();
    s.plans = j.at("plans").get<int>();
    s.phase = j.at("phase").get<int>();
    s.phase_s = j.at("phase_s").get<double>();
    s.phase_ops = j.at("phase_ops").get<uint64_t>();
    s.ops = j.at("ops").get<uint64_t>();
    s.bytes = j.at("bytes").get<uint64_t>();
    s.elapsed_s = j.at("elapsed_s").get<double>();
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("not a progress line: ", e.what()));
  }
  return s;
}

std::optional<double> SecondsLeft(const Scenario& s, size_t servers, const ProgressSample& p) {
  // Operations per second of the current phase: what a count-bound phase is estimated at.
  std::optional<double> rate;
  if (p.phase != LoopCounters::kIdle && p.phase_s > 0.2 && p.phase_ops > 0) rate = p.phase_ops / p.phase_s;
  auto phase_s = [&](bool warmup) -> std::optional<double> {
    int64_t count = warmup ? s.warmup_iterations : s.iterations;
    bool by_count = warmup ? count >= 0 : count > 0;
    if (!by_count) return absl::ToDoubleSeconds(warmup ? s.warmup : s.duration);
    if (!rate) return std::nullopt;
    return static_cast<double>(count) * static_cast<double>(servers) / *rate;  // a count is per PS
  };
  auto warm = phase_s(true), measure = phase_s(false);
  if (!warm || !measure) return std::nullopt;
  double left = 0;
  if (p.phase == LoopCounters::kWarmup) left = std::max(0.0, *warm - p.phase_s) + *measure;
  else if (p.phase == LoopCounters::kMeasure) left = std::max(0.0, *measure - p.phase_s);
  else left = *warm + *measure;  // setting up this plan
  return left + (p.plans - p.plan - 1) * (*warm + *measure);
}

std::string StatusText(const std::string& prefix, const ProgressSample& p, double elapsed_s,
                       std::optional<double> left_s, double ops_per_s, double mb_per_s) {
  std::string text = prefix.empty() ? "" : prefix + " | ";
  if (p.plans > 1) text += fmt::format("payload {}/{} ", p.plan + 1, p.plans);
  text += PhaseName(p.phase);
  text += fmt::format(" | {} elapsed, {} | {:.0f} op/s {:.1f} MB/s", Duration(elapsed_s),
                      left_s ? "~" + Duration(*left_s) + " left" : std::string("time left unknown yet"),
                      ops_per_s, mb_per_s);
  return text;
}

TerminalLine::TerminalLine(int fd) : fd_(fd), enabled_(isatty(fd) == 1) {}

void TerminalLine::Show(const std::string& text) {
  std::lock_guard<std::mutex> lock(mu_);
  ShowLocked(text);
}

void TerminalLine::ShowLocked(const std::string& text) {
  if (!enabled_) return;
  winsize ws{};
  size_t width = ioctl(fd_, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
  std::string line = text.substr(0, width - 1);  // the cursor stays on this row
  WriteAll(fd_, "\r" + line + "\033[K");  // a terminal that went away: nothing to do about it
  shown_ = true;
}

void TerminalLine::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  ClearLocked();
}

void TerminalLine::ClearLocked() {
  if (!enabled_ || !shown_) return;
  WriteAll(fd_, "\r\033[K");
  shown_ = false;
}

ProgressReporter::ProgressReporter(const Scenario& s, size_t plans, size_t servers, std::string file,
                                   bool terminal)
    : scenario_(s),
      plans_(static_cast<int>(plans)),
      servers_(servers),
      file_(std::move(file)),
      line_(STDERR_FILENO),
      draw_(terminal && line_.enabled()) {
  if (!file_.empty() || draw_) thread_ = std::thread([this] { Loop(); });
}

void ProgressReporter::Stop() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  line_.Clear();
}

void ProgressReporter::Loop() {
  const int64_t start = SteadyNs();
  // The rate shown is over the last second or so of samples.
  std::deque<std::pair<int64_t, ProgressSample>> recent;
  const std::string tmp = file_ + ".tmp";
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(stop_mu_);
      if (stop_) return;
    }
    LoopCounters& c = LoopProgress();
    ProgressSample p;
    const int64_t now = SteadyNs();
    p.plan = c.plan.load(std::memory_order_relaxed);
    p.plans = plans_;
    p.phase = c.phase.load(std::memory_order_relaxed);
    p.phase_s = p.phase == LoopCounters::kIdle ? 0 : (now - c.phase_start_ns.load(std::memory_order_relaxed)) / 1e9;
    p.phase_ops = c.phase_ops.load(std::memory_order_relaxed);
    p.ops = c.ops.load(std::memory_order_relaxed);
    p.bytes = c.bytes.load(std::memory_order_relaxed);
    p.elapsed_s = (now - start) / 1e9;
    if (file_ == "-") {
      // On stdout, where the launcher gathers it with the records: one stdio call, so a
      // record printed by the benchmark thread is never cut by it.
      std::fputs(("#progress " + ProgressLine(p)).c_str(), stdout);
      std::fflush(stdout);
    } else if (!file_.empty()) {
      // Written beside and renamed over: a reader sees a whole line or the previous one.
      if (FILE* f = std::fopen(tmp.c_str(), "w")) {
        std::fputs(ProgressLine(p).c_str(), f);
        std::fclose(f);
        std::error_code ec;
        std::filesystem::rename(tmp, file_, ec);
      }
    }
    if (draw_) {
      recent.push_back({now, p});
      while (recent.size() > 2 && now - recent.front().first > 1'000'000'000) recent.pop_front();
      double dt = (now - recent.front().first) / 1e9;
      const ProgressSample& first = recent.front().second;
      double ops = dt > 0 ? (p.ops - first.ops) / dt : 0, mb = dt > 0 ? (p.bytes - first.bytes) / dt / 1e6 : 0;
      line_.Show(StatusText("psbench-worker", p, p.elapsed_s, SecondsLeft(scenario_, servers_, p), ops, mb));
    }
    std::unique_lock<std::mutex> lock(stop_mu_);
    if (stop_cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stop_; })) return;
  }
}

}  // namespace psbench
