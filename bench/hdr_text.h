// An open-loop measurement's histograms outside the process: compactly in its record (so a
// driver can write and merge them wherever the worker ran), and as HdrHistogram's percentile
// text (the "classic" .hgrm that HdrHistogram's tools print and its plotter reads), with
// values in microseconds.
#ifndef PSBENCH_BENCH_HDR_TEXT_H_
#define PSBENCH_BENCH_HDR_TEXT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/histogram.h"
#include "bench/record.h"
#include "inputs/input_file.h"
#include "nlohmann/json.hpp"

namespace psbench {

// {"unit": "ns", "sub_bits": 10, "counts": [bucket delta, count, ...], "min", "max", "sum",
// "sum_sq"}: each bucket given as its distance from the previous one.
nlohmann::json HistogramToJson(const Histogram& h);
absl::StatusOr<Histogram> HistogramFromJson(const nlohmann::json& j);

// {"count", "min", "p50", "p90", "p99", "p999", "p9999", "max", "mean"}, in µs.
nlohmann::json PercentilesJson(const Histogram& h);

// The percentile distribution, as HdrHistogram prints it: a line per reporting level
// (`ticks_per_half` levels per halving of the distance to 100 %), then mean, standard
// deviation, max and count.
std::string HdrPercentileText(const Histogram& h, int ticks_per_half = 5);

// The three histograms an open-loop record carries ("load": {"histograms": {...}}).
inline constexpr const char* kLoadHistograms[] = {"corrected", "uncorrected", "lag"};

// Writes `prefix`.<histogram>.hgrm for the one record of `records` with open-loop histograms,
// or `prefix`.<n>.<histogram>.hgrm for the n-th (from 1) when several have them. Returns a
// line per measurement naming its files and what it was; an error names the file.
absl::StatusOr<std::vector<std::string>> WriteHdrFiles(const std::string& prefix, const std::vector<Record>& records);
// For psbench's drivers: writes them when `prefix` is not empty and prints "# wrote ..." for
// each measurement on stdout; on a failure says why on stderr and returns kExitRuntime, else 0.
int WriteHdrOrWarn(const std::string& prefix, const std::vector<Record>& records);
// Before measuring: INVALID_ARGUMENT naming --hdr-out when `prefix`.corrected.hgrm cannot be
// written (a missing directory, no permission) or `prefix` names no file (it ends in "/");
// leaves nothing behind.
absl::Status CheckHdrOut(const std::string& prefix);
// INVALID_ARGUMENT naming both when a file that --hdr-out=`prefix` may write (any
// `prefix`[.N].<histogram>.hgrm) is one of `files`, the invocation's inputs and other outputs:
// by path, or, for such a file that exists, as another name of one of them.
absl::Status CheckHdrOutSpares(const std::string& prefix, const std::vector<NamedPath>& files);

}  // namespace psbench

#endif  // PSBENCH_BENCH_HDR_TEXT_H_
