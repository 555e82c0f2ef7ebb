// Offered load (--load, --load-sweep): closed loop, where a worker starts an operation when one
// finishes, or open loop, where each operation has a planned start time from a seeded schedule
// (constant or Poisson, a rate per worker) and goes out then whether or not earlier ones are
// back. Open-loop latency is measured from the planned start (corrected for coordinated
// omission: a stall delays every operation planned behind it, and each one counts it).
#ifndef PSBENCH_BENCH_LOAD_H_
#define PSBENCH_BENCH_LOAD_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psbench {

enum class LoadKind { kClosed, kConstant, kPoisson };

struct LoadSchedule {
  LoadKind kind = LoadKind::kClosed;
  double rate = 0;  // open loop: operations per second per worker

  bool open() const { return kind != LoadKind::kClosed; }
  bool operator==(const LoadSchedule&) const = default;
};

// The least and the most an open-loop schedule may offer (operations per second), and the most
// points a sweep may have.
inline constexpr double kMinLoadRate = 1e-3;
inline constexpr double kMaxLoadRate = 1e8;
inline constexpr size_t kMaxLoadSweepPoints = 64;
// The default --max-in-flight: operations of one worker out at once under open-loop load.
inline constexpr int kDefaultMaxInFlight = 1024;
inline constexpr int kMaxMaxInFlight = 1 << 16;

// "closed", "constant:1000", "poisson:64000": what --load takes and records carry.
std::string LoadName(const LoadSchedule& s);
absl::string_view LoadKindName(LoadKind k);
// "closed", "constant" or "poisson"; INVALID_ARGUMENT otherwise (with no text: callers say).
absl::StatusOr<LoadKind> ParseLoadKind(absl::string_view text);
// Parses --load's text; errors name `flag` and say what is accepted. A rate is a positive
// number of operations per second, with an optional k or M (e.g. 2.5k), at most kMaxLoadRate.
absl::StatusOr<LoadSchedule> ParseLoad(absl::string_view text, absl::string_view flag = "--load");

// --load-sweep=KIND:LO..HI*FACTOR: the open-loop schedule at LO, LO*FACTOR, ... up to HI.
struct LoadSweep {
  LoadKind kind = LoadKind::kPoisson;
  double lo = 0, hi = 0, factor = 2;

  bool operator==(const LoadSweep&) const = default;
};
std::string LoadSweepName(const LoadSweep& s);
// Refuses a closed kind, a rate that ParseLoad would, LO > HI, a FACTOR that is not above 1
// (a sweep that never ends) and more than kMaxLoadSweepPoints points.
absl::StatusOr<LoadSweep> ParseLoadSweep(absl::string_view text, absl::string_view flag = "--load-sweep");
absl::Status CheckLoadSweep(const LoadSweep& s, absl::string_view flag = "--load-sweep");
std::vector<LoadSchedule> SweepPoints(const LoadSweep& s);

// The seed of worker `worker_index`'s schedule in a run seeded `seed`: workers of one run
// differ, runs with one seed repeat.
uint64_t LoadSeed(uint64_t seed, int worker_index);

// Planned start times of an open-loop schedule, as offsets from its start in ns: operation i
// of a constant schedule at i / rate after an offset within the first period drawn from the
// seed (workers of one run do not send in lockstep), a Poisson one's first at 0 and the others
// after exponential gaps of mean 1 / rate.
class Arrivals {
 public:
  Arrivals(const LoadSchedule& s, uint64_t seed);
  // The next operation's planned offset, ns.
  uint64_t Next();

 private:
  LoadSchedule schedule_;
  std::mt19937_64 rng_;
  std::exponential_distribution<double> gap_;
  uint64_t index_ = 0;
  double at_ns_ = 0;  // Poisson: the next start; constant: the offset
};

}  // namespace psbench

#endif  // PSBENCH_BENCH_LOAD_H_
