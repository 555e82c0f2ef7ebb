// Results: one JSON record per result (the machine-readable truth, JSON Lines), and the
// perftest/OSU-style table people read, printed from those same records.
#ifndef PSBENCH_BENCH_REPORT_H_
#define PSBENCH_BENCH_REPORT_H_

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/runner.h"
#include "bench/scenario.h"
#include "nlohmann/json.hpp"
#include "payloads/spec.h"

namespace psbench {

// The record of one measured plan, from the worker's point of view (scope "worker").
nlohmann::json MakeRecord(const Scenario& scenario, const PayloadPlan& plan,
                          const Measurement& m);

// Sums per-worker throughput records of one plan into a record with scope "total":
// rpc_per_s and mb_per_s add up; latency histograms are not mergeable from JSON, so the
// total carries the worst worker p99 instead.
nlohmann::json AggregateThroughput(const std::vector<nlohmann::json>& workers);

// Appends records as JSON Lines to `path`, or to stdout for "-".
absl::Status AppendJsonLines(const std::string& path, const std::vector<nlohmann::json>& records);
absl::StatusOr<std::vector<nlohmann::json>> ReadJsonLines(const std::string& path);

// Prints records as tables: a header block whenever what is measured changes, then one row
// per record.
class TablePrinter {
 public:
  explicit TablePrinter(std::FILE* out = stdout) : out_(out) {}
  void Print(const nlohmann::json& record);

 private:
  std::FILE* out_;
  std::string last_header_;
};

}  // namespace psbench

#endif  // PSBENCH_BENCH_REPORT_H_
