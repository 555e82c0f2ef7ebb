// Open-loop measurements (bench/load_report.h): per series and payload measured at two or more
// rates, a table of the rates with the three views of latency and the knee, and a plot of
// latency against achieved rate with the knee marked.
#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "bench/load_report.h"
#include "cli/report/report_internal.h"
#include "fmt/core.h"

namespace psbench::report::internal {
namespace {

double Of(const json& o, const char* key) { return JsonNumberAt(o, key); }

std::string Us(double v) { return Fixed(v, 1); }

}  // namespace

void LoadSections(const std::string& bench, const Rows& rows, const std::vector<std::string>& series,
                  Report& report, PlotMaker& plots) {
  // Per series and payload (scheme, bytes, workers, PS): its open-loop records, rising rates.
  // series, its order, bytes, scheme, workers, PS, load kind, payload
  using Group = std::tuple<std::string, int, double, std::string, int, int, std::string, std::string>;
  std::map<Group, std::vector<const Record*>> groups;
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
      groups[group].push_back(r);
      most[group] = std::max(most[group], it->second.records.size());
    }
  }
  std::vector<std::pair<Group, std::vector<const Record*>>> ordered(groups.begin(), groups.end());
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return std::get<1>(a.first) < std::get<1>(b.first); });
  for (const auto& [group, records] : ordered) {
    const std::string& s = std::get<0>(group);
    const Record& first = *records.front();
    std::string what = fmt::format("{} {}, scheme {}, {} B, {} arrivals", s, bench, std::get<3>(group),
                                   PayloadBytesText(first), std::get<6>(group));
    if (bench == "throughput") absl::StrAppend(&what, fmt::format(", {} workers x {} PS", std::get<4>(group), std::get<5>(group)));
    Table t;
    t.id = fmt::format("load-{}", report.tables.size() + 1);
    t.title = fmt::format("Open-loop load: {}", what);
    t.notes.push_back(
        "Latency in µs from each operation's planned start (corrected for coordinated omission), and from its "
        "actual send (unc.); lag: the send behind its plan; rates per second over the workers.");
    if (most[group] > 1) {
      t.notes.push_back("A rate measured more than once (--repetitions) shows its first measurement here; the "
                        "benchmark's table above shows medians.");
    }
    t.columns = {"offered/s", "achieved/s", "p50", "p99", "p99.9", "p99.99", "unc. p50", "unc. p99", "lag p99",
                 "deferred", "dropped"};
    std::vector<LoadPoint> points;
    PlotLine p50{s + " p50", s, "solid", {}, {}, {}}, p99{s + " p99", s, "dashed", {}, {}, {}};
    for (const Record* r : records) {
      const json& l = LoadOf(*r);
      const json& c = JsonObjectAt(l, "corrected_us");
      const json& u = JsonObjectAt(l, "uncorrected_us");
      t.rows.push_back({Fixed(Of(l, "offered_per_s"), 0), Fixed(Of(l, "achieved_per_s"), 0), Us(Of(c, "p50")),
                        Us(Of(c, "p99")), Us(Of(c, "p999")), Us(Of(c, "p9999")), Us(Of(u, "p50")), Us(Of(u, "p99")),
                        Us(Of(JsonObjectAt(l, "lag_us"), "p99")), std::to_string(JsonCountAt(l, "deferred")),
                        std::to_string(JsonCountAt(l, "dropped"))});
      points.push_back(*LoadPointOf(*r));
      p50.x.push_back(points.back().achieved_per_s);
      p50.y.push_back(points.back().p50_us);
      p99.x.push_back(points.back().achieved_per_s);
      p99.y.push_back(points.back().p99_us);
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
