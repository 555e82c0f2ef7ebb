// psbench report, the data side: reads the JSON Lines that psbench run and psbench-worker
// write, checks them, groups them into series and rows, and builds the tables and the plot
// data that the Markdown, the HTML page and the plotting script show. Everything a reader of
// the report sees is decided here (the script only draws), so it is tested here.
#ifndef PSBENCH_CLI_REPORT_REPORT_DATA_H_
#define PSBENCH_CLI_REPORT_REPORT_DATA_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/record.h"
#include "bench/table.h"
#include "nlohmann/json.hpp"

namespace psbench::report {

// One record and where it came from ("results.jsonl:12"), for messages.
struct Input {
  Record record;
  std::string where;
};

// Reads every file in order. Errors (all bad input): a file that cannot be read, a file with
// no record, a line that is not a JSON object or not a record ("FILE:LINE: ...": a field of
// the wrong type, docs/records.md).
absl::StatusOr<std::vector<Input>> ReadRecords(const std::vector<std::string>& paths);

// One line of a plot. `series` picks the colour (the same in every plot), `style` the dash
// ("solid" for p50 and headline figures, "dashed" for p99).
struct PlotLine {
  std::string label;
  std::string series;
  std::string style = "solid";
  std::vector<double> x, y;
  // Lines of one series that differ in what else was measured ("2 PS"): each gets a colour
  // and marker of its own; lines that differ only in style (p50, p99) share them.
  std::string variant;
};

// One axes of a figure.
struct PlotPanel {
  std::string ylabel;
  bool ylog = false;
  std::optional<double> reference;  // a horizontal line (1x on a ratio plot)
  std::vector<std::pair<double, std::string>> marks;  // vertical lines at x, labelled (a knee)
  std::vector<PlotLine> lines;
};

struct Plot {
  std::string file;  // "01-latency-sweep.svg", relative to the plot directory
  std::string title;
  std::string caption;
  std::string xlabel;
  // log2 sizes, integer counts, or log10 rates (operations per second)
  enum class XAxis { kBytes, kCount, kRate } xaxis = XAxis::kBytes;
  std::vector<PlotPanel> panels;  // side by side
};

struct Report {
  std::vector<std::pair<std::string, std::string>> header;  // what was measured: key, text
  std::vector<std::string> series;                          // in order of first appearance
  std::optional<std::pair<std::string, std::string>> compare;  // A, B: ratios are B / A
  std::vector<Table> tables;
  std::vector<Plot> plots;
  std::vector<std::string> notes;  // records skipped and why
};

struct ReportOptions {
  std::vector<std::string> inputs;  // file names, for the header
  // --compare=A,B; empty: the first two series, when there are two.
  std::optional<std::pair<std::string, std::string>> compare;
};

// Builds the report. Errors (bad input): no record of a kind psbench report knows, a record
// of a known kind without the fields it needs, --compare naming a series that is not there.
absl::StatusOr<Report> BuildReport(const std::vector<Input>& records, const ReportOptions& options);

// The data the plotting script draws, as JSON: {"series": [...], "plots": [...]}.
nlohmann::json PlotData(const Report& report);

// Parses --compare=A,B.
absl::StatusOr<std::pair<std::string, std::string>> ParseCompare(const std::string& text);

}  // namespace psbench::report

#endif  // PSBENCH_CLI_REPORT_REPORT_DATA_H_
