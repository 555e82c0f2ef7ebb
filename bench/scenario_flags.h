// The scenario flags shared by psbench-worker and `psbench run` (same options on both sides,
// as perftest does).
#ifndef PSBENCH_BENCH_SCENARIO_FLAGS_H_
#define PSBENCH_BENCH_SCENARIO_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "bench/scenario.h"

namespace psbench {

// Builds a scenario from the flags and validates it (without reading trace files).
absl::StatusOr<Scenario> ScenarioFromFlags();

// --max-input-size in bytes: the cap on every text input of the command (trace, scenario file,
// report inputs).
uint64_t MaxInputSize();

// --hdr-out: where an open-loop measurement's histograms go ("" none; bench/hdr_text.h).
std::string HdrOutFlag();

}  // namespace psbench

#endif  // PSBENCH_BENCH_SCENARIO_FLAGS_H_
