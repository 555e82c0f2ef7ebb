// Small helpers of the report, and the figures of its tables and plots (bench/figures.h).
#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_join.h"
#include "cli/report/report_internal.h"
#include "fmt/core.h"

namespace psbench::report::internal {

std::string Fixed(double v, int decimals) { return fmt::format("{:.{}f}", v, decimals); }

void AddUnique(std::vector<std::string>& list, const std::string& text) {
  if (!text.empty() && std::find(list.begin(), list.end(), text) == list.end()) list.push_back(text);
}

std::string MeasurementText(const Record& r) { return absl::StrJoin(MeasurementParts(r), ", "); }

std::optional<double> CellValue(const ComparisonCells& cells, const std::string& series, const Figure& f) {
  auto it = cells.find(series);
  if (it == cells.end()) return std::nullopt;
  return it->second.Value(f);
}

const Figure& FigureOf(const std::string& bench, const std::string& key) {
  if (const BenchmarkKind* kind = FindBenchmarkKind(bench)) {
    for (const Figure& f : kind->figures) {
      if (key == f.key) return f;
    }
  }
  std::abort();  // a key of bench/figures.cc: a typo here is a bug, not input
}

std::vector<const Figure*> RatioFigures(const std::string& bench) {
  std::vector<const Figure*> out;
  if (const BenchmarkKind* kind = FindBenchmarkKind(bench)) {
    for (const Figure& f : kind->figures) {
      if (f.compared) out.push_back(&f);
    }
  }
  return out;
}

}  // namespace psbench::report::internal
