// A comparison of series (transports, wire modes, labelled cluster runs) over the same
// payloads: the --transports table and psbench report's benchmark tables are this one table,
// built here from headline records (bench/figures.h says which figures each benchmark has).
#ifndef PSBENCH_BENCH_COMPARISON_H_
#define PSBENCH_BENCH_COMPARISON_H_

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bench/figures.h"
#include "bench/record.h"
#include "bench/table.h"

namespace psbench {

// A row: one payload (and for throughput one topology). Ordered by scheme (in order of first
// appearance), bytes, payload, then PS and workers.
struct ComparisonKey {
  int scheme_order = 0;
  std::string scheme;
  double bytes = 0;  // of one payload; 0 for a trace of several (its mean per operation varies by run)
  std::string payload;
  int ps = 1, workers = 1;
  // An open-loop measurement's schedule ("poisson:1000"; "" closed-loop) and its rate: a
  // sweep's rates are rows of their own.
  std::string load;
  double load_rate = 0;
  auto Tie() const { return std::tie(scheme_order, bytes, payload, ps, workers, load_rate, load); }
  bool operator<(const ComparisonKey& o) const { return Tie() < o.Tie(); }
};

// Every record of one series in one row. A figure is their median (a payload measured more
// than once); a tail figure needs every record to have enough iterations.
struct ComparisonCell {
  std::vector<const Record*> records;
  std::optional<double> Value(const Figure& f) const;
  // How far apart the measurements are: the largest value over the smallest. None for one
  // record, a figure a record cannot give, or a smallest of 0.
  std::optional<double> Spread(const Figure& f) const;

 private:
  // Every record's value of `f`; none when a record cannot give it.
  std::optional<std::vector<double>> Values(const Figure& f) const;
};

using ComparisonCells = std::map<std::string, ComparisonCell>;  // series -> cell

// The rows of one benchmark's comparison. Records are held by pointer: they must outlive it.
struct Comparison {
  const BenchmarkKind* kind = nullptr;
  std::map<ComparisonKey, ComparisonCells> rows;
  std::vector<std::string> schemes;  // order of first appearance
  bool repeated = false;             // a series measured a row more than once

  explicit Comparison(const BenchmarkKind& k) : kind(&k) {}
  // Adds a headline record of this benchmark to its row, under `series`.
  void Add(const std::string& series, const Record& r);
  // The series that have a record here, in the order of `order`.
  std::vector<std::string> SeriesIn(const std::vector<std::string>& order) const;
};

// The bytes a record's row is keyed by (ComparisonKey::bytes).
double KeyBytes(const Record& r);

// B's figure / A's (`ab` = A, B); none where either is missing or A's is 0.
std::optional<double> CellRatio(const ComparisonCells& cells, const std::pair<std::string, std::string>& ab,
                                const Figure& f);

// "1.25x"
std::string RatioText(double ratio);

// The table: a column group per series with the benchmark's figures (and, where a payload
// was measured more than once, the spread of the first), then a group "B / A" per ratio with
// its compared figures. `notes` (how it was measured) follow what the figures
// are.
Table ComparisonTable(const Comparison& c, const std::vector<std::string>& series,
                      const std::vector<std::pair<std::string, std::string>>& ratios,
                      const std::vector<std::string>& notes);

}  // namespace psbench

#endif  // PSBENCH_BENCH_COMPARISON_H_
