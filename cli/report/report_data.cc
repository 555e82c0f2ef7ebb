#include "cli/report/report_data.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/load_report.h"
#include "bench/report.h"
#include "bench/scenario_flags.h"
#include "inputs/input_file.h"
#include "cli/report/report_internal.h"
#include "fmt/core.h"

namespace psbench::report {

using namespace internal;  // NOLINT: this file is the one the pieces are for

namespace {

// --- benchmark measurements ----------------------------------------------------------------

// Checks that a latency, bandwidth or throughput record has what its table needs; an error
// names the record and the field.
absl::StatusOr<Point> ReadPoint(const Input& in, const BenchmarkKind& kind) {
  const Record& r = in.record;
  auto missing = [&](const std::string& field) {
    return absl::InvalidArgumentError(absl::StrCat(in.where, ": a ", kind.name, " record without ", field));
  };
  if (!r.transport && !r.label) return missing("transport");
  if (!r.scheme) return missing("scheme");
  if (!r.payload_bytes) return missing("payload_bytes");
  const std::string bench = kind.name;
  if (bench == "latency" && !r.latency_us) return missing("latency_us");
  if (bench != "latency" && !r.mb_per_s) return missing("mb_per_s");
  if (bench == "throughput" && !r.rpc_per_s) return missing("rpc_per_s");
  return Point{r.Series(), &r, &kind};
}

// Throughput totals: psbench run writes one "total" record per plan; a psbench-worker on a
// cluster writes only its own. Worker records whose run has no total are summed here as
// psbench run sums them (AggregateThroughput).
struct RunKey {
  std::string series, run_id, scheme, payload;
  double bytes;
  std::string load;  // an open-loop sweep's rates are measurements of one run
  auto Tie() const { return std::tie(series, run_id, scheme, payload, bytes, load); }
  bool operator<(const RunKey& o) const { return Tie() < o.Tie(); }
};

RunKey RunKeyOf(const Point& p) {
  const Record& r = *p.record;
  return {p.series, r.RunId(), r.scheme.value_or(""), r.payload_summary.value_or(""), KeyBytes(r),
          JsonTextAt(LoadOf(r), "schedule")};
}

bool IsTotal(const Record& r) { return r.scope.value_or("worker") == "total"; }

// Sums the worker records of one run into a total, or says why not.
absl::StatusOr<Record> SumWorkers(const std::vector<const Point*>& workers) {
  const Record& first = *workers[0]->record;
  if (static_cast<int64_t>(workers.size()) != first.workers.value_or(1)) {
    return absl::NotFoundError(absl::StrCat(workers.size(), " of ", first.workers.value_or(1), " worker records"));
  }
  std::vector<Record> records;
  for (const Point* w : workers) {
    const Record& r = *w->record;
    if (!r.start_unix_s || !r.end_unix_s || !r.bytes) {
      return absl::NotFoundError("worker records without start_unix_s, end_unix_s or bytes");
    }
    records.push_back(r);
  }
  Record total = AggregateThroughput(records);
  if (total.seconds.value_or(0) <= 0) return absl::NotFoundError("worker records with an empty measurement window");
  return total;
}

}  // namespace

absl::StatusOr<std::vector<Input>> ReadRecords(const std::vector<std::string>& paths) {
  if (paths.empty()) return absl::InvalidArgumentError("no input: give one or more JSON Lines files");
  std::vector<Input> records;
  for (const std::string& path : paths) {
    absl::StatusOr<std::string> text = ReadInputFile(path, "report input", MaxInputSize());
    if (!text.ok()) return text.status();
    size_t count = 0;
    int number = 0;
    for (absl::string_view line : absl::StrSplit(*text, '\n')) {
      ++number;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object()) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ":", number, ": not a JSON object; psbench report reads JSON Lines as written by "
            "psbench run --json or psbench-worker --json (one object per line)"));
      }
      auto record = RecordFromJson(j);
      if (!record.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ":", number, ": not a psbench record: ",
                                                       record.status().message(), " (docs/records.md)"));
      }
      records.push_back({*std::move(record), absl::StrCat(path, ":", number)});
      ++count;
    }
    if (count == 0) return absl::InvalidArgumentError(absl::StrCat(path, ": empty, no records"));
  }
  return records;
}

absl::StatusOr<std::pair<std::string, std::string>> ParseCompare(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, ',');
  if (parts.size() != 2 || parts[0].empty() || parts[1].empty() || parts[0] == parts[1]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--compare=", text, ": give two different series, A,B (ratios are B / A), e.g. "
        "--compare=grpc/non-serialized,grpc/serialized"));
  }
  return std::pair{parts[0], parts[1]};
}

namespace {

// --- BuildReport's steps -----------------------------------------------------------------------

// The records by what the report does with them.
struct Sorted {
  std::map<std::string, int> kinds;  // kind -> count, every record
  std::vector<Point> points;         // latency, bandwidth, throughput
  std::vector<const Record*> measured, train, timing;
};

// Sorts the records; notes the kinds not shown; fails when nothing can be tabulated.
absl::StatusOr<Sorted> SortRecords(const std::vector<Input>& records, const ReportOptions& options,
                                   Report& report) {
  Sorted out;
  std::map<std::string, int> skipped;  // kind -> count
  for (const Input& in : records) {
    const Record& rec = in.record;
    std::string kind = rec.Kind();
    if (kind.empty()) kind = "(none)";
    ++out.kinds[kind];
    if (const BenchmarkKind* bench = KindOf(rec)) {
      auto p = ReadPoint(in, *bench);
      if (!p.ok()) return p.status();
      out.points.push_back(*std::move(p));
      out.measured.push_back(&rec);
    } else if (kind == "train") {
      out.train.push_back(&rec);
    } else if (kind == "train_timing") {
      out.timing.push_back(&rec);
    } else {
      ++skipped[kind];
      continue;
    }
    AddUnique(report.series, rec.Series());
  }
  for (const auto& [kind, n] : skipped) {
    if (kind == "comparison") {
      report.notes.push_back(fmt::format("{} comparison record{} not shown: the figures, medians and ratios "
                                         "here are computed from the per-run records.", n, n == 1 ? "" : "s"));
    } else if (kind == "train_total") {
      report.notes.push_back(fmt::format("{} train_total record{} not shown: the training totals are "
                                         "summed from the per-worker train records.", n, n == 1 ? "" : "s"));
    } else if (kind == "floor") {
      report.notes.push_back(fmt::format("{} floor record{} not shown: the tour's reading aid (psbench-floor-tcp "
                                         "and -grpc on loopback, one message of each payload's size).",
                                         n, n == 1 ? "" : "s"));
    } else {
      report.notes.push_back(fmt::format("{} record{} of kind '{}' skipped: psbench report does not know it.",
                                         n, n == 1 ? "" : "s", kind));
    }
  }
  if (out.points.empty() && out.train.empty() && out.timing.empty()) {
    std::vector<std::string> found;
    for (const auto& [kind, n] : out.kinds) found.push_back(absl::StrCat(n, " ", kind));
    return absl::InvalidArgumentError(absl::StrCat(
        absl::StrJoin(options.inputs, ", "), ": no record psbench report can tabulate (found ",
        absl::StrJoin(found, ", "), "; it reads latency, bandwidth, throughput, train and train_timing records)"));
  }
  return out;
}

// The two series compared: --compare's, else the first two of the benchmark records.
absl::Status ChooseCompare(const std::vector<Point>& points, const ReportOptions& options, Report& report) {
  std::vector<std::string> measured_series;
  for (const Point& p : points) AddUnique(measured_series, p.series);
  if (options.compare) {
    for (const std::string& s : {options.compare->first, options.compare->second}) {
      if (std::find(measured_series.begin(), measured_series.end(), s) == measured_series.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--compare: no series '", s, "' in the latency, bandwidth and throughput records; series: ",
            measured_series.empty() ? std::string("(none)") : absl::StrJoin(measured_series, ", ")));
      }
    }
    report.compare = options.compare;
  } else if (measured_series.size() >= 2) {
    report.compare = std::pair{measured_series[0], measured_series[1]};
  }
  return absl::OkStatus();
}

// The points that make table rows: every latency and bandwidth point, every throughput total,
// and totals summed (into `summed`, which must outlive the result) from worker records whose
// run has none.
std::vector<Point> RowPoints(const std::vector<Point>& points, std::vector<Record>& summed, Report& report) {
  std::set<RunKey> have_total;
  for (const Point& p : points) {
    if (std::string(p.kind->name) == "throughput" && IsTotal(*p.record)) have_total.insert(RunKeyOf(p));
  }
  std::map<RunKey, std::vector<const Point*>> orphan_workers;
  std::vector<RunKey> orphan_order;
  std::vector<Point> rows_from;
  for (const Point& p : points) {
    if (IsHeadline(*p.record)) {
      rows_from.push_back(p);
    } else if (!have_total.contains(RunKeyOf(p))) {
      if (!orphan_workers.contains(RunKeyOf(p))) orphan_order.push_back(RunKeyOf(p));
      orphan_workers[RunKeyOf(p)].push_back(&p);
    }
  }
  summed.reserve(orphan_order.size());  // no reallocation: rows_from points into it
  int summed_runs = 0;
  for (const RunKey& key : orphan_order) {
    auto total = SumWorkers(orphan_workers[key]);
    if (!total.ok()) {
      report.notes.push_back(fmt::format("throughput of series {} (run '{}', scheme {}, {:.0f} B) not shown: {}.",
                                         key.series, key.run_id, key.scheme, key.bytes,
                                         std::string(total.status().message())));
      continue;
    }
    if (orphan_workers[key].size() > 1) ++summed_runs;
    summed.push_back(*std::move(total));
    rows_from.push_back({key.series, &summed.back(), orphan_workers[key][0]->kind});
  }
  if (summed_runs > 0) {
    report.notes.push_back(fmt::format("{} throughput total{} summed here from worker records (no "
                                       "\"scope\": \"total\" record for the run).",
                                       summed_runs, summed_runs == 1 ? "" : "s"));
  }
  return rows_from;
}

// One benchmark's table and plots, from the points of `rows_from` that are of it.
void AddBenchmark(const BenchmarkKind& kind, const std::vector<Point>& rows_from, const std::vector<std::string>& schemes,
                  Report& report, PlotMaker& plots) {
  Comparison c(kind);
  c.schemes = schemes;  // one scheme order for every benchmark
  std::vector<std::string> measurement;
  for (const Point& p : rows_from) {
    if (p.kind != &kind) continue;
    c.Add(p.series, *p.record);
    AddUnique(measurement, fmt::format("{}: {}.", p.series, MeasurementText(*p.record)));
  }
  if (c.rows.empty()) return;
  // One measurement line when every series was measured alike.
  std::vector<std::string> distinct;
  for (const std::string& m : measurement) AddUnique(distinct, m.substr(m.find(": ") + 2));
  if (distinct.size() == 1) {
    distinct[0][0] = static_cast<char>(std::toupper(static_cast<unsigned char>(distinct[0][0])));
    measurement = distinct;
  }
  const std::vector<std::string> series = c.SeriesIn(report.series);
  std::optional<std::pair<std::string, std::string>> ab;
  if (report.compare && std::find(series.begin(), series.end(), report.compare->first) != series.end() &&
      std::find(series.begin(), series.end(), report.compare->second) != series.end()) {
    ab = report.compare;
  }
  std::vector<std::pair<std::string, std::string>> ratios;
  if (ab) ratios.push_back(*ab);
  report.tables.push_back(ComparisonTable(c, series, ratios, measurement));
  // Against size, workers or PS: the closed-loop rows; open-loop ones against their rate.
  Rows closed;
  for (const auto& [key, cells] : c.rows) {
    if (key.load.empty()) closed.insert({key, cells});
  }
  if (std::string(kind.name) == "throughput") {
    if (!closed.empty()) ThroughputPlots(closed, series, ab, plots);
  } else if (!closed.empty()) {
    SizePlots(kind.name, closed, series, c.schemes, ab, plots);
  }
  LoadSections(kind.name, c.rows, series, report, plots);
}

}  // namespace

absl::StatusOr<Report> BuildReport(const std::vector<Input>& records, const ReportOptions& options) {
  Report report;
  auto sorted = SortRecords(records, options, report);
  if (!sorted.ok()) return sorted.status();
  if (absl::Status s = ChooseCompare(sorted->points, options, report); !s.ok()) return s;
  std::vector<Record> summed;
  const std::vector<Point> rows_from = RowPoints(sorted->points, summed, report);
  std::vector<std::string> schemes;
  for (const Point& p : rows_from) AddUnique(schemes, p.record->scheme.value_or("?"));
  PlotMaker plots(report);
  for (const BenchmarkKind& kind : BenchmarkKinds()) AddBenchmark(kind, rows_from, schemes, report, plots);
  if (auto t = TrainTable(sorted->train)) report.tables.push_back(*std::move(t));
  if (auto t = TimingTable(sorted->timing)) report.tables.push_back(*std::move(t));
  BuildHeader(records, sorted->measured, sorted->kinds, options, report);
  return report;
}

json PlotData(const Report& report) {
  json plots = json::array();
  for (const Plot& p : report.plots) {
    json panels = json::array();
    for (const PlotPanel& panel : p.panels) {
      json lines = json::array();
      for (const PlotLine& l : panel.lines) {
        lines.push_back({{"label", l.label}, {"series", l.series}, {"variant", l.variant}, {"style", l.style},
                         {"x", l.x}, {"y", l.y}});
      }
      json j = {{"ylabel", panel.ylabel}, {"ylog", panel.ylog}, {"lines", lines}};
      if (panel.reference) j["reference"] = *panel.reference;
      for (const auto& [x, label] : panel.marks) j["marks"].push_back({{"x", x}, {"label", label}});
      panels.push_back(j);
    }
    plots.push_back({{"file", p.file},
                     {"title", p.title},
                     {"xlabel", p.xlabel},
                     {"xaxis", p.xaxis == Plot::XAxis::kBytes  ? "bytes"
                               : p.xaxis == Plot::XAxis::kRate ? "rate"
                                                               : "count"},
                     {"panels", panels}});
  }
  return {{"format", "psbench-plot/1"}, {"series", report.series}, {"plots", plots}};
}

}  // namespace psbench::report
