#include "worker/timed_replay.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/stats.h"

namespace psbench {
namespace {

// Waits for parts are cut this short of the next start, which is then reached polling: a
// transport's wait can overshoot its deadline by a timer's slack.
constexpr absl::Duration kSpinAhead = absl::Microseconds(200);
constexpr absl::Duration kLate = absl::Microseconds(50);

double Micros(absl::Duration d) { return absl::ToDoubleMicroseconds(d); }

// When bucket `b` became ready in trace step `k`: its last tensor's time; a tensor without a
// gradient in that step counts as ready when the step's compute ended.
double BucketReady(const TraceTiming::Step& k, const TimedModel& model, size_t b) {
  double ready = 0;
  for (size_t t : model.buckets[b]) {
    const auto& r = k.ready_us[model.trace_tensor[t]];
    ready = std::max(ready, r ? *r : k.compute_us);
  }
  return ready;
}

}  // namespace

TimedModel TimedModelOf(const TraceTiming& timing) {
  TimedModel model;
  std::vector<int> replayed(timing.tensors.size(), -1);
  for (size_t t = 0; t < timing.tensors.size(); ++t) {
    const bool used = std::any_of(timing.steps.begin(), timing.steps.end(),
                                  [t](const TraceTiming::Step& s) { return s.ready_us[t].has_value(); });
    if (!used) continue;
    replayed[t] = static_cast<int>(model.trace_tensor.size());
    model.trace_tensor.push_back(t);
    model.names.push_back(timing.tensors[t].name);
    model.tensor_bytes.push_back(std::max<uint64_t>(1, (timing.tensors[t].bytes + 3) / 4) * 4);
  }
  std::vector<bool> bucketed(model.trace_tensor.size(), false);
  for (const auto& bucket : timing.buckets) {
    std::vector<size_t> members;
    for (size_t t : bucket) {
      if (t < replayed.size() && replayed[t] >= 0 && !bucketed[replayed[t]]) {
        members.push_back(static_cast<size_t>(replayed[t]));
        bucketed[replayed[t]] = true;
      }
    }
    if (!members.empty()) model.buckets.push_back(std::move(members));
  }
  // Without buckets (or for tensors none lists), each tensor goes on its own.
  for (size_t t = 0; t < bucketed.size(); ++t) {
    if (!bucketed[t]) model.buckets.push_back({t});
  }
  return model;
}

absl::Duration ReplayedCompute(const TraceTiming& timing, int steps) {
  double us = 0;
  for (int s = 0; s < steps && !timing.steps.empty(); ++s) {
    us += timing.steps[static_cast<size_t>(s) % timing.steps.size()].compute_us;
  }
  return absl::Microseconds(us);
}

absl::StatusOr<TimedReplay> RunTimedSteps(PsClient& ps, const TraceTiming& timing, const TimedModel& model,
                                          int steps, const std::function<void(int)>& fill,
                                          absl::Duration part_timeout) {
  std::vector<std::vector<size_t>> parts_of(model.buckets.size());
  for (size_t i = 0; i < ps.num_parts(); ++i) parts_of[ps.part(i).bucket].push_back(i);
  TimedReplay out;
  out.tensor_latency_us.resize(model.tensor_bytes.size());
  out.tensor_ready_to_back_us.resize(model.tensor_bytes.size());
  std::vector<absl::Time> started(ps.num_parts());
  size_t outstanding = 0;
  // On a failure, every part still out is waited for (its memory is in use until then).
  auto fail = [&](absl::Status first) {
    while (outstanding > 0) {
      auto back = ps.NextPart(absl::Now() + part_timeout);
      if (back.ok() && !back->has_value()) break;  // nothing more comes back
      --outstanding;
    }
    return first;
  };
  for (int s = 0; s < steps; ++s) {
    const size_t k = static_cast<size_t>(s) % timing.steps.size();
    const TraceTiming::Step& recorded = timing.steps[k];
    // Buckets in the order they became ready.
    std::vector<std::pair<double, size_t>> due;
    for (size_t b = 0; b < model.buckets.size(); ++b) due.push_back({BucketReady(recorded, model, b), b});
    std::stable_sort(due.begin(), due.end());
    fill(s);

    TimedStep step;
    step.bucket_ready_us.resize(model.buckets.size());
    step.bucket_start_us.resize(model.buckets.size());
    for (const auto& [ready, b] : due) step.bucket_ready_us[b] = ready;
    const absl::Time t0 = absl::Now();
    size_t next = 0;
    absl::Time last_back = t0;
    while (next < due.size() || outstanding > 0) {
      // Start every bucket that is due.
      for (absl::Time at = absl::Now(); next < due.size() && at >= t0 + absl::Microseconds(due[next].first);
           at = absl::Now()) {
        if (at - (t0 + absl::Microseconds(due[next].first)) > kLate) ++out.late_starts;
        step.bucket_start_us[due[next].second] = Micros(at - t0);
        for (size_t i : parts_of[due[next].second]) {
          started[i] = absl::Now();
          ps.StartPart(i, static_cast<uint64_t>(s));
          ++outstanding;
        }
        ++next;
      }
      const absl::Time now = absl::Now();
      const bool more = next < due.size();
      const absl::Time start_at = more ? t0 + absl::Microseconds(due[next].first) : absl::InfiniteFuture();
      if (outstanding == 0) {
        // Nothing to wait for but the next start: sleep most of the way, then poll.
        if (start_at - now > kSpinAhead) absl::SleepFor(start_at - now - kSpinAhead);
        continue;
      }
      const absl::Time deadline = more ? std::max(now, start_at - kSpinAhead) : now + part_timeout;
      auto back = ps.NextPart(deadline);
      if (!back.ok()) {
        --outstanding;
        return fail(back.status());
      }
      if (!back->has_value()) {
        if (more) continue;
        return fail(absl::DeadlineExceededError(absl::StrCat(
            "step ", s, ": ", outstanding, " parts not back within ", absl::FormatDuration(part_timeout))));
      }
      last_back = absl::Now();
      out.part_latency.Add(static_cast<uint64_t>(absl::ToInt64Nanoseconds(last_back - started[**back])));
      for (size_t t : ps.part(**back).tensors) {
        const auto& ready = recorded.ready_us[model.trace_tensor[t]];
        out.tensor_latency_us[t].push_back(Micros(last_back - started[**back]));
        out.tensor_ready_to_back_us[t].push_back(Micros(last_back - t0) - (ready ? *ready : recorded.compute_us));
      }
      --outstanding;
    }
    // The recorded time after the last gradient (the captured job's optimizer step and the
    // like) runs once the parameters are back: it needs them. So what the exchanges add to
    // the step is how long the last parts took past the end of the backward pass.
    const double backward_us = due.empty() ? 0 : due.back().first;
    const absl::Time backward_end = t0 + absl::Microseconds(backward_us);
    const absl::Time end =
        std::max(last_back, backward_end) + absl::Microseconds(recorded.compute_us - backward_us);
    if (absl::Now() < end) absl::SleepFor(end - absl::Now());
    step.step = static_cast<uint64_t>(s);
    step.trace_step = k;
    step.compute_us = recorded.compute_us;
    step.step_us = Micros(end - t0);
    step.exposed_us = step.step_us - step.compute_us;
    step.last_back_us = Micros(last_back - t0);
    out.steps.push_back(step);
  }
  return out;
}

nlohmann::json TimedReplayJson(const TimedReplay& replay, const TimedModel& model, const PsClient& ps) {
  nlohmann::json steps = nlohmann::json::array();
  std::vector<double> compute_us, step_us, exposed_us;
  for (const TimedStep& s : replay.steps) {
    steps.push_back({{"step", s.step},
                     {"trace_step", s.trace_step},
                     {"compute_us", s.compute_us},
                     {"step_us", s.step_us},
                     {"exposed_us", s.exposed_us},
                     {"last_back_us", s.last_back_us},
                     {"bucket_ready_us", s.bucket_ready_us},
                     {"bucket_start_us", s.bucket_start_us}});
    compute_us.push_back(s.compute_us);
    step_us.push_back(s.step_us);
    exposed_us.push_back(s.exposed_us);
  }
  const Histogram& h = replay.part_latency;
  std::vector<size_t> ps_of(model.tensor_bytes.size(), 0);
  for (size_t i = 0; i < ps.num_parts(); ++i) {
    for (size_t t : ps.part(i).tensors) ps_of[t] = ps.part(i).ps;
  }
  nlohmann::json tensors = nlohmann::json::array();
  for (size_t t = 0; t < model.tensor_bytes.size(); ++t) {
    std::vector<double> lat = replay.tensor_latency_us[t], wait = replay.tensor_ready_to_back_us[t];
    std::sort(lat.begin(), lat.end());
    std::sort(wait.begin(), wait.end());
    tensors.push_back({{"name", model.names[t]},
                       {"bytes", model.tensor_bytes[t]},
                       {"ps", ps_of[t]},
                       {"count", lat.size()},
                       {"latency_us", {{"p50", NearestRank(lat, 0.5)}, {"p90", NearestRank(lat, 0.9)},
                                       {"p99", NearestRank(lat, 0.99)}, {"max", NearestRank(lat, 1)}}},
                       {"ready_to_back_us", {{"p50", NearestRank(wait, 0.5)}, {"max", NearestRank(wait, 1)}}}});
  }
  return {{"mode", "timed"},
          {"tensors", model.tensor_bytes.size()},
          {"buckets", model.buckets.size()},
          {"parts", ps.num_parts()},
          {"steps", steps},
          {"median_compute_us", Median(compute_us)},
          {"median_step_us", Median(step_us)},
          {"median_exposed_us", Median(exposed_us)},
          {"late_starts", replay.late_starts},
          {"part_latency_us",
           {{"count", h.count()},
            {"p50", h.Percentile(0.5) / 1e3},
            {"p90", h.Percentile(0.9) / 1e3},
            {"p99", h.Percentile(0.99) / 1e3},
            {"max", static_cast<double>(h.max()) / 1e3}}},
          {"per_tensor", tensors}};
}

}  // namespace psbench
