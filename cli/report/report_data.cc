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
#include "fmt/core.h"

namespace psbench::report {
namespace {

using nlohmann::json;

// --- reading fields without exceptions: a record is input, any field may be missing --------

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::optional<double> Num(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

const json& Obj(const json& j, const char* key) {
  static const json kEmpty = json::object();
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : kEmpty;
}

bool IsBenchmark(const std::string& b) {
  return b == "latency" || b == "bandwidth" || b == "throughput";
}

// "latency", "bandwidth", "throughput" for benchmark records (they have no "kind"), else the
// record's kind; "(none)" for a record that is neither.
std::string KindOf(const json& r) {
  if (r.contains("kind")) return r["kind"].is_string() ? r["kind"].get<std::string>() : "(not a string)";
  std::string b = Str(r, "benchmark");
  return IsBenchmark(b) ? b : "(none)";
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string Fixed(double v, int decimals) { return fmt::format("{:.{}f}", v, decimals); }
std::string Times(double v) { return fmt::format("{:.2f}x", v); }

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

std::string BytesText(const Point& p) {
  return p.exact_bytes ? fmt::format("{:.0f}", p.bytes) : fmt::format("~{:.0f}", p.bytes);
}

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

// "warm-up 20 iterations, measure 200 iterations, window 16, validate off, busy-poll off"
std::string MeasurementText(const json& r) {
  const json& cfg = Obj(r, "config");
  double warm_iters = Num(cfg, "warmup_iterations").value_or(-1);
  double iters = Num(cfg, "iterations").value_or(0);
  std::string text = fmt::format(
      "warm-up {}, measure {}",
      warm_iters >= 0 ? fmt::format("{:.0f} iterations", warm_iters)
                      : fmt::format("{:g} s", Num(cfg, "warmup_s").value_or(0)),
      iters > 0 ? fmt::format("{:.0f} iterations", iters)
                : fmt::format("{:g} s", Num(cfg, "duration_s").value_or(0)));
  std::string bench = Str(r, "benchmark");
  if (bench == "bandwidth") text += fmt::format(", window {:.0f}", Num(cfg, "window").value_or(0));
  if (bench == "throughput") {
    text += fmt::format(", {:.0f} outstanding per PS", Num(cfg, "outstanding").value_or(0));
  }
  auto flag = [](const json& j, const char* k) {
    auto it = j.find(k);
    return it != j.end() && it->is_boolean() && it->get<bool>() ? "on" : "off";
  };
  text += fmt::format(", validate {}, busy-poll {}", flag(r, "validate"), flag(cfg, "busy_poll"));
  return text;
}

// Adds `text` to `list` unless it is there (keeps first-seen order).
void AddUnique(std::vector<std::string>& list, const std::string& text) {
  if (!text.empty() && std::find(list.begin(), list.end(), text) == list.end()) list.push_back(text);
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

// --- the header: what was measured --------------------------------------------------------

std::string OnOff(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "on" : "off";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

void BuildHeader(const std::vector<Record>& records, const std::vector<const Record*>& measured,
                 const std::map<std::string, int>& kinds, const ReportOptions& options,
                 Report& report) {
  auto& h = report.header;
  std::vector<std::string> kind_text;
  for (const auto& [kind, n] : kinds) kind_text.push_back(absl::StrCat(n, " ", kind));
  h.push_back({"Input", absl::StrCat(absl::StrJoin(options.inputs, ", "), ": ", records.size(),
                                     " records (", absl::StrJoin(kind_text, ", "), ")")});
  std::vector<std::string> series_text;
  std::map<std::string, std::string> described;
  for (const Record& rec : records) {
    std::string key = SeriesKey(rec.json);
    std::string transport = Str(rec.json, "transport"), mode = Str(rec.json, "mode");
    if (transport.empty() || described.contains(key)) continue;
    const std::string full = mode.empty() ? transport : transport + "/" + mode;  // no mode: no wire modes
    described[key] = key == full ? key : fmt::format("{} = {}", key, full);
    series_text.push_back(described[key]);
  }
  h.push_back({"Series", absl::StrJoin(series_text, "; ")});
  if (report.compare) {
    h.push_back({"Ratio", fmt::format("B/A with A = {}, B = {} (latency: below 1x = B faster; "
                                      "MB/s, RPC/s: above 1x = B faster)",
                                      report.compare->first, report.compare->second)});
  }
  // Hosts: every worker's environment, and the PS hosts from the placement.
  std::vector<std::string> hosts, versions, measurement, seeds, placement, times;
  std::vector<std::string> tls_order;  // TLS settings of the measured records, and their series
  std::map<std::string, std::vector<std::string>> tls_series;
  std::map<std::string, std::set<std::string>> roles;
  std::map<std::string, std::string> host_text;
  std::vector<std::string> host_order;
  for (const Record& rec : records) {
    const json& r = rec.json;
    const json& env = Obj(r, "environment");
    std::string host = Str(env, "host");
    if (!host.empty()) {
      if (!host_text.contains(host)) {
        host_order.push_back(host);
        host_text[host] = fmt::format("{}, {}, {:.0f} CPUs", Str(env, "kernel"), Str(env, "cpu_model"),
                                      Num(env, "online_cpus").value_or(0));
      }
      roles[host].insert("worker");
    }
    if (auto ps = Obj(r, "placement").find("ps"); ps != Obj(r, "placement").end() && ps->is_array()) {
      for (const json& p : *ps) {
        std::string ph = p.is_object() ? Str(p, "host") : "";
        if (ph.empty()) continue;
        if (!roles.contains(ph) && !host_text.contains(ph)) host_order.push_back(ph);
        roles[ph].insert("PS");
      }
    }
    const json& v = Obj(env, "versions");
    if (!v.empty()) {
      AddUnique(versions, fmt::format("psbench {}, gRPC {}, protobuf {}, {}", Str(v, "psbench"),
                                      Str(v, "grpc"), Str(v, "protobuf"), Str(v, "compiler")));
    }
    if (auto seed = Num(r, "seed")) AddUnique(seeds, fmt::format("{:.0f}", *seed));
    AddUnique(times, Str(r, "timestamp"));
  }
  for (const Record* rec : measured) {
    const json& r = rec->json;
    const json* t = r.contains("tls") ? &r["tls"] : Obj(r, "config").contains("tls") ? &r["config"]["tls"] : nullptr;
    if (t) {
      if (!tls_series.contains(OnOff(*t))) tls_order.push_back(OnOff(*t));
      AddUnique(tls_series[OnOff(*t)], SeriesKey(r));
    }
    AddUnique(measurement, absl::StrCat(Str(r, "benchmark"), ": ", MeasurementText(r)));
    const json& place = Obj(r, "placement");
    std::vector<std::string> ps_list;  // one entry per distinct affinity
    if (auto ps = place.find("ps"); ps != place.end() && ps->is_array()) {
      for (const json& p : *ps) {
        if (p.is_object()) AddUnique(ps_list, Str(p, "cpu_affinity"));
      }
    }
    std::string ps_cpus = absl::StrJoin(ps_list, " / ");
    std::string worker_cpus = Str(Obj(place, "worker"), "cpu_affinity");
    if (!worker_cpus.empty() || !ps_cpus.empty()) {
      AddUnique(placement, fmt::format("worker CPUs {}, PS CPUs {}", worker_cpus.empty() ? "?" : worker_cpus,
                                       ps_cpus.empty() ? "?" : ps_cpus));
    }
  }
  for (const std::string& host : host_order) {
    std::vector<std::string> r(roles[host].rbegin(), roles[host].rend());  // worker, PS
    auto it = host_text.find(host);
    AddUnique(hosts, fmt::format("{} ({}){}", host, absl::StrJoin(r, ", "),
                                 it == host_text.end() ? "" : ": " + it->second));
  }
  if (!hosts.empty()) h.push_back({"Hosts", absl::StrJoin(hosts, "; ")});
  if (tls_order.size() == 1) h.push_back({"TLS", tls_order[0]});
  if (tls_order.size() > 1) {
    std::vector<std::string> tls;
    for (const auto& v : tls_order) tls.push_back(fmt::format("{} ({})", v, absl::StrJoin(tls_series[v], ", ")));
    h.push_back({"TLS", absl::StrJoin(tls, "; ")});
  }
  if (!versions.empty()) h.push_back({"Versions", absl::StrJoin(versions, "; ")});
  if (!measurement.empty()) h.push_back({"Measurement", absl::StrJoin(measurement, "; ")});
  if (!placement.empty()) h.push_back({"Placement", absl::StrJoin(placement, "; ")});
  if (!seeds.empty()) h.push_back({"Seeds", absl::StrJoin(seeds, ", ")});
  if (!times.empty()) {
    std::sort(times.begin(), times.end());  // RFC 3339 UTC: text order is time order
    h.push_back({"Recorded", times.size() == 1 ? times[0] : times.front() + " to " + times.back()});
  }
}

// --- tables and plots for the three benchmarks ----------------------------------------------

struct Metric {
  const char* key;
  const char* column;  // "p50 µs"
  int decimals;
  bool tail = false;  // p99: "-" below 100 iterations, where it is just the maximum
};

std::vector<Metric> TableMetrics(const std::string& bench) {
  if (bench == "latency") return {{"p50", "p50 µs", 2}, {"p99", "p99 µs", 2, true}, {"mean", "mean µs", 2}};
  if (bench == "bandwidth") return {{"mb_per_s", "MB/s", 2}};
  return {{"rpc_per_s", "RPC/s", 1}, {"mb_per_s", "MB/s", 2}};
}

// The figures compared B/A in a table and a ratio plot.
std::vector<Metric> RatioMetrics(const std::string& bench) {
  if (bench == "latency") return {{"p50", "p50", 2}, {"p99", "p99", 2, true}};
  if (bench == "bandwidth") return {{"mb_per_s", "MB/s", 2}};
  return {{"rpc_per_s", "RPC/s", 1}};
}

std::optional<double> CellValue(const Cell* cell, const Metric& m) {
  if (cell == nullptr) return std::nullopt;
  if (m.tail && cell->MinIterations() < 100) return std::nullopt;
  return cell->Get(m.key);
}

const Cell* Find(const std::map<std::string, Cell>& cells, const std::string& series) {
  auto it = cells.find(series);
  return it == cells.end() ? nullptr : &it->second;
}

std::optional<double> Ratio(const std::map<std::string, Cell>& cells,
                            const std::pair<std::string, std::string>& ab, const Metric& m) {
  auto a = CellValue(Find(cells, ab.first), m), b = CellValue(Find(cells, ab.second), m);
  if (!a || !b || *a == 0) return std::nullopt;
  return *b / *a;
}

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

std::string FileSafe(std::string s) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '-';
  }
  return s;
}

class PlotMaker {
 public:
  explicit PlotMaker(Report& report) : report_(report) {}

  Plot& Add(const std::string& name, std::string title, std::string xlabel, Plot::XAxis xaxis) {
    Plot p;
    p.file = fmt::format("{:02d}-{}.svg", report_.plots.size() + 1, FileSafe(name));
    p.title = std::move(title);
    p.xlabel = std::move(xlabel);
    p.xaxis = xaxis;
    report_.plots.push_back(std::move(p));
    return report_.plots.back();
  }

 private:
  Report& report_;
};

// Rows of one scheme (latency, bandwidth), or of one scheme and payload (throughput).
std::vector<std::pair<const RowKey*, const std::map<std::string, Cell>*>> Select(
    const Rows& rows, const std::function<bool(const RowKey&)>& keep) {
  std::vector<std::pair<const RowKey*, const std::map<std::string, Cell>*>> out;
  for (const auto& [key, cells] : rows) {
    if (keep(key)) out.push_back({&key, &cells});
  }
  return out;
}

constexpr char kSizeAxis[] = "Payload size (bytes)";

// Latency or bandwidth against size, one plot per scheme with at least two sizes.
void SizePlots(const std::string& bench, const Rows& rows, const std::vector<std::string>& series,
               const std::vector<std::string>& schemes,
               const std::optional<std::pair<std::string, std::string>>& ab, PlotMaker& plots) {
  for (const std::string& scheme : schemes) {
    auto sel = Select(rows, [&](const RowKey& k) { return k.scheme == scheme; });
    if (sel.size() < 2) continue;
    bool latency = bench == "latency";
    Plot& plot = plots.Add(absl::StrCat(bench, "-", scheme),
                           fmt::format("{} vs payload size (scheme {})", latency ? "Latency" : "Bandwidth", scheme),
                           kSizeAxis, Plot::XAxis::kBytes);
    plot.caption = latency ? "Round-trip latency, p50 (solid) and p99 (dashed), log-log."
                           : "Bandwidth, MB/s = 10^6 bytes/s, log-log.";
    PlotPanel panel;
    panel.ylabel = latency ? "Round-trip latency (µs)" : "Bandwidth (MB/s)";
    panel.ylog = true;
    for (const std::string& s : series) {
      for (const Metric& m : latency ? std::vector<Metric>{{"p50", "p50", 2}, {"p99", "p99", 2, true}}
                                     : std::vector<Metric>{{"mb_per_s", "MB/s", 2}}) {
        PlotLine line{latency ? absl::StrCat(s, " ", m.column) : s, s, m.tail ? "dashed" : "solid", {}, {}};
        for (const auto& [key, cells] : sel) {
          if (auto v = CellValue(Find(*cells, s), m)) {
            line.x.push_back(key->bytes);
            line.y.push_back(*v);
          }
        }
        if (!line.x.empty()) panel.lines.push_back(std::move(line));
      }
    }
    plot.panels.push_back(std::move(panel));
    if (!ab) continue;
    Plot& ratio = plots.Add(absl::StrCat(bench, "-", scheme, "-ratio"),
                            fmt::format("{} ratio {} / {} (scheme {})", latency ? "Latency" : "Bandwidth",
                                        ab->second, ab->first, scheme),
                            kSizeAxis, Plot::XAxis::kBytes);
    ratio.caption = latency ? fmt::format("{} latency / {} latency: below 1 = {} faster.", ab->second, ab->first, ab->second)
                            : fmt::format("{} MB/s / {} MB/s: above 1 = {} faster.", ab->second, ab->first, ab->second);
    PlotPanel rp;
    rp.ylabel = latency ? fmt::format("Latency ratio {} / {}", ab->second, ab->first)
                        : fmt::format("Bandwidth ratio {} / {}", ab->second, ab->first);
    rp.reference = 1.0;
    for (const Metric& m : RatioMetrics(bench)) {
      PlotLine line{latency ? absl::StrCat(ab->second, " / ", ab->first, " ", m.column)
                            : absl::StrCat(ab->second, " / ", ab->first),
                    ab->second, m.tail ? "dashed" : "solid", {}, {}};
      for (const auto& [key, cells] : sel) {
        if (auto r = Ratio(*cells, *ab, m)) {
          line.x.push_back(key->bytes);
          line.y.push_back(*r);
        }
      }
      if (!line.x.empty()) rp.lines.push_back(std::move(line));
    }
    ratio.panels.push_back(std::move(rp));
  }
}

// Throughput against workers (one line per series and PS count) and against PS (one line
// per series and worker count), for each payload measured with at least two of them.
void ThroughputPlots(const Rows& rows, const std::vector<std::string>& series,
                     const std::optional<std::pair<std::string, std::string>>& ab, PlotMaker& plots) {
  std::vector<std::pair<std::string, double>> payloads;  // scheme, bytes
  std::map<std::pair<std::string, double>, std::string> bytes_text;
  for (const auto& [key, cells] : rows) {
    std::pair<std::string, double> p{key.scheme, key.bytes};
    if (std::find(payloads.begin(), payloads.end(), p) == payloads.end()) payloads.push_back(p);
    bytes_text[p] = BytesText(*cells.begin()->second.points[0]);
  }
  for (const auto& payload : payloads) {
    auto sel = Select(rows, [&](const RowKey& k) { return k.scheme == payload.first && k.bytes == payload.second; });
    std::set<int> workers, ps;
    for (const auto& [key, cells] : sel) {
      workers.insert(key->workers);
      ps.insert(key->ps);
    }
    const std::string what = fmt::format("scheme {}, {} B payload", payload.first, bytes_text[payload]);
    // by_workers: x = workers, one line per PS count; else x = PS, one line per worker count.
    for (bool by_workers : {true, false}) {
      const std::set<int>& xs = by_workers ? workers : ps;
      const std::set<int>& lines = by_workers ? ps : workers;
      if (xs.size() < 2) continue;
      auto x_of = [&](const RowKey& k) { return by_workers ? k.workers : k.ps; };
      auto line_of = [&](const RowKey& k) { return by_workers ? k.ps : k.workers; };
      auto line_name = [&](int n) {
        return by_workers ? fmt::format("{} PS", n) : fmt::format("{} worker{}", n, n == 1 ? "" : "s");
      };
      const std::string xname = by_workers ? "workers" : "PS";
      Plot& plot = plots.Add(fmt::format("throughput-{}-{}-{}", xname, payload.first, bytes_text[payload]),
                             fmt::format("PS throughput vs {} ({})", xname, what),
                             by_workers ? "Workers" : "Parameter servers", Plot::XAxis::kCount);
      plot.caption = fmt::format("Total over all workers; one line per series and {}.",
                                 by_workers ? "PS count" : "worker count");
      for (const Metric& m : TableMetrics("throughput")) {
        PlotPanel panel;
        panel.ylabel = m.key == std::string("rpc_per_s") ? "Total throughput (RPC/s)" : "Total throughput (MB/s)";
        for (const std::string& s : series) {
          for (int n : lines) {
            PlotLine line{fmt::format("{}, {}", s, line_name(n)), s, "solid", {}, {}};
            for (const auto& [key, cells] : sel) {
              if (line_of(*key) != n) continue;
              if (auto v = CellValue(Find(*cells, s), m)) {
                line.x.push_back(x_of(*key));
                line.y.push_back(*v);
              }
            }
            // Sort by x: rows are ordered by PS, then workers.
            std::vector<size_t> order(line.x.size());
            for (size_t i = 0; i < order.size(); ++i) order[i] = i;
            std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return line.x[a] < line.x[b]; });
            PlotLine sorted{line.label, line.series, line.style, {}, {}};
            for (size_t i : order) {
              sorted.x.push_back(line.x[i]);
              sorted.y.push_back(line.y[i]);
            }
            if (!sorted.x.empty()) panel.lines.push_back(std::move(sorted));
          }
        }
        plot.panels.push_back(std::move(panel));
      }
      if (!ab) continue;
      Plot& ratio = plots.Add(fmt::format("throughput-{}-{}-{}-ratio", xname, payload.first, bytes_text[payload]),
                              fmt::format("Throughput ratio {} / {} vs {} ({})", ab->second, ab->first, xname, what),
                              by_workers ? "Workers" : "Parameter servers", Plot::XAxis::kCount);
      ratio.caption = fmt::format("{} RPC/s / {} RPC/s: above 1 = {} faster.", ab->second, ab->first, ab->second);
      PlotPanel rp;
      rp.ylabel = fmt::format("Throughput ratio {} / {}", ab->second, ab->first);
      rp.reference = 1.0;
      for (int n : lines) {
        PlotLine line{line_name(n), ab->second, "solid", {}, {}};
        std::vector<std::pair<double, double>> xy;
        for (const auto& [key, cells] : sel) {
          if (line_of(*key) != n) continue;
          if (auto r = Ratio(*cells, *ab, RatioMetrics("throughput")[0])) xy.push_back({double(x_of(*key)), *r});
        }
        std::sort(xy.begin(), xy.end());
        for (auto [x, y] : xy) {
          line.x.push_back(x);
          line.y.push_back(y);
        }
        if (!line.x.empty()) rp.lines.push_back(std::move(line));
      }
      ratio.panels.push_back(std::move(rp));
    }
  }
}

// --- training records -----------------------------------------------------------------------

// "train" records (one per worker of psbench run --trainer or psbench-worker --trainer):
// one row per run, images/s summed over its workers.
std::optional<Table> TrainTable(const std::vector<const Record*>& train) {
  if (train.empty()) return std::nullopt;
  struct Run {
    std::string series, model, sync;
    double batch = 0, workers = 0, ps = 0, images = 0;
    std::vector<double> step, compute, comm;
    int found = 0;
  };
  std::vector<std::string> order;
  std::map<std::string, Run> runs;
  for (const Record* rec : train) {
    const json& r = rec->json;
    std::string key = absl::StrCat(SeriesKey(r), "\n", Str(r, "run_id"), "\n", Str(r, "model"), "\n",
                                   Num(r, "batch").value_or(0));
    if (!runs.contains(key)) order.push_back(key);
    Run& run = runs[key];
    run.series = SeriesKey(r);
    run.model = Str(r, "model");
    run.sync = r.contains("sync") && r["sync"].is_boolean() ? (r["sync"].get<bool>() ? "sync" : "async") : "?";
    run.batch = Num(r, "batch").value_or(0);
    run.workers = Num(r, "num_workers").value_or(1);
    run.ps = Num(r, "num_ps").value_or(1);
    run.images += Num(r, "images_per_s").value_or(0);
    for (auto [name, list] : {std::pair{"step", &run.step}, {"compute", &run.compute}, {"communication", &run.comm}}) {
      if (auto v = Num(Obj(r, name), "mean_s")) list->push_back(*v * 1e3);
    }
    ++run.found;
  }
  Table t;
  t.id = "train";
  t.title = "Training (embedded trainer through the PS)";
  t.notes.push_back("images/s summed over the run's workers; step, compute and communication: mean per step over the workers, ms.");
  t.columns = {"series", "model", "batch", "workers", "PS", "SGD", "images/s", "step ms", "compute ms", "comm ms"};
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? std::string("-") : Fixed(s / v.size(), 1);
  };
  for (const std::string& key : order) {
    const Run& run = runs[key];
    std::string workers = fmt::format("{:.0f}", run.workers);
    if (run.found != static_cast<int>(run.workers)) workers += fmt::format(" ({} records)", run.found);
    t.rows.push_back({run.series, run.model, fmt::format("{:.0f}", run.batch), workers,
                      fmt::format("{:.0f}", run.ps), run.sync, Fixed(run.images, 2), mean(run.step),
                      mean(run.compute), mean(run.comm)});
  }
  return t;
}

// "train_timing" records (psbench train): the model alone on this machine.
std::optional<Table> TimingTable(const std::vector<const Record*>& timing) {
  if (timing.empty()) return std::nullopt;
  Table t;
  t.id = "train_timing";
  t.title = "Model timing (psbench train)";
  t.notes.push_back("images/s of forward and of forward+backward; share of the CPU's peak FP32 FLOP/s.");
  t.columns = {"host", "model", "engine", "batch", "threads", "forward images/s", "fwd+bwd images/s", "fwd+bwd % of peak"};
  for (const Record* rec : timing) {
    const json& r = rec->json;
    const json& fb = Obj(r, "forward_backward");
    auto fwd = Num(Obj(r, "forward"), "images_per_s");
    auto train = Num(fb, "images_per_s");
    auto peak = Num(fb, "fraction_of_peak");
    t.rows.push_back({Str(Obj(r, "environment"), "host"), Str(r, "model"), Str(r, "engine"),
                      fmt::format("{:.0f}", Num(r, "batch").value_or(0)),
                      fmt::format("{:.0f}", Num(r, "threads").value_or(0)), fwd ? Fixed(*fwd, 2) : "-",
                      train ? Fixed(*train, 2) : "-", peak ? Fixed(100 * *peak, 1) : "-"});
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

absl::StatusOr<Report> BuildReport(const std::vector<Record>& records, const ReportOptions& options) {
  Report report;
  std::map<std::string, int> kinds;
  std::vector<Point> points;
  std::vector<const Record*> measured, train, timing;
  std::map<std::string, int> skipped;  // kind -> count
  for (const Record& rec : records) {
    std::string kind = KindOf(rec.json);
    ++kinds[kind];
    std::string series = SeriesKey(rec.json);
    if (IsBenchmark(kind)) {
      if (Str(rec.json, "transport").empty() && Str(rec.json, "label").empty()) {
        return absl::InvalidArgumentError(absl::StrCat(rec.where, ": a ", kind, " record without transport"));
      }
      auto p = ReadPoint(rec, series);
      if (!p.ok()) return p.status();
      points.push_back(*std::move(p));
      measured.push_back(&rec);
    } else if (kind == "train") {
      train.push_back(&rec);
    } else if (kind == "train_timing") {
      timing.push_back(&rec);
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
    } else {
      report.notes.push_back(fmt::format("{} record{} of kind '{}' skipped: psbench report does not know it.",
                                         n, n == 1 ? "" : "s", kind));
    }
  }
  if (points.empty() && train.empty() && timing.empty()) {
    std::vector<std::string> found;
    for (const auto& [kind, n] : kinds) found.push_back(absl::StrCat(n, " ", kind));
    return absl::InvalidArgumentError(absl::StrCat(
        absl::StrJoin(options.inputs, ", "), ": no record psbench report can tabulate (found ",
        absl::StrJoin(found, ", "), "; it reads latency, bandwidth, throughput, train and train_timing records)"));
  }

  // Series of the benchmark records, the ones compared.
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

  // Throughput: totals, and totals summed from worker records whose run has none.
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
  std::vector<Point> summed;
  summed.reserve(orphan_order.size());
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

  std::vector<std::string> schemes;
  for (const Point* p : rows_from) AddUnique(schemes, p->scheme);
  PlotMaker plots(report);
  for (const char* bench : {"latency", "bandwidth", "throughput"}) {
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
    if (rows.empty()) continue;
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
    if (std::string(bench) == "throughput") {
      ThroughputPlots(rows, series, ab, plots);
    } else {
      SizePlots(bench, rows, series, schemes, ab, plots);
    }
  }
  if (auto t = TrainTable(train)) report.tables.push_back(*std::move(t));
  if (auto t = TimingTable(timing)) report.tables.push_back(*std::move(t));
  BuildHeader(records, measured, kinds, options, report);
  return report;
}

json PlotData(const Report& report) {
  json plots = json::array();
  for (const Plot& p : report.plots) {
    json panels = json::array();
    for (const PlotPanel& panel : p.panels) {
      json lines = json::array();
      for (const PlotLine& l : panel.lines) {
        lines.push_back({{"label", l.label}, {"series", l.series}, {"style", l.style}, {"x", l.x}, {"y", l.y}});
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
