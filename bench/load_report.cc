#include "bench/load_report.h"

#include <algorithm>
#include <map>
#include <string>

#include "bench/figures.h"
#include "bench/hdr_text.h"
#include "bench/stats.h"
#include "bench/table.h"
#include "fmt/core.h"

namespace psbench {
namespace {

using json = nlohmann::json;

double Field(const json& o, const char* key) { return JsonNumberAt(o, key); }

std::string Us(double v) { return fmt::format("{:.1f}", v); }

std::string Rate(double v) { return fmt::format("{:.0f}", v); }

const json& Empty() {
  static const json* empty = new json(json::object());
  return *empty;
}

}  // namespace

const json& JsonObjectAt(const json& o, const char* key) {
  if (!o.is_object()) return Empty();
  auto it = o.find(key);
  return it != o.end() && it->is_object() ? *it : Empty();
}

std::string JsonTextAt(const json& o, const char* key) {
  if (!o.is_object()) return "";
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

double JsonNumberAt(const json& o, const char* key) {
  if (!o.is_object()) return 0;
  auto it = o.find(key);
  return it != o.end() && it->is_number() ? it->get<double>() : 0;
}

uint64_t JsonCountAt(const json& o, const char* key) {
  if (!o.is_object()) return 0;
  auto it = o.find(key);
  if (it == o.end() || !it->is_number_integer()) return 0;
  return it->is_number_unsigned() ? it->get<uint64_t>() : static_cast<uint64_t>(std::max<int64_t>(it->get<int64_t>(), 0));
}

const json& LoadOf(const Record& r) { return JsonObjectAt(r.extra, "load"); }

std::optional<LoadPoint> LoadPointOf(const Record& r) {
  if (!r.extra.is_object() || !r.extra.contains("load") || !r.extra["load"].is_object()) return std::nullopt;
  const json& l = LoadOf(r);
  LoadPoint p;
  p.offered_per_s = Field(l, "offered_per_s");
  p.achieved_per_s = Field(l, "achieved_per_s");
  p.p50_us = Field(JsonObjectAt(l, "corrected_us"), "p50");
  p.p99_us = Field(JsonObjectAt(l, "corrected_us"), "p99");
  p.p9999_us = Field(JsonObjectAt(l, "corrected_us"), "p9999");
  p.dropped = JsonCountAt(l, "dropped");
  return p;
}

std::optional<Knee> FindKnee(const std::vector<LoadPoint>& points) {
  // Why each point is past the knee ("" when it is not). Its p99 is held against the median
  // p99 of the lower rates that were not past it themselves: the low-load value, which neither
  // a hiccup of the machine nor the rates past the knee move.
  std::vector<std::string> why(points.size());
  std::vector<double> good;
  for (size_t i = 0; i < points.size(); ++i) {
    const LoadPoint& p = points[i];
    const double low = Median(good);
    if (p.dropped > 0) {
      why[i] = fmt::format("{} operations dropped", p.dropped);
    } else if (p.offered_per_s > 0 && p.achieved_per_s < kKneeAchieved * p.offered_per_s) {
      why[i] = fmt::format("achieved {:.0f} % of offered", 100 * p.achieved_per_s / p.offered_per_s);
    } else if (low > 0 && p.p99_us > kKneeP99Factor * low) {
      why[i] = fmt::format("p99 {:.1f}x its low-load value", p.p99_us / low);
    } else {
      good.push_back(p.p99_us);
    }
  }
  // The knee: the first rate from which every higher rate is past it too. A rate past it and
  // a higher one that is not was a hiccup of the machine, not the PS's limit.
  std::optional<Knee> knee;
  for (size_t i = points.size(); i > 0 && !why[i - 1].empty(); --i) knee = Knee{i - 1, why[i - 1]};
  return knee;
}

json MergeOpenLoop(const std::vector<Record>& workers) {
  json out;
  std::optional<Histogram> merged[std::size(kLoadHistograms)];
  json seeds = json::array();
  for (const Record& w : workers) {
    if (!LoadPointOf(w)) continue;
    const json& l = LoadOf(w);
    if (out.is_null()) {
      out = {{"schedule", JsonTextAt(l, "schedule")}, {"kind", JsonTextAt(l, "kind")},
             {"rate_per_s", Field(l, "rate_per_s")}, {"max_in_flight", JsonCountAt(l, "max_in_flight")},
             {"planned", 0}, {"completed", 0}, {"deferred", 0}, {"dropped", 0},
             {"offered_per_s", 0.0}, {"achieved_per_s", 0.0}, {"workers", 0}};
      if (!JsonTextAt(l, "sweep").empty()) out["sweep"] = JsonTextAt(l, "sweep");
    }
    seeds.push_back(JsonCountAt(l, "seed"));
    out["workers"] = out["workers"].get<int>() + 1;
    for (const char* k : {"planned", "completed", "deferred", "dropped"}) {
      out[k] = out[k].get<uint64_t>() + JsonCountAt(l, k);
    }
    for (const char* k : {"offered_per_s", "achieved_per_s"}) out[k] = out[k].get<double>() + Field(l, k);
    for (size_t i = 0; i < std::size(kLoadHistograms); ++i) {
      auto h = HistogramFromJson(JsonObjectAt(JsonObjectAt(l, "histograms"), kLoadHistograms[i]));
      if (!h.ok()) continue;
      if (merged[i]) merged[i]->Merge(*h);
      else merged[i] = *h;
    }
  }
  if (out.is_null()) return out;
  out["seeds"] = seeds;
  const char* summaries[] = {"corrected_us", "uncorrected_us", "lag_us"};
  for (size_t i = 0; i < std::size(kLoadHistograms); ++i) {
    if (!merged[i]) continue;
    out[summaries[i]] = PercentilesJson(*merged[i]);
    out["histograms"][kLoadHistograms[i]] = HistogramToJson(*merged[i]);
  }
  return out;
}

void PrintOpenLoop(std::FILE* out, const std::vector<Record>& records) {
  // Series and payload, in the order first seen: a sweep's rates are rows of one table.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const Record*>> groups;
  for (const Record& r : records) {
    if (!IsHeadline(r) || !LoadPointOf(r)) continue;
    std::string key = fmt::format("{}, {} {}", r.Series(), r.Kind(), r.payload_summary.value_or("?"));
    if (r.Kind() == "throughput") key += fmt::format(", {} workers x {} PS", r.workers.value_or(1), r.ps.value_or(0));
    if (std::string kind = JsonTextAt(LoadOf(r), "kind"); !kind.empty()) key += ", " + kind;
    // Each repetition of a sweep is a sweep of its own: its rates rise, and the knee is its.
    if (std::string rep = r.RepetitionText(); !rep.empty()) key += ", " + rep;
    if (!groups.contains(key)) order.push_back(key);
    groups[key].push_back(&r);
  }
  for (const std::string& key : order) {
    const std::vector<const Record*>& rows = groups[key];
    fmt::print(out,
               "# open-loop load, {}: latency in usec from each planned start (corrected), from the actual "
               "send (uncorrected); lag: the send behind its plan; rates per second over the workers\n",
               key);
    StreamingTable table(out, {{"#offered", 10}, {"achieved", 10}, {"p50", 9}, {"p99", 9}, {"p99.9", 9},
                               {"p99.99", 9}, {"max", 10}, {"unc p50", 9}, {"unc p99", 9}, {"lag p99", 9},
                               {"deferred", 9}, {"dropped", 8}});
    table.PrintHeader();
    std::vector<LoadPoint> points;
    for (const Record* r : rows) {
      const json& l = LoadOf(*r);
      const json& c = JsonObjectAt(l, "corrected_us");
      const json& u = JsonObjectAt(l, "uncorrected_us");
      table.PrintRow({Rate(Field(l, "offered_per_s")), Rate(Field(l, "achieved_per_s")), Us(Field(c, "p50")),
                      Us(Field(c, "p99")), Us(Field(c, "p999")), Us(Field(c, "p9999")), Us(Field(c, "max")),
                      Us(Field(u, "p50")), Us(Field(u, "p99")), Us(Field(JsonObjectAt(l, "lag_us"), "p99")),
                      std::to_string(JsonCountAt(l, "deferred")), std::to_string(JsonCountAt(l, "dropped"))});
      points.push_back(*LoadPointOf(*r));
    }
    if (points.size() < 2) continue;
    if (auto knee = FindKnee(points)) {
      fmt::print(out, "# knee: {:.0f}/s offered ({:.0f}/s achieved): {}\n", points[knee->index].offered_per_s,
                 points[knee->index].achieved_per_s, knee->why);
    } else {
      fmt::print(out, "# no knee up to {:.0f}/s offered (p99 within {:g}x of its low-load value, achieved at least {:.0f} %)\n",
                 points.back().offered_per_s, kKneeP99Factor, 100 * kKneeAchieved);
    }
  }
}

}  // namespace psbench
