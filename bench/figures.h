// What each payload benchmark reports: the fields its records get from a measurement, its
// headline figures (the ones every comparison shows: the --transports table, psbench report,
// the comparison records), and its row in the terminal table. A new benchmark kind is one
// entry here, its loop in runner.cc and its name in scenario.h/.cc; every record, table,
// report and comparison follows from the entry.
#ifndef PSBENCH_BENCH_FIGURES_H_
#define PSBENCH_BENCH_FIGURES_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "bench/record.h"
#include "bench/runner.h"
#include "bench/table.h"

namespace psbench {

struct Figure {
  const char* key;   // in comparison records and code: "p50_us", "mb_per_s", ...
  const char* name;  // "p50": a ratio column's name
  const char* unit;  // "µs"; "" where the name says it ("MB/s")
  int decimals;
  bool tail = false;      // a tail percentile: shown only from 100 iterations (below, the maximum)
  bool compared = true;   // a ratio column in comparisons (not for one that moves with another)
  std::optional<double> (*value)(const Record&) = nullptr;

  // A value column's name: "p50 µs", "MB/s".
  std::string Column() const { return *unit ? std::string(name) + " " + unit : std::string(name); }
};

struct BenchmarkKind {
  const char* name;   // "latency"
  const char* what;   // "round trip in µs, lower is better"
  bool lower_is_better;
  // The record that is a run's result: the worker's, or for throughput the total over the
  // workers ("scope": "total").
  const char* headline_scope;
  std::vector<Figure> figures;
  // The terminal's row per record, perftest/OSU style, and what its columns are.
  const char* row_note;
  std::vector<StreamingTable::Column> row_columns;
  std::vector<std::string> (*row)(const Record&);
  // Sets the record's figures from a worker's measurement.
  void (*fill)(const Measurement&, Record&);
};

// The kind of a payload benchmark record (nullptr for any other record or name).
const BenchmarkKind* FindBenchmarkKind(absl::string_view name);
// The kind of a record that is a payload benchmark's (nullptr for any other).
const BenchmarkKind* KindOf(const Record& r);
const std::vector<BenchmarkKind>& BenchmarkKinds();

// A figure of a record; nothing below 100 iterations for a tail percentile.
std::optional<double> FigureValue(const Record& r, const Figure& f);
// Whether a record is its run's result (the record a comparison row is made of).
bool IsHeadline(const Record& r);

// How a payload benchmark measured, in words: "warm-up 1 s", "measure 200 iterations",
// "window 16", "4 outstanding per PS", "validate off", "busy-poll off". Joined with ", " in
// reports and " | " in the terminal.
std::vector<std::string> MeasurementParts(const Record& r);
// The payload's bytes as a table shows them: "1024", or "~1500" for a mean over a trace.
std::string PayloadBytesText(const Record& r);
// "42%" of one core; "-" when unknown.
std::string CpuText(std::optional<double> utilization);

}  // namespace psbench

#endif  // PSBENCH_BENCH_FIGURES_H_
