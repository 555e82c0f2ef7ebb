// Open-loop measurements (bench/load_report.h): per series and payload measured at two or more
// rates, a table of the rates with the three views of latency and the knee, and a plot of
// latency against achieved rate with the knee marked.
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "bench/load_report.h"
#include "bench/stats.h"
#include "cli/report/report_internal.h"
#include "fmt/core.h"

namespace psbench::report::internal {
namespace {

std::string Us(double v) { return Fixed(v, 1); }

// One rate's figures: with one measurement, that measurement's; with several (--repetitions),
// each figure's own median over them, and the largest p99 over the smallest.
struct RateFigures {
  const std::vector<const Record*>& records;
  // The median over the measurements of `key` in the object `within` of each record's load
  // ("" for the load itself).
  double Median(const char* within, const char* key) const {
    std::vector<double> v;
    for (const Record* r : records) {
      const json& l = LoadOf(*r);
      v.push_back(*within ? JsonNumberAt(JsonObjectAt(l, within), key) : JsonNumberAt(l, key));
    }
    return psbench::Median(std::move(v));
  }
  // A count's median, rounded (an even number of measurements may fall between two).
  uint64_t CountMedian(const char* key) const {
    std::vector<double> v;
    for (const Record* r : records) v.push_back(static_cast<double>(JsonCountAt(LoadOf(*r), key)));
    return static_cast<uint64_t>(std::llround(psbench::Median(std::move(v))));
  }
  // The point the knee and the plot take (LoadPointOf's figures, each its median).
  LoadPoint Point() const {
    return {Median("", "offered_per_s"),        Median("", "achieved_per_s"),
            Median("corrected_us", "p50"),      Median("corrected_us", "p99"),
            Median("corrected_us", "p9999"),    CountMedian("dropped")};
  }
  std::string P99Spread() const {
    double lo = 0, hi = 0;  // a p99 of 0 (nothing completed) has no ratio
    for (const Record* r : records) {
      const double v = LoadPointOf(*r)->p99_us;
      if (v <= 0) return "-";
      lo = lo == 0 ? v : std::min(lo, v);
      hi = std::max(hi, v);
    }
    return fmt::format("{:.2f}x", hi / lo);
  }
};

}  // namespace

void LoadSections(const std::string& bench, const Rows& rows, const std::vector<std::string>& series,
                  Report& report, PlotMaker& plots) {
  // Per series and payload (scheme, bytes, workers, PS): its open-loop records, rising rates.
  // series, its order, bytes, scheme, workers, PS, load kind, payload
  using Group = std::tuple<std::string, int, double, std::string, int, int, std::string, std::string>;
  using Rates = std::vector<const std::vector<const Record*>*>;  // each rate's records
  std::map<Group, Rates> groups;
  std::map<Group, size_t> most;  // per group, the most measurements of one rate
  for (const auto& [key, cells] : rows) {
    if (key.load.empty()) continue;
    for (const std::string& s : series) {
      auto it = cells.find(s);
      if (it == cells.end()) continue;
      const auto order = std::find(series.begin(), series.end(), s) - series.begin();
      const Record* r = it->second.records[0];
      const Group group{s, static_cast<int>(order), key.bytes, key.scheme, key.workers, key.ps,
                        JsonTextAt(LoadOf(*r), "kind"), key.payload};
      groups[group].push_back(&it->second.records);
      most[group] = std::max(most[group], it->second.records.size());
    }
  }
  std::vector<std::pair<Group, Rates>> ordered(groups.begin(), groups.end());
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return std::get<1>(a.first) < std::get<1>(b.first); });
  for (const auto& [group, rates] : ordered) {
    const std::string& s = std::get<0>(group);
    const Record& first = *rates.front()->front();
    std::string what = fmt::format("{} {}, scheme {}, {} B, {} arrivals", s, bench, std::get<3>(group),
                                   PayloadBytesText(first), std::get<6>(group));
    if (bench == "throughput") absl::StrAppend(&what, fmt::format(", {} workers x {} PS", std::get<4>(group), std::get<5>(group)));
    Table t;
    t.id = fmt::format("load-{}", report.tables.size() + 1);
    t.title = fmt::format("Open-loop load: {}", what);
    t.notes.push_back(
        "Latency in µs from each operation's planned start (corrected for coordinated omission), and from its "
        "actual send (unc.); lag: the send behind its plan; rates per second over the workers.");
    const bool repeated = most[group] > 1;
    if (repeated) {
      t.notes.push_back(fmt::format(
          "Rates measured more than once (--repetitions, up to {} times): each figure is its own median over the "
          "measurements of that rate, and the knee is found from the medians; p99 spread: the largest p99 over "
          "the smallest.",
          most[group]));
    }
    t.columns = {"offered/s", "achieved/s", "p50", "p99", "p99.9", "p99.99", "unc. p50", "unc. p99", "lag p99",
                 "deferred", "dropped"};
    if (repeated) t.columns.insert(t.columns.end(), {"runs", "p99 spread"});
    std::vector<LoadPoint> points;
    PlotLine p50{s + " p50", s, "solid", {}, {}, {}}, p99{s + " p99", s, "dashed", {}, {}, {}};
    for (const std::vector<const Record*>* records : rates) {
      const RateFigures f{*records};
      const LoadPoint& m = points.emplace_back(f.Point());
      const char* u = "uncorrected_us";
      t.rows.push_back({Fixed(m.offered_per_s, 0), Fixed(m.achieved_per_s, 0), Us(m.p50_us), Us(m.p99_us),
                        Us(f.Median("corrected_us", "p999")), Us(m.p9999_us), Us(f.Median(u, "p50")),
                        Us(f.Median(u, "p99")), Us(f.Median("lag_us", "p99")),
                        std::to_string(f.CountMedian("deferred")), std::to_string(m.dropped)});
      if (repeated) t.rows.back().insert(t.rows.back().end(), {std::to_string(records->size()), f.P99Spread()});
      p50.x.push_back(m.achieved_per_s);
      p50.y.push_back(m.p50_us);
      p99.x.push_back(m.achieved_per_s);
      p99.y.push_back(m.p99_us);
    }
    std::optional<Knee> knee = FindKnee(points);
    t.notes.push_back(knee ? fmt::format("Knee: {:.0f}/s offered ({:.0f}/s achieved): {}.",
                                         points[knee->index].offered_per_s, points[knee->index].achieved_per_s, knee->why)
                           : fmt::format("No knee up to {:.0f}/s offered.", points.back().offered_per_s));
    report.tables.push_back(std::move(t));
    if (points.size() < 2) {
      plots.Note(fmt::format("Open-loop load ({}): one rate measured, so no plot against rate (the table has it).", what));
      continue;
    }
    Plot& plot = plots.Add(absl::StrCat("load-", s, "-", bench, "-", PayloadBytesText(first)),
                           fmt::format("Latency vs achieved rate ({})", what), "Achieved rate (operations/s)",
                           Plot::XAxis::kRate);
    plot.caption = "Corrected latency, p50 (solid) and p99 (dashed), against the rate achieved at each offered "
                   "rate, log-log; the dotted line marks the knee.";
    PlotPanel panel;
    panel.ylabel = "Latency from the planned start (µs)";
    panel.ylog = true;
    panel.lines = {std::move(p50), std::move(p99)};
    if (knee) panel.marks.push_back({points[knee->index].achieved_per_s, "knee"});
    plot.panels.push_back(std::move(panel));
  }
}

}  // namespace psbench::report::internal
