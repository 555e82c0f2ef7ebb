// Bounds every floor program checks its flags against (the MPI floor defines its own flags).
#ifndef PSBENCH_BENCH_FLOORS_FLOOR_LIMITS_H_
#define PSBENCH_BENCH_FLOORS_FLOOR_LIMITS_H_

#include <cstdint>

namespace psbench::floors {

// A ping-pong keeps every measured round trip (8 bytes each) to sort for its percentiles.
inline constexpr int64_t kMaxIterations = 100'000'000;
// Messages in flight, as psbench's own --window.
inline constexpr int kMaxWindow = 4096;

}  // namespace psbench::floors

#endif  // PSBENCH_BENCH_FLOORS_FLOOR_LIMITS_H_
