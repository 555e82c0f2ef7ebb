// The open-loop benchmark loop (--load=constant:RATE | poisson:RATE, bench/load.h): each
// operation has a planned start; the worker sends it then, without waiting for earlier ones,
// and a late one (the worker was busy, or --max-in-flight operations were out) goes the
// moment it can, never skipped. Each operation is timed three ways: from its planned start to
// its completion (corrected for coordinated omission), from its actual send (uncorrected),
// and its send's lag behind the plan.
#ifndef PSBENCH_BENCH_OPEN_LOOP_H_
#define PSBENCH_BENCH_OPEN_LOOP_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "bench/load.h"
#include "bench/runner.h"
#include "bench/scenario.h"
#include "nlohmann/json.hpp"
#include "transports/transport.h"

namespace psbench {

// The record's "load" object for a measurement `m` with open-loop figures: the schedule, what
// it planned and what came of it (rates, deferred, dropped), the three histograms' percentiles
// in µs and the histograms themselves (bench/hdr_text.h).
nlohmann::json OpenLoopRecord(const Measurement& m);

class OpenLoop {
 public:
  // Operations go to PS 0, or for throughput to every PS in turn; `seed` seeds the schedule.
  OpenLoop(const Scenario& s, Client& client, const PayloadSet& payloads, uint64_t seed);

  size_t servers() const { return servers_; }

  // One phase: `count` operations per PS when count > 0, else those planned in `duration`
  // (sent by the time it is up; any still unsent then are dropped, and counted). Waits for
  // everything it sent. With `m`, fills its latency (corrected), bytes and counts, seconds
  // (the phase's start to its last completion) and open_loop.
  absl::Status Phase(int64_t count, absl::Duration duration, Measurement* m);

 private:
  struct Slot {
    size_t server = 0;
    size_t payload = 0;     // in the server's list
    uint64_t planned_ns = 0;
    uint64_t sent_ns = 0;
  };
  void Issue(uint32_t slot, size_t server, uint64_t planned_ns);
  // A timed wait meant to end at `meant_ns` is over: widens or narrows spin_ns_.
  void Woke(uint64_t meant_ns);
  uint64_t Bytes(const Slot& slot) const;

  const Scenario& s_;
  Client& client_;
  const PayloadSet& payloads_;
  const uint64_t seed_;
  Op op_;
  size_t servers_ = 1;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;        // slots not in flight
  std::vector<size_t> next_payload_;  // per server
  uint64_t spin_ns_ = 100'000;        // polls, not waits, this close to a planned start
  double mean_late_ns_ = 0;           // recent mean overshoot of a timed wait
};

}  // namespace psbench

#endif  // PSBENCH_BENCH_OPEN_LOOP_H_
