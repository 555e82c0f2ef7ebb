// Results: one JSON record per result (the machine-readable truth, JSON Lines), and the
// perftest/OSU-style table people read, printed from those same records.
#ifndef PSBENCH_BENCH_REPORT_H_
#define PSBENCH_BENCH_REPORT_H_

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "bench/record.h"
#include "bench/runner.h"
#include "bench/scenario.h"
#include "nlohmann/json.hpp"
#include "payloads/spec.h"

namespace psbench {

// The record of one measured plan, from the worker's point of view (scope "worker").
Record MakeRecord(const Scenario& scenario, const PayloadPlan& plan, const Measurement& m);

// Sums per-worker throughput records of one plan into a record with scope "total":
// rpc_per_s and mb_per_s add up; latency histograms are not mergeable from records, so the
// total carries the worst worker p99 instead.
Record AggregateThroughput(const std::vector<Record>& workers);

// Appends records as JSON Lines to `path`, or to stdout for "-". A regular file is synced
// before it returns. Errors name the path, the errno and how many records were not saved:
// INVALID_ARGUMENT for a path that names no writable file (no such directory, a directory,
// permission), UNAVAILABLE for a disk that cannot take it (read-only, full, I/O error).
absl::Status AppendJsonLines(const std::string& path, const std::vector<Record>& records);
// Before measuring: that no output of this program would write over one of its inputs
// (CheckOutputsSpareInputs, exit 2), and that the --json `path` ("" = none) can take records
// (AppendJsonLines(path, {})), else "<program>: <why>" and exit 2 for a bad path (bad input),
// 1 for a read-only, full or failing disk (a runtime failure).
// `inputs`: files the program reads that no flag names (a scenario's trace); `hdr_out`: the
// --hdr-out prefix as the program will use it ("" = the flag's).
void CheckOutputsOrDie(absl::string_view program, const std::string& path,
                       const std::vector<NamedPath>& inputs = {}, const std::string& hdr_out = "");
// For a command that prints tables (psbench run, ssh, slurm, mpirun, train): with --json=-
// (`path`), records alone go to stdout, as psbench-worker's do; everything else printed on
// stdout goes to stderr from here on.
void KeepStdoutForRecords(absl::string_view program, const std::string& path);
absl::StatusOr<std::vector<nlohmann::json>> ReadJsonLines(const std::string& path);

// Prints payload benchmark records as tables (bench/figures.h has each benchmark's row): a
// header block whenever what is measured changes, then one row per record. Other records
// are not printed here.
class TablePrinter {
 public:
  explicit TablePrinter(std::FILE* out = stdout) : out_(out) {}
  void Print(const Record& record);

 private:
  std::FILE* out_;
  std::string last_header_;
  std::string last_repetition_;
};

}  // namespace psbench

#endif  // PSBENCH_BENCH_REPORT_H_
