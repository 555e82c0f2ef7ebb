// The pieces BuildReport (report_data.cc) is made of, each in a file of its own: reading the
// fields of a record (report_fields.cc), the header (report_header.cc), the plots of the
// three benchmarks (report_plots.cc) and the training tables (report_train.cc). Not for use
// outside cli/report.
#ifndef PSBENCH_CLI_REPORT_REPORT_INTERNAL_H_
#define PSBENCH_CLI_REPORT_REPORT_INTERNAL_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/comparison.h"
#include "bench/figures.h"
#include "cli/report/report_data.h"
#include "nlohmann/json.hpp"

namespace psbench::report::internal {

using nlohmann::json;

std::string Fixed(double v, int decimals);
// Adds `text` to `list` unless it is there (keeps first-seen order).
void AddUnique(std::vector<std::string>& list, const std::string& text);
// How a benchmark record measured, e.g. "warm-up 20 iterations, measure 200 iterations,
// window 16, validate off, busy-poll off".
std::string MeasurementText(const Record& r);

// --- benchmark measurements ----------------------------------------------------------------
// A headline record of a series: a benchmark record as read, or a throughput total summed
// here from worker records.
struct Point {
  std::string series;
  const Record* record = nullptr;
  const BenchmarkKind* kind = nullptr;
};

// A benchmark's rows (bench/comparison.h): row -> series -> cell.
using RowKey = ComparisonKey;
using Rows = std::map<ComparisonKey, ComparisonCells>;

// A series' figure in a row; none where the series has no record there.
std::optional<double> CellValue(const ComparisonCells& cells, const std::string& series, const Figure& f);
// A figure of a benchmark by key ("p50_us").
const Figure& FigureOf(const std::string& bench, const std::string& key);
// The figures compared B/A in a table and a ratio plot.
std::vector<const Figure*> RatioFigures(const std::string& bench);

// --- plots (report_plots.cc) -----------------------------------------------------------------
class PlotMaker {
 public:
  explicit PlotMaker(Report& report) : report_(report) {}

  // A new plot, its file named after its place in the report and `name`.
  Plot& Add(const std::string& name, std::string title, std::string xlabel, Plot::XAxis xaxis);
  // Why a plot is not there: nothing measured vanishes without a word.
  void Note(std::string note) { report_.notes.push_back(std::move(note)); }

 private:
  Report& report_;
};

// Latency or bandwidth against size, one plot per scheme with at least two sizes.
void SizePlots(const std::string& bench, const Rows& rows, const std::vector<std::string>& series,
               const std::vector<std::string>& schemes,
               const std::optional<std::pair<std::string, std::string>>& ab, PlotMaker& plots);
// Throughput against workers and against PS, for each payload measured with two or more.
void ThroughputPlots(const Rows& rows, const std::vector<std::string>& series,
                     const std::optional<std::pair<std::string, std::string>>& ab, PlotMaker& plots);

// Open-loop measurements (report_load.cc): per series and payload, a table of its rates with
// the knee, and latency against achieved rate when two or more were measured.
void LoadSections(const std::string& bench, const Rows& rows, const std::vector<std::string>& series,
                  Report& report, PlotMaker& plots);

// --- the header (report_header.cc) and the training tables (report_train.cc) ---------------
void BuildHeader(const std::vector<Input>& records, const std::vector<const Record*>& measured,
                 const std::map<std::string, int>& kinds, const ReportOptions& options,
                 Report& report);
// "train" records: one row per run, images/s summed over its workers.
std::optional<Table> TrainTable(const std::vector<const Record*>& train);
// "train_timing" records (psbench train): the model alone on this machine.
std::optional<Table> TimingTable(const std::vector<const Record*>& timing);

}  // namespace psbench::report::internal

#endif  // PSBENCH_CLI_REPORT_REPORT_INTERNAL_H_
