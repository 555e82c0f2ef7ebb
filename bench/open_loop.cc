#include "bench/open_loop.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "bench/hdr_text.h"
#include "bench/progress.h"

namespace psbench {
namespace {

uint64_t NowNs() { return SteadyNowNs(); }

// The worker waits (sleeps, or waits for completions) until this close to the next planned
// start, then polls: a wait can overshoot its deadline by a timer's slack and a wake-up, a
// poll by microseconds. How close adapts to the overshoot seen (a VM's wake-ups can take
// hundreds of microseconds), within these bounds.
constexpr uint64_t kMinSpinNs = 20'000, kMaxSpinNs = 2'000'000, kSpinMarginNs = 20'000;

}  // namespace

nlohmann::json OpenLoopRecord(const Measurement& m) {
  const OpenLoopFigures& f = *m.open_loop;
  return {{"schedule", LoadName(f.schedule)},
          {"kind", LoadKindName(f.schedule.kind)},
          {"rate_per_s", f.schedule.rate},
          {"seed", f.seed},
          {"max_in_flight", f.max_in_flight},
          {"planned", f.planned},
          {"completed", m.ops},
          {"deferred", f.deferred},
          {"dropped", f.dropped},
          {"offered_per_s", f.schedule.rate},
          {"achieved_per_s", m.seconds > 0 ? static_cast<double>(m.ops) / m.seconds : 0.0},
          {"corrected_us", PercentilesJson(m.latency)},
          {"uncorrected_us", PercentilesJson(f.uncorrected)},
          {"lag_us", PercentilesJson(f.lag)},
          {"histograms",
           {{"corrected", HistogramToJson(m.latency)},
            {"uncorrected", HistogramToJson(f.uncorrected)},
            {"lag", HistogramToJson(f.lag)}}}};
}

OpenLoop::OpenLoop(const Scenario& s, Client& client, const PayloadSet& payloads, uint64_t seed)
    : s_(s), client_(client), payloads_(payloads), seed_(seed) {
  op_ = s.benchmark == Benchmark::kLatency ? Op::kEcho : Op::kPush;
  servers_ = s.benchmark == Benchmark::kThroughput ? client.num_servers() : 1;
  slots_.resize(static_cast<size_t>(s.max_in_flight));
  for (size_t i = slots_.size(); i > 0; --i) free_.push_back(static_cast<uint32_t>(i - 1));
  next_payload_.assign(servers_, 0);
}

void OpenLoop::Woke(uint64_t meant_ns) {
  const uint64_t now = NowNs();
  const uint64_t late = now > meant_ns ? now - meant_ns : 0;
  // Twice the recent mean overshoot: a rare slow wake-up (a VM's hiccup) is paid for once
  // rather than spun against at every operation.
  mean_late_ns_ += (static_cast<double>(late) - mean_late_ns_) / 16;
  spin_ns_ = std::clamp(static_cast<uint64_t>(2 * mean_late_ns_) + kSpinMarginNs, kMinSpinNs, kMaxSpinNs);
}

uint64_t OpenLoop::Bytes(const Slot& slot) const {
  return payloads_.bytes[payloads_.list(slot.server)][slot.payload];
}

void OpenLoop::Issue(uint32_t slot_index, size_t server, uint64_t planned_ns) {
  Slot& slot = slots_[slot_index];
  const std::vector<int>& ids = payloads_.ids[payloads_.list(server)];
  size_t& next = next_payload_[server];
  slot.server = server;
  slot.payload = next;
  next = (next + 1) % ids.size();
  slot.planned_ns = planned_ns;
  slot.sent_ns = NowNs();
  client_.Start(op_, server, ids[slot.payload], slot_index);
}

absl::Status OpenLoop::Phase(int64_t count, absl::Duration duration, Measurement* m) {
  const bool by_count = count > 0;
  if (!by_count && duration <= absl::ZeroDuration()) return absl::OkStatus();
  // A count is per PS, as in the closed loop; operations go to the PS in turn.
  const uint64_t total = by_count ? static_cast<uint64_t>(count) * servers_ : 0;
  const uint64_t span_ns = by_count ? 0 : static_cast<uint64_t>(absl::ToInt64Nanoseconds(duration));
  // The measurement draws its schedule from the seed the record gives; the warm-up another.
  OpenLoopFigures f;
  f.schedule = s_.load;
  f.seed = m != nullptr ? seed_ : seed_ + 1;
  f.max_in_flight = static_cast<int>(slots_.size());
  Arrivals arrivals(s_.load, f.seed);
  LoopProgress().StartPhase(m != nullptr ? LoopCounters::kMeasure : LoopCounters::kWarmup);

  const uint64_t start = NowNs();
  uint64_t planned = 0;  // operations taken from the schedule: sent or dropped
  uint64_t next_at = start + arrivals.Next();
  auto more = [&] { return by_count ? planned < total : next_at - start < span_ns; };
  auto advance = [&] {
    ++planned;
    next_at = start + arrivals.Next();
  };
  bool has_next = more();
  bool time_up = false;   // sending stopped with operations still due
  bool deferred = false;  // the next operation already found every slot taken
  size_t in_flight = 0;
  uint64_t last = start;
  const absl::Duration patience = s_.rpc_timeout + absl::Seconds(10);
  while (has_next || in_flight > 0) {
    // Send every operation that is due, as long as a slot is free.
    for (uint64_t now = NowNs(); has_next && next_at <= now;) {
      if (free_.empty()) {
        if (!deferred) ++f.deferred;
        deferred = true;
        break;
      }
      deferred = false;
      const uint32_t slot = free_.back();
      free_.pop_back();
      Issue(slot, planned % servers_, next_at);
      if (m != nullptr) f.lag.Add(slots_[slot].sent_ns - next_at);
      ++in_flight;
      advance();
      has_next = more();
    }
    // Time is up: what the schedule planned within it and --max-in-flight keeps back is
    // dropped (counted once the operations out are back: reaping them comes first).
    if (!by_count && has_next && free_.empty() && NowNs() >= start + span_ns) {
      time_up = true;
      has_next = false;
    }
    // Wait for a completion, or until the next planned start is near; then poll (always with
    // --busy-poll).
    const bool can_send = has_next && !free_.empty();
    absl::Time deadline = absl::Now() + patience;
    uint64_t wake_ns = 0;  // when a timed wait is meant to end; 0: none
    bool until_time_up = false;  // waiting on the cap, at most until the time is up
    if (!can_send && has_next && !by_count) {
      const uint64_t now = NowNs();
      const absl::Duration left = absl::Nanoseconds(start + span_ns > now ? start + span_ns - now : 0);
      if (left < patience) {
        deadline = absl::Now() + left;
        until_time_up = true;
      }
    }
    if (can_send) {
      const uint64_t now = NowNs();
      if (s_.busy_poll || next_at <= now + spin_ns_) {
        deadline = absl::Now();
      } else {
        wake_ns = next_at - spin_ns_;
        deadline = absl::Now() + absl::Nanoseconds(wake_ns - now);
      }
      if (in_flight == 0) {
        if (wake_ns != 0) {
          absl::SleepFor(deadline - absl::Now());
          Woke(wake_ns);
        }
        continue;
      }
    }
    if (in_flight == 0) continue;
    auto c = client_.Next(deadline);
    if (!c.ok()) {
      if (c.status().code() != absl::StatusCode::kDeadlineExceeded) return c.status();
      if (can_send || until_time_up) {
        if (wake_ns != 0) Woke(wake_ns);
        continue;
      }
      return absl::DeadlineExceededError(
          absl::StrCat("no reply from any PS within ", absl::FormatDuration(patience)));
    }
    if (!c->status.ok()) return c->status;
    const uint64_t done = NowNs();
    --in_flight;
    // The next operation fell due while every slot was out (the worker was waiting for this
    // reply): deferred, though it goes at once now.
    if (free_.empty() && has_next && next_at <= done && !deferred) {
      ++f.deferred;
      deferred = true;
    }
    const Slot& slot = slots_[c->tag];
    free_.push_back(static_cast<uint32_t>(c->tag));
    if (m != nullptr) {
      m->latency.Add(done - slot.planned_ns);
      f.uncorrected.Add(done - slot.sent_ns);
      m->ops += 1;
      m->bytes += Bytes(slot);
      m->ops_per_ps[slot.server] += 1;
    }
    last = done;
    LoopProgress().Completed(Bytes(slot));
  }
  // By time, the phase is the schedule's whole span, even when nothing is planned in its
  // tail: the achieved rate is over the time offered (not to the last completion, which a
  // slow Poisson schedule can put far before the end), and the CPU read after it too.
  if (!by_count) {
    if (const uint64_t now = NowNs(); now < start + span_ns) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(start + span_ns - now));
    }
    last = std::max(last, start + span_ns);
  }
  if (m != nullptr) {
    for (; time_up && more(); advance()) ++f.dropped;
    f.planned = planned;
    m->seconds = static_cast<double>(last - start) / 1e9;
    m->open_loop = std::move(f);
  }
  return absl::OkStatus();
}

}  // namespace psbench
