#include "bench/runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "bench/open_loop.h"
#include "bench/progress.h"
#include "fmt/core.h"

namespace psbench {
namespace {

uint64_t NowNs() { return SteadyNowNs(); }

struct Slot {
  size_t server = 0;
  size_t payload = 0;  // in the server's list
  uint64_t start_ns = 0;
};

class Loop {
 public:
  Loop(const Scenario& s, Client& client, const PayloadSet& payloads)
      : s_(s), client_(client), payloads_(payloads) {
    op_ = s.benchmark == Benchmark::kLatency ? Op::kEcho : Op::kPush;
    size_t servers = s.benchmark == Benchmark::kThroughput ? client.num_servers() : 1;
    int depth = s.benchmark == Benchmark::kLatency     ? 1
                : s.benchmark == Benchmark::kBandwidth ? s.window
                                                       : s.outstanding;
    // Slots interleave servers so that the first round reaches every PS early.
    for (int d = 0; d < depth; ++d) {
      for (size_t srv = 0; srv < servers; ++srv) slots_.push_back(Slot{srv, 0, 0});
    }
    servers_ = servers;
    next_payload_.assign(servers, 0);
  }

  size_t servers() const { return servers_; }

  // One phase: by count when count > 0, else by time. Waits for everything it issued.
  absl::Status Phase(int64_t count, absl::Duration duration, Measurement* m) {
    // A count is per PS (--iterations=N sends N operations to every PS), so it is kept per
    // PS: a slot is refilled only while its own PS has operations left, and a faster PS
    // cannot take a slower one's share.
    uint64_t limit = count > 0 ? static_cast<uint64_t>(count) : 0;
    uint64_t start = NowNs();
    const absl::Time wall_start = absl::Now();  // with `start`, to turn the loop's reads into absl::Time
    uint64_t end = start + static_cast<uint64_t>(absl::ToInt64Nanoseconds(duration));
    std::vector<uint64_t> issued(servers_, 0);
    size_t in_flight = 0;
    auto may_issue = [&](size_t server, uint64_t now) {
      return limit > 0 ? issued[server] < limit : now < end;
    };
    if (limit == 0 && duration <= absl::ZeroDuration()) return absl::OkStatus();
    LoopProgress().StartPhase(m != nullptr ? LoopCounters::kMeasure : LoopCounters::kWarmup);
    // The first round goes out however short the phase: it starts at `start`, and a
    // measurement by time always holds operations (none would read as 0 µs).
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (limit > 0 && !may_issue(slots_[i].server, start)) continue;
      Issue(i);
      ++issued[slots_[i].server];
      ++in_flight;
    }
    uint64_t last = start;
    // Next's deadline runs from the last completion, on the loop's own steady-clock reads
    // (absl::Now() costs about 55 ns a call on a VM, a tenth of a small message's time in a
    // window over shared memory); a wall-clock step during the phase moves it by as much,
    // which a patience of rpc_timeout + 10 s absorbs.
    const absl::Duration patience = s_.rpc_timeout + absl::Seconds(10);
    absl::Time deadline = absl::Now() + patience;
    while (in_flight > 0) {
      auto c = client_.Next(deadline);
      if (!c.ok()) {
        return absl::DeadlineExceededError(
            absl::StrCat("no reply from any PS within ", absl::FormatDuration(patience)));
      }
      if (!c->status.ok()) return c->status;
      uint64_t now = NowNs();
      deadline = wall_start + absl::Nanoseconds(now - start) + patience;
      --in_flight;
      Slot& slot = slots_[c->tag];
      if (m != nullptr) {
        m->latency.Add(now - slot.start_ns);
        m->ops += 1;
        m->bytes += Bytes(slot);
        m->ops_per_ps[slot.server] += 1;
      }
      last = now;
      LoopProgress().Completed(Bytes(slot));
      if (may_issue(slot.server, now)) {
        Issue(c->tag);
        ++issued[slot.server];
        ++in_flight;
      }
    }
    if (m != nullptr) m->seconds = static_cast<double>(last - start) / 1e9;
    return absl::OkStatus();
  }

 private:
  uint64_t Bytes(const Slot& slot) const { return payloads_.bytes[payloads_.list(slot.server)][slot.payload]; }

  void Issue(size_t slot_index) {
    Slot& slot = slots_[slot_index];
    const std::vector<int>& ids = payloads_.ids[payloads_.list(slot.server)];
    size_t& next = next_payload_[slot.server];
    slot.payload = next;
    next = (next + 1) % ids.size();
    slot.start_ns = NowNs();
    client_.Start(op_, slot.server, ids[slot.payload], slot_index);
  }

  const Scenario& s_;
  Client& client_;
  const PayloadSet& payloads_;
  Op op_;
  size_t servers_ = 1;
  std::vector<Slot> slots_;
  std::vector<size_t> next_payload_;  // per server
};

absl::StatusOr<std::vector<CpuTimes>> PsCpu(Client& client, size_t servers,
                                            std::vector<ServerInfo>* infos) {
  std::vector<CpuTimes> cpu;
  for (size_t i = 0; i < servers; ++i) {
    auto info = client.GetInfo(i);
    if (!info.ok()) return info.status();
    cpu.push_back({info->cpu_user_s, info->cpu_system_s});
    if (infos) infos->push_back(*info);
  }
  return cpu;
}

}  // namespace

std::vector<int> PayloadSet::all_ids() const {
  std::vector<int> out;
  for (const auto& list : ids) out.insert(out.end(), list.begin(), list.end());
  return out;
}

absl::StatusOr<PayloadSet> RegisterPayloads(const Scenario& scenario, Client& client, const PayloadPlan& plan,
                                            std::vector<std::unique_ptr<Payload>>* owned) {
  const size_t servers = client.num_servers();
  const bool place = PlacesOverPs(scenario, servers);
  std::vector<std::vector<Shard>> placed;
  if (place) {
    auto p = PlaceOverPs(plan, servers);
    if (!p.ok()) return p.status();
    placed = std::move(*p);
  }
  PayloadSet set;
  set.ids.resize(place ? servers : 1);
  set.bytes.resize(set.ids.size());
  if (place) set.shards.resize(servers);
  auto add = [&](size_t list, const std::vector<uint64_t>& sizes, uint64_t seed) -> absl::Status {
    owned->push_back(std::make_unique<Payload>(sizes, seed));
    auto id = client.Register(*owned->back());
    if (!id.ok()) return id.status();
    set.ids[list].push_back(*id);
    set.bytes[list].push_back(owned->back()->total_bytes());
    return absl::OkStatus();
  };
  for (size_t i = 0; i < plan.payloads.size(); ++i) {
    const std::vector<uint64_t> sizes = plan.Sizes(i);
    if (!place) {
      if (absl::Status s = add(0, sizes, scenario.payload.seed + i); !s.ok()) return s;
      continue;
    }
    const std::vector<Shard>& shards = placed[i];
    for (size_t p = 0; p < servers; ++p) {
      std::vector<uint64_t> part;
      for (size_t t : shards[p].tensors) part.push_back(sizes[t]);
      if (absl::Status s = add(p, part, scenario.payload.seed + i * servers + p); !s.ok()) return s;
      set.shards[p].tensors.insert(set.shards[p].tensors.end(), shards[p].tensors.begin(), shards[p].tensors.end());
      set.shards[p].bytes += shards[p].bytes;
    }
  }
  return set;
}

absl::Status AwaitPeers(Client& client, const Scenario& s, const std::string& name, absl::Time deadline) {
  const absl::Time start = absl::Now();
  absl::Duration say_at = absl::Seconds(2);
  while (true) {
    const absl::Time until = std::min(deadline, start + say_at);
    absl::Status st = client.Barrier(name, s.num_workers, s.worker_index, until);
    if (st.code() != absl::StatusCode::kDeadlineExceeded) return st;
    if (until >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          st.message(), " after ", absl::FormatDuration(absl::Trunc(absl::Now() - start + absl::Milliseconds(500), absl::Seconds(1)))));
    }
    // Not silent while it waits: who is missing, now and then.
    fmt::print(stderr, "psbench-worker {}: waiting {:.0f} s so far: {}\n", s.worker_index,
               absl::ToDoubleSeconds(absl::Now() - start), std::string(st.message()));
    std::fflush(stderr);
    say_at += absl::Seconds(10);
  }
}

absl::StatusOr<Measurement> RunBenchmark(const Scenario& scenario, Client& client,
                                         const PayloadSet& payloads, size_t plan_index) {
  auto sync = [&](const char* phase) -> absl::Status {
    if (scenario.num_workers <= 1) return absl::OkStatus();
    // At the first barrier the others have only to start and connect; later, another worker
    // may still be warming up by count or finishing slow operations.
    const bool first = plan_index == 0 && std::string_view(phase) == "warmup";
    absl::Time deadline = absl::Now() + scenario.connect_timeout + absl::Seconds(first ? 10 : 30) +
                          (first ? absl::ZeroDuration() : 2 * scenario.rpc_timeout + scenario.warmup);
    return AwaitPeers(client, scenario, absl::StrCat(scenario.run_id, "/plan-", plan_index, "/", phase),
                      deadline);
  };
  // Closed loop (a window of operations in flight) or open loop (arrivals at a rate).
  std::optional<Loop> closed;
  std::optional<OpenLoop> open;
  if (scenario.load.open()) {
    open.emplace(scenario, client, payloads, LoadSeed(scenario.payload.seed, scenario.worker_index));
  } else {
    closed.emplace(scenario, client, payloads);
  }
  const size_t servers = open ? open->servers() : closed->servers();
  auto phase = [&](int64_t count, absl::Duration duration, Measurement* m) {
    return open ? open->Phase(count, duration, m) : closed->Phase(count, duration, m);
  };
  LoopProgress().plan.store(static_cast<int>(plan_index), std::memory_order_relaxed);
  LoopProgress().StartPhase(LoopCounters::kIdle);  // waiting for the other workers
  if (absl::Status s = sync("warmup"); !s.ok()) return s;
  bool warm_by_count = scenario.warmup_iterations >= 0;
  if (absl::Status s = phase(warm_by_count ? scenario.warmup_iterations : 0,
                             warm_by_count ? absl::ZeroDuration() : scenario.warmup, nullptr);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = sync("measure"); !s.ok()) return s;
  Measurement m;
  m.ops_per_ps.assign(servers, 0);
  std::vector<ServerInfo> before;
  auto ps_before = PsCpu(client, servers, &before);
  if (!ps_before.ok()) return ps_before.status();
  CpuTimes cpu_before = ProcessCpuTimes();
  m.moved_before = {client.Counts(), before};
  m.start = absl::Now();
  if (absl::Status s = phase(scenario.iterations, scenario.duration, &m); !s.ok()) return s;
  m.moved_after.worker = client.Counts();
  // The last completion (not when the loop returned: an open loop then counts what it dropped).
  m.end = m.start + absl::Seconds(m.seconds);
  CpuTimes cpu_after = ProcessCpuTimes();
  auto ps_after = PsCpu(client, servers, &m.ps_info);
  if (!ps_after.ok()) return ps_after.status();
  m.moved_after.ps = m.ps_info;
  m.worker_cpu = {cpu_after.user_s - cpu_before.user_s, cpu_after.system_s - cpu_before.system_s};
  for (size_t i = 0; i < servers; ++i) {
    m.ps_cpu.push_back({(*ps_after)[i].user_s - (*ps_before)[i].user_s,
                        (*ps_after)[i].system_s - (*ps_before)[i].system_s});
    m.ps_rpcs.push_back(m.ps_info[i].rpcs_served - before[i].rpcs_served);
    m.ps_bytes.push_back(m.ps_info[i].bytes_received - before[i].bytes_received);
    m.ps_sessions_lost.push_back(m.ps_info[i].sessions_lost - before[i].sessions_lost);
  }
  return m;
}

}  // namespace psbench
