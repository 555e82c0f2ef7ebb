// Reading the fields of a record that is input (any may be missing or of the wrong type), and
// the figures of the tables and plots.
#include <algorithm>

#include "cli/report/report_internal.h"
#include "fmt/core.h"

namespace psbench::report::internal {

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

void AddUnique(std::vector<std::string>& list, const std::string& text) {
  if (!text.empty() && std::find(list.begin(), list.end(), text) == list.end()) list.push_back(text);
}

std::string BytesText(const Point& p) {
  return p.exact_bytes ? fmt::format("{:.0f}", p.bytes) : fmt::format("~{:.0f}", p.bytes);
}

std::vector<Metric> TableMetrics(const std::string& bench) {
  if (bench == "latency") return {{"p50", "p50 µs", 2}, {"p99", "p99 µs", 2, true}, {"mean", "mean µs", 2}};
  if (bench == "bandwidth") return {{"mb_per_s", "MB/s", 2}};
  return {{"rpc_per_s", "RPC/s", 1}, {"mb_per_s", "MB/s", 2}};
}

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

}  // namespace psbench::report::internal
