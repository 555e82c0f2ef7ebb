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
#include <tuple>
#include <utility>
#include <vector>

#include "cli/report/report_data.h"
#include "nlohmann/json.hpp"

namespace psbench::report::internal {

using nlohmann::json;

// --- reading fields without exceptions: a record is input, any field may be missing --------
std::string Str(const json& j, const char* key);
std::optional<double> Num(const json& j, const char* key);
const json& Obj(const json& j, const char* key);
bool IsBenchmark(const std::string& b);
// "latency", "bandwidth", "throughput" for benchmark records (they have no "kind"), else the
// record's kind; "(none)" for a record that is neither.
std::string KindOf(const json& r);
double Median(std::vector<double> v);
std::string Fixed(double v, int decimals);
std::string Times(double v);  // "1.25x"
// Adds `text` to `list` unless it is there (keeps first-seen order).
void AddUnique(std::vector<std::string>& list, const std::string& text);
// How a benchmark record measured, e.g. "warm-up 20 iterations, measure 200 iterations,
// window 16, validate off, busy-poll off".
std::string MeasurementText(const json& r);

// --- benchmark measurements ----------------------------------------------------------------
// The figures of one benchmark record (or of a throughput total made from worker records).
struct Point {
  std::string series;
  std::string benchmark;
  std::string scheme;
  double bytes = 0;
  bool exact_bytes = true;  // one payload; a trace of several has a mean size ("~N")
  std::string payload;      // payload_summary
  int workers = 1, ps = 1;
  uint64_t iterations = 0;
  std::map<std::string, double> metrics;  // p50, p99, mean (µs), mb_per_s, rpc_per_s
  const json* record = nullptr;
};

// A row of a table: one benchmark, one payload (and for throughput one topology).
// Ordered by scheme (first appearance), bytes, then PS and workers.
struct RowKey {
  int scheme_order;
  std::string scheme;
  double bytes;
  std::string payload;
  int ps, workers;
  auto Tie() const { return std::tie(scheme_order, bytes, payload, ps, workers); }
  bool operator<(const RowKey& o) const { return Tie() < o.Tie(); }
};

// Every record of a series in a row; cells show medians (a row measured more than once).
struct Cell {
  std::vector<const Point*> points;
  std::optional<double> Get(const std::string& metric) const {
    std::vector<double> v;
    for (const Point* p : points) {
      if (auto it = p->metrics.find(metric); it != p->metrics.end()) v.push_back(it->second);
    }
    if (v.empty()) return std::nullopt;
    return Median(v);
  }
  uint64_t MinIterations() const {
    uint64_t n = UINT64_MAX;
    for (const Point* p : points) n = std::min(n, p->iterations);
    return points.empty() ? 0 : n;
  }
};

using Rows = std::map<RowKey, std::map<std::string, Cell>>;  // row -> series -> cell

std::string BytesText(const Point& p);

// --- the figures of the tables and plots ----------------------------------------------------
struct Metric {
  const char* key;
  const char* column;  // "p50 µs"
  int decimals;
  bool tail = false;  // p99: "-" below 100 iterations, where it is just the maximum
};

std::vector<Metric> TableMetrics(const std::string& bench);
// The figures compared B/A in a table and a ratio plot.
std::vector<Metric> RatioMetrics(const std::string& bench);
std::optional<double> CellValue(const Cell* cell, const Metric& m);
const Cell* Find(const std::map<std::string, Cell>& cells, const std::string& series);
std::optional<double> Ratio(const std::map<std::string, Cell>& cells,
                            const std::pair<std::string, std::string>& ab, const Metric& m);

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

// --- the header (report_header.cc) and the training tables (report_train.cc) ---------------
void BuildHeader(const std::vector<Record>& records, const std::vector<const Record*>& measured,
                 const std::map<std::string, int>& kinds, const ReportOptions& options,
                 Report& report);
// "train" records: one row per run, images/s summed over its workers.
std::optional<Table> TrainTable(const std::vector<const Record*>& train);
// "train_timing" records (psbench train): the model alone on this machine.
std::optional<Table> TimingTable(const std::vector<const Record*>& timing);

}  // namespace psbench::report::internal

#endif  // PSBENCH_CLI_REPORT_REPORT_INTERNAL_H_
