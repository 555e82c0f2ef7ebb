// What an open-loop run shows (bench/open_loop.h): a row per measurement with its offered and
// achieved rate and the three views of its latency, and for a sweep the knee: the first rate
// at which the PS no longer keeps up.
#ifndef PSBENCH_BENCH_LOAD_REPORT_H_
#define PSBENCH_BENCH_LOAD_REPORT_H_

#include <cstdio>
#include <optional>
#include <vector>

#include "bench/record.h"
#include "nlohmann/json.hpp"

namespace psbench {

// A rate is past the knee when its corrected p99 is over kKneeP99Factor times the median p99
// of the lower rates not past it themselves, or its achieved rate falls below kKneeAchieved of the offered, or it
// dropped operations; the knee is the first rate from which every higher one is past it.
inline constexpr double kKneeP99Factor = 3;
inline constexpr double kKneeAchieved = 0.95;

// Reading a record's "load", which may come from any file: a field of another type than
// psbench writes reads as absent (an empty object, "", 0), never as an exception.
const nlohmann::json& LoadOf(const Record& r);  // the "load" object, or an empty one
const nlohmann::json& JsonObjectAt(const nlohmann::json& o, const char* key);
std::string JsonTextAt(const nlohmann::json& o, const char* key);
double JsonNumberAt(const nlohmann::json& o, const char* key);
uint64_t JsonCountAt(const nlohmann::json& o, const char* key);

struct LoadPoint {
  double offered_per_s = 0, achieved_per_s = 0;
  double p50_us = 0, p99_us = 0, p9999_us = 0;
  uint64_t dropped = 0;
};
// The point of an open-loop record (its "load"); nullopt for any other.
std::optional<LoadPoint> LoadPointOf(const Record& r);

struct Knee {
  size_t index = 0;  // into the points
  std::string why;   // "p99 4.2x its low-load value", "achieved 81 % of offered", ...
};
// `points` in the order measured (rising rates); nullopt when none is past the knee.
std::optional<Knee> FindKnee(const std::vector<LoadPoint>& points);

// The total's "load" over the workers of a throughput run: rates and counts added up, the
// histograms merged (their percentiles then over every worker's operations).
nlohmann::json MergeOpenLoop(const std::vector<Record>& workers);

// Prints the open-loop table of `records` (those with a "load"; the headline ones: a
// throughput run's totals), then for several rates of one series the knee. Nothing when no
// record is open-loop.
void PrintOpenLoop(std::FILE* out, const std::vector<Record>& records);

}  // namespace psbench

#endif  // PSBENCH_BENCH_LOAD_REPORT_H_
