#include "cli/report/report_data.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/report/report_internal.h"
#include "fmt/core.h"

namespace psbench::report {

using namespace internal;  // NOLINT: this file is the one the pieces are for

namespace {

// --- benchmark measurements ----------------------------------------------------------------

// Reads the figures of a latency, bandwidth or throughput record; a missing field is an error
// naming the record.
absl::StatusOr<Point> ReadPoint(const Record& rec, const std::string& series) {
  const json& r = rec.json;
  Point p;
  p.series = series;
  p.benchmark = Str(r, "benchmark");
  p.scheme = Str(r, "scheme");
  p.payload = Str(r, "payload_summary");
  p.record = &r;
  auto missing = [&](const std::string& field) {
    return absl::InvalidArgumentError(
        absl::StrCat(rec.where, ": a ", p.benchmark, " record without ", field));
  };
  if (p.scheme.empty()) return missing("scheme");
  auto bytes = r.find("payload_bytes");
  if (bytes == r.end() || !bytes->is_number()) return missing("payload_bytes");
  p.bytes = bytes->get<double>();
  p.exact_bytes = bytes->is_number_integer() || bytes->is_number_unsigned();
  p.iterations = static_cast<uint64_t>(Num(r, "iterations").value_or(0));
  p.workers = static_cast<int>(Num(r, "workers").value_or(1));
  p.ps = static_cast<int>(Num(r, "ps").value_or(1));
  if (p.benchmark == "latency") {
    const json& lat = Obj(r, "latency_us");
    for (const char* k : {"p50", "p99", "mean"}) {
      auto v = Num(lat, k);
      if (!v) return missing(absl::StrCat("latency_us.", k));
      p.metrics[k] = *v;
    }
  } else {
    auto mb = Num(r, "mb_per_s");
    if (!mb) return missing("mb_per_s");
    p.metrics["mb_per_s"] = *mb;
    if (p.benchmark == "throughput") {
      auto rpc = Num(r, "rpc_per_s");
      if (!rpc) return missing("rpc_per_s");
      p.metrics["rpc_per_s"] = *rpc;
    }
  }
  return p;
}

// Throughput totals: psbench run writes one "total" record per plan; a psbench-worker on a
// cluster writes only its own. Worker records whose run has no total are summed here over
// the union of the workers' windows, as psbench run's AggregateThroughput does.
struct RunKey {
  std::string series, run_id, scheme, payload;
  double bytes;
  auto Tie() const { return std::tie(series, run_id, scheme, payload, bytes); }
  bool operator<(const RunKey& o) const { return Tie() < o.Tie(); }
};

RunKey RunKeyOf(const Point& p) {
  return {p.series, Str(Obj(*p.record, "config"), "run_id"), p.scheme, p.payload, p.bytes};
}

// Sums the worker records of one run into a total, or says why not.
absl::StatusOr<Point> SumWorkers(const std::vector<const Point*>& workers) {
  const Point& first = *workers[0];
  if (static_cast<int>(workers.size()) != first.workers) {
    return absl::NotFoundError(absl::StrCat(workers.size(), " of ", first.workers, " worker records"));
  }
  double start = 1e300, end = 0, iterations = 0, bytes = 0;
  for (const Point* w : workers) {
    auto s = Num(*w->record, "start_unix_s"), e = Num(*w->record, "end_unix_s");
    auto b = Num(*w->record, "bytes");
    if (!s || !e || !b) return absl::NotFoundError("worker records without start_unix_s, end_unix_s or bytes");
    start = std::min(start, *s);
    end = std::max(end, *e);
    iterations += static_cast<double>(w->iterations);
    bytes += *b;
  }
  if (end <= start) return absl::NotFoundError("worker records with an empty measurement window");
  Point total = first;
  total.iterations = static_cast<uint64_t>(iterations);
  total.metrics["rpc_per_s"] = iterations / (end - start);
  total.metrics["mb_per_s"] = bytes / (end - start) / 1e6;
  return total;
}

// --- tables and plots for the three benchmarks ----------------------------------------------

const char* Better(const std::string& bench) {
  if (bench == "latency") return "round trip in µs, lower is better";
  if (bench == "bandwidth") return "MB/s (10^6 B/s), higher is better";
  return "RPC/s and MB/s, total over the workers, higher is better";
}

std::string Capitalized(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(s[0]));
  return s;
}

Table BenchmarkTable(const std::string& bench, const Rows& rows, const std::vector<std::string>& series,
                     const std::optional<std::pair<std::string, std::string>>& ab,
                     const std::vector<std::string>& measurement, bool repeated) {
  Table t;
  t.id = bench;
  t.title = Capitalized(bench);
  t.notes.push_back(absl::StrCat(Capitalized(Better(bench)), "."));
  for (const auto& m : measurement) t.notes.push_back(m);
  if (bench == "latency") t.notes.push_back("p99 is shown only with at least 100 iterations (below that it is the maximum).");
  if (repeated) t.notes.push_back("A payload measured more than once in a series shows the median.");
  t.columns = {"scheme", "bytes"};
  if (bench == "throughput") t.columns.insert(t.columns.end(), {"workers", "PS"});
  const auto metrics = TableMetrics(bench);
  const auto ratios = RatioMetrics(bench);
  for (const auto& s : series) {
    for (const auto& m : metrics) t.columns.push_back(absl::StrCat(s, " ", m.column));
  }
  if (ab) {
    for (const auto& m : ratios) t.columns.push_back(absl::StrCat(ab->second, " / ", ab->first, " ", m.column));
  }
  for (const auto& [key, cells] : rows) {
    const Point& any = *cells.begin()->second.points[0];
    std::vector<std::string> row = {key.scheme, BytesText(any)};
    if (bench == "throughput") {
      row.push_back(std::to_string(key.workers));
      row.push_back(std::to_string(key.ps));
    }
    for (const auto& s : series) {
      for (const auto& m : metrics) {
        auto v = CellValue(Find(cells, s), m);
        row.push_back(v ? Fixed(*v, m.decimals) : "-");
      }
    }
    if (ab) {
      for (const auto& m : ratios) {
        auto r = Ratio(cells, *ab, m);
        row.push_back(r ? Times(*r) : "-");
      }
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace

std::string SeriesKey(const json& r) {
  std::string label = Str(r, "label");
  if (!label.empty()) return label;
  std::string transport = Str(r, "transport"), mode = Str(r, "mode");
  if (transport.empty()) return "local";  // psbench train: no transport
  return mode.empty() ? transport : transport + "/" + mode;
}

absl::StatusOr<std::vector<Record>> ReadRecords(const std::vector<std::string>& paths) {
  if (paths.empty()) return absl::InvalidArgumentError("no input: give one or more JSON Lines files");
  std::vector<Record> records;
  for (const std::string& path : paths) {
    std::ifstream in(path);
    if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open (", std::strerror(errno), ")"));
    std::string line;
    size_t count = 0;
    for (int number = 1; std::getline(in, line); ++number) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      json r = json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (r.is_discarded() || !r.is_object()) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ":", number, ": not a JSON object; psbench report reads JSON Lines as written by "
            "psbench run --json or psbench-worker --json (one object per line)"));
      }
      records.push_back({std::move(r), absl::StrCat(path, ":", number)});
      ++count;
    }
    if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
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
absl::StatusOr<Sorted> SortRecords(const std::vector<Record>& records, const ReportOptions& options,
                                   Report& report) {
  Sorted out;
  std::map<std::string, int> skipped;  // kind -> count
  for (const Record& rec : records) {
    std::string kind = KindOf(rec.json);
    ++out.kinds[kind];
    std::string series = SeriesKey(rec.json);
    if (IsBenchmark(kind)) {
      if (Str(rec.json, "transport").empty() && Str(rec.json, "label").empty()) {
        return absl::InvalidArgumentError(absl::StrCat(rec.where, ": a ", kind, " record without transport"));
      }
      auto p = ReadPoint(rec, series);
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
    AddUnique(report.series, series);
  }
  for (const auto& [kind, n] : skipped) {
    if (kind == "comparison") {
      report.notes.push_back(fmt::format("{} comparison record{} not shown: the ratios here are computed "
                                         "from the per-transport records.", n, n == 1 ? "" : "s"));
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
std::vector<const Point*> RowPoints(const std::vector<Point>& points, std::vector<Point>& summed,
                                    Report& report) {
  std::set<RunKey> have_total;
  for (const Point& p : points) {
    if (p.benchmark == "throughput" && Str(*p.record, "scope") == "total") have_total.insert(RunKeyOf(p));
  }
  std::map<RunKey, std::vector<const Point*>> orphan_workers;
  std::vector<RunKey> orphan_order;
  std::vector<const Point*> rows_from;
  for (const Point& p : points) {
    if (p.benchmark != "throughput") {
      rows_from.push_back(&p);
    } else if (Str(*p.record, "scope") == "total") {
      rows_from.push_back(&p);
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
  }
  for (const Point& p : summed) rows_from.push_back(&p);
  if (summed_runs > 0) {
    report.notes.push_back(fmt::format("{} throughput total{} summed here from worker records (no "
                                       "\"scope\": \"total\" record for the run).",
                                       summed_runs, summed_runs == 1 ? "" : "s"));
  }
  return rows_from;
}

// One benchmark's table and plots, from the points of `rows_from` that are of it.
void AddBenchmark(const std::string& bench, const std::vector<const Point*>& rows_from,
                  const std::vector<std::string>& schemes, Report& report, PlotMaker& plots) {
  Rows rows;
  bool repeated = false;
  std::vector<std::string> measurement;
  for (const Point* p : rows_from) {
    if (p->benchmark != bench) continue;
    int order = static_cast<int>(std::find(schemes.begin(), schemes.end(), p->scheme) - schemes.begin());
    bool tp = p->benchmark == "throughput";
    RowKey key{order, p->scheme, p->bytes, p->payload, tp ? p->ps : 1, tp ? p->workers : 1};
    Cell& cell = rows[key][p->series];
    cell.points.push_back(p);
    repeated |= cell.points.size() > 1;
    AddUnique(measurement, fmt::format("{}: {}.", p->series, MeasurementText(*p->record)));
  }
  if (rows.empty()) return;
  // One measurement line when every series was measured alike.
  std::vector<std::string> distinct;
  for (const std::string& m : measurement) AddUnique(distinct, m.substr(m.find(": ") + 2));
  if (distinct.size() == 1) measurement = {Capitalized(distinct[0])};
  std::vector<std::string> series;
  for (const std::string& s : report.series) {
    for (const auto& [key, cells] : rows) {
      if (cells.contains(s)) {
        series.push_back(s);
        break;
      }
    }
  }
  std::optional<std::pair<std::string, std::string>> ab;
  if (report.compare && std::find(series.begin(), series.end(), report.compare->first) != series.end() &&
      std::find(series.begin(), series.end(), report.compare->second) != series.end()) {
    ab = report.compare;
  }
  report.tables.push_back(BenchmarkTable(bench, rows, series, ab, measurement, repeated));
  if (bench == "throughput") {
    ThroughputPlots(rows, series, ab, plots);
  } else {
    SizePlots(bench, rows, series, schemes, ab, plots);
  }
}

}  // namespace

absl::StatusOr<Report> BuildReport(const std::vector<Record>& records, const ReportOptions& options) {
  Report report;
  auto sorted = SortRecords(records, options, report);
  if (!sorted.ok()) return sorted.status();
  if (absl::Status s = ChooseCompare(sorted->points, options, report); !s.ok()) return s;
  std::vector<Point> summed;
  const std::vector<const Point*> rows_from = RowPoints(sorted->points, summed, report);
  std::vector<std::string> schemes;
  for (const Point* p : rows_from) AddUnique(schemes, p->scheme);
  PlotMaker plots(report);
  for (const char* bench : {"latency", "bandwidth", "throughput"}) AddBenchmark(bench, rows_from, schemes, report, plots);
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
      panels.push_back(j);
    }
    plots.push_back({{"file", p.file},
                     {"title", p.title},
                     {"xlabel", p.xlabel},
                     {"xaxis", p.xaxis == Plot::XAxis::kBytes ? "bytes" : "count"},
                     {"panels", panels}});
  }
  return {{"format", "psbench-plot/1"}, {"series", report.series}, {"plots", plots}};
}

}  // namespace psbench::report
