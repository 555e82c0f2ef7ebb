#include "cli/compare.h"

#include <algorithm>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/cli.h"
#include "bench/report.h"
#include "bench/run_status.h"
#include "cli/launch/launch.h"
#include "fmt/core.h"

namespace psbench {
namespace {

using nlohmann::json;

// The headline figures of a benchmark: what the comparison table shows and compares.
struct Metric {
  const char* key;     // in the comparison record: "p50_us", "mean_us", "mb_per_s", "rpc_per_s"
  const char* column;  // table column
  int decimals;
};

std::vector<Metric> HeadlineMetrics(const std::string& benchmark) {
  if (benchmark == "latency") return {{"p50_us", "p50", 2}, {"mean_us", "mean", 2}};
  if (benchmark == "bandwidth") return {{"mb_per_s", "MB/s", 2}};
  return {{"rpc_per_s", "RPC/s", 1}, {"mb_per_s", "MB/s", 2}};
}

bool LowerIsBetter(const std::string& benchmark) { return benchmark == "latency"; }

double MetricValue(const json& record, const std::string& key) {
  if (key == "p50_us") return record["latency_us"]["p50"].get<double>();
  if (key == "mean_us") return record["latency_us"]["mean"].get<double>();
  return record[key].get<double>();
}

// The records a comparison row is made of: the worker's for latency and bandwidth (one
// worker), the total over the workers for throughput.
std::vector<json> HeadlineRecords(const std::vector<json>& results) {
  std::vector<json> out;
  for (const json& r : results) {
    bool throughput = r.value("benchmark", "") == "throughput";
    if (r.value("scope", "") == (throughput ? "total" : "worker")) out.push_back(r);
  }
  return out;
}

// One row of the comparison: the same benchmark and payload, one record per entry (empty
// where that entry's run did not complete).
struct CompareRow {
  std::vector<std::optional<json>> records;
  const json& first() const { return *records[0]; }
};

std::optional<double> Ratio(const CompareRow& row, size_t entry, const std::string& key) {
  if (!row.records[0] || !row.records[entry]) return std::nullopt;
  double base = MetricValue(*row.records[0], key);
  if (base == 0) return std::nullopt;
  return MetricValue(*row.records[entry], key) / base;
}

std::string PayloadBytesText(const json& r) {
  return r["payload_bytes"].is_number_integer()
             ? std::to_string(r["payload_bytes"].get<uint64_t>())
             : fmt::format("~{:.0f}", r["payload_bytes"].get<double>());
}

// "warm-up 5 iterations | measure 20 iterations | ..." from a record's config.
std::string MeasurementText(const json& r) {
  const json& cfg = r["config"];
  std::string text = fmt::format(
      "warm-up {} | measure {}",
      cfg.value("warmup_iterations", -1) >= 0
          ? fmt::format("{} iterations", cfg.value("warmup_iterations", 0))
          : fmt::format("{:g}s", cfg.value("warmup_s", 0.0)),
      cfg.value("iterations", 0) > 0 ? fmt::format("{} iterations", cfg.value("iterations", 0))
                                     : fmt::format("{:g}s", cfg.value("duration_s", 0.0)));
  std::string bench = r["benchmark"];
  if (bench == "bandwidth") text += fmt::format(" | window {}", cfg.value("window", 0));
  if (bench == "throughput") {
    text += fmt::format(" | {} workers x {} PS, {} outstanding per PS", r.value("workers", 0),
                        r.value("ps", 0), cfg.value("outstanding", 0));
  }
  text += fmt::format(" | validate {} | busy-poll {} | tls {}", r.value("validate", false) ? "on" : "off",
                      cfg.value("busy_poll", false) ? "on" : "off", r.value("tls", false) ? "on" : "off");
  return text;
}

// The comparison table: a block per benchmark (its rows in run order), a column group per
// entry with the headline figures, then a group per later entry with its ratios to the first.
void PrintComparison(std::FILE* out, const std::vector<CompareEntry>& entries,
                     const std::vector<CompareRow>& rows) {
  const std::string& base = entries[0].label;
  std::vector<std::string> labels;
  for (const auto& e : entries) labels.push_back(e.label);
  bool one_mode = entries[0].label == entries[0].transport;
  fmt::print(out, "\n# psbench comparison: {} (baseline = {}){}\n", absl::StrJoin(labels, " | "),
             base,
             one_mode ? absl::StrCat(" | mode ", std::string(WireModeName(entries[0].mode)))
                      : std::string());
  fmt::print(out,
             "# ratio columns \"B vs A\" = B's figure / A's figure, A = the baseline (the first "
             "of --transports)\n"
             "#   latency usec: lower is better, below 1x = B faster | MB/s, RPC/s: higher is "
             "better, above 1x = B faster\n");
  constexpr int kCol = 10;
  constexpr int kFixed = 8 + 1 + 12;
  for (const char* bench : {"latency", "bandwidth", "throughput"}) {
    std::vector<const CompareRow*> block;
    for (const auto& row : rows) {
      if (row.first()["benchmark"] == bench) block.push_back(&row);
    }
    if (block.empty()) continue;
    const std::vector<Metric> metrics = HeadlineMetrics(bench);
    const int n = static_cast<int>(metrics.size());
    struct Group {
      std::string title;
      int width;
    };
    std::vector<Group> groups;
    for (const auto& e : entries) groups.push_back({e.label, 0});
    for (size_t t = 1; t < entries.size(); ++t) {
      groups.push_back({absl::StrCat(entries[t].label, " vs ", base), 0});
    }
    for (auto& g : groups) {
      g.width = std::max(static_cast<int>(g.title.size()), n * kCol + (n - 1));
    }
    // Cells of one group, right-aligned; the first column takes any width the title adds.
    auto cells = [&](const Group& g, const std::vector<std::string>& values) {
      std::string text;
      for (int i = 0; i < n; ++i) {
        int w = i == 0 ? g.width - (n - 1) * (kCol + 1) : kCol;
        text += fmt::format("{}{:>{}}", i == 0 ? "" : " ", values[i], w);
      }
      return text;
    };
    std::string what =
        std::string(bench) == "latency"     ? "round trip usec, lower is better"
        : std::string(bench) == "bandwidth" ? "MB/s (10^6 B/s), higher is better"
                                            : "RPC/s and MB/s, total over the workers, higher is better";
    fmt::print(out, "\n# {}: {} | {}\n", bench, what, MeasurementText(block[0]->first()));
    std::string line1 = fmt::format("{:<{}}", "#", kFixed);
    std::string line2 = fmt::format("{:>8} {:>12}", "#scheme", "#bytes");
    std::vector<std::string> columns;
    for (const auto& m : metrics) columns.push_back(m.column);
    for (const auto& g : groups) {
      line1 += fmt::format("  {:>{}}", g.title, g.width);
      line2 += "  " + cells(g, columns);
    }
    fmt::print(out, "{}\n{}\n", line1, line2);
    for (const CompareRow* row : block) {
      const json& first = row->first();
      std::string line = fmt::format("{:>8} {:>12}", first["scheme"].get<std::string>(),
                                     PayloadBytesText(first));
      for (size_t t = 0; t < entries.size(); ++t) {
        std::vector<std::string> values;
        for (const auto& m : metrics) {
          values.push_back(row->records[t]
                               ? fmt::format("{:.{}f}", MetricValue(*row->records[t], m.key),
                                             m.decimals)
                               : std::string("-"));
        }
        line += "  " + cells(groups[t], values);
      }
      for (size_t t = 1; t < entries.size(); ++t) {
        std::vector<std::string> values;
        for (const auto& m : metrics) {
          auto ratio = Ratio(*row, t, m.key);
          values.push_back(ratio ? fmt::format("{:.2f}x", *ratio) : std::string("-"));
        }
        line += "  " + cells(groups[entries.size() - 1 + t], values);
      }
      fmt::print(out, "{}\n", line);
    }
  }
  std::fflush(out);
}

// The machine-readable row: the figures of every entry and their ratios to the first.
json ComparisonRecord(const std::vector<CompareEntry>& entries, const CompareRow& row,
                      const std::vector<std::string>& command) {
  const json& first = row.first();
  std::string bench = first["benchmark"];
  json transports = json::array();
  for (const auto& e : entries) {
    json entry = {{"label", e.label}, {"transport", e.transport}};
    if (TransportHonoursMode(e.transport)) entry["mode"] = std::string(WireModeName(e.mode));
    transports.push_back(entry);
  }
  json values = json::object(), ratios = json::object(), iterations = json::array();
  for (const auto& m : HeadlineMetrics(bench)) {
    json v = json::array(), r = json::array();
    for (size_t t = 0; t < entries.size(); ++t) {
      v.push_back(MetricValue(*row.records[t], m.key));
      auto ratio = Ratio(row, t, m.key);
      r.push_back(ratio ? json(*ratio) : json(nullptr));
    }
    values[m.key] = v;
    ratios[m.key] = r;
  }
  for (const auto& rec : row.records) iterations.push_back((*rec)["iterations"]);
  return {{"kind", "comparison"},
          {"benchmark", bench},
          {"scheme", first["scheme"]},
          {"buffers", first["buffers"]},
          {"payload_summary", first["payload_summary"]},
          {"payload_bytes", first["payload_bytes"]},
          {"scope", first["scope"]},
          {"workers", first["workers"]},
          {"ps", first["ps"]},
          {"seed", first["seed"]},
          {"validate", first["validate"]},
          {"tls", first.value("tls", false)},
          {"transports", transports},
          {"baseline", entries[0].label},
          {"ratio", "value / baseline value (ratios[m][i] = values[m][i] / values[m][0])"},
          {"better", LowerIsBetter(bench) ? "lower" : "higher"},
          {"values", values},
          {"ratios", ratios},
          {"iterations", iterations},
          {"command", command},
          {"timestamp", absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone())}};
}


}  // namespace

// Parses "TRANSPORT[/MODE],TRANSPORT[/MODE],...": at least two entries, distinct (transport,
// mode) pairs, every transport one of TransportNames(). Entries without /MODE use
// `default_mode` (--mode). Labels carry the mode only when the entries' modes differ.
absl::StatusOr<std::vector<CompareEntry>> ParseTransportList(const std::string& text,
                                                            WireMode default_mode) {
  const std::string flag = "--transports=" + text;
  const std::string at_least_two =
      ": give at least two entries to compare, TRANSPORT or TRANSPORT/MODE separated by "
      "commas (e.g. grpc/non-serialized,grpc/serialized); for one transport use --transport";
  if (text.empty()) return absl::InvalidArgumentError(flag + at_least_two);
  std::vector<CompareEntry> out;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    if (item.empty()) {
      return absl::InvalidArgumentError(
          flag + ": an empty entry; give TRANSPORT or TRANSPORT/MODE separated by commas");
    }
    CompareEntry e{std::string(item), default_mode, ""};
    if (auto slash = item.find('/'); slash != absl::string_view::npos) {
      e.transport = std::string(item.substr(0, slash));
      std::string mode(item.substr(slash + 1));
      auto parsed = ParseWireMode(mode);
      if (!parsed.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(flag, ": in '", std::string(item), "', '",
                                                       mode, "' is not a mode; use "
                                                       "serialized or non-serialized"));
      }
      e.mode = *parsed;
    }
    std::vector<std::string> names = TransportNames();
    if (std::find(names.begin(), names.end(), e.transport) == names.end()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": ", e.transport,
                                                     " is not a transport; available: ",
                                                     absl::StrJoin(names, ", ")));
    }
    const bool has_modes = TransportHonoursMode(e.transport);
    if (!has_modes && item.find('/') != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, ": '", std::string(item), "': ", e.transport, " has no wire modes (only ",
          TransportsWith(&TransportTraits::honours_mode), " does); write ", e.transport));
    }
    if (!has_modes) e.mode = WireMode::kNonSerialized;  // unused; one value so entries compare
    for (const CompareEntry& prev : out) {
      if (prev.transport == e.transport && prev.mode == e.mode) {
        return absl::InvalidArgumentError(absl::StrCat(
            flag, ": ", TransportWithMode(e.transport, e.mode), " is listed twice",
            has_modes ? absl::StrCat(" (an entry without /MODE uses --mode=",
                                     std::string(WireModeName(default_mode)), ")")
                      : std::string()));
      }
    }
    out.push_back(std::move(e));
  }
  if (out.size() < 2) return absl::InvalidArgumentError(flag + at_least_two);
  // Labels carry the mode only when the entries that have one differ in it.
  std::set<WireMode> modes;
  for (const CompareEntry& e : out) {
    if (TransportHonoursMode(e.transport)) modes.insert(e.mode);
  }
  for (CompareEntry& e : out) {
    e.label = modes.size() <= 1 ? e.transport : TransportWithMode(e.transport, e.mode);
  }
  return out;
}



// Runs every scenario under every entry, entry by entry (fresh processes for each run), then
// prints the comparison and appends its records. Stops at the first failed run: prints what
// completed, names the entry on stderr and returns 1 (130 when interrupted).
int RunComparison(const std::vector<CompareEntry>& entries,
                  const std::vector<std::pair<Scenario, size_t>>& runs, const RunOne& run_one,
                  const std::string& json_path, const std::vector<std::string>& command) {
  std::vector<CompareRow> rows;
  std::vector<std::vector<size_t>> rows_of_run(runs.size());
  const size_t total = entries.size() * runs.size();
  std::string failure;
  int exit_code = 0;
  for (size_t t = 0; t < entries.size() && failure.empty(); ++t) {
    const CompareEntry& e = entries[t];
    for (size_t r = 0; r < runs.size(); ++r) {
      Scenario s = runs[r].first;
      s.transport = e.transport;
      s.mode = e.mode;
      const size_t number = t * runs.size() + r;
      std::string what = absl::StrCat(std::string(BenchmarkName(s.benchmark)), " ",
                                      s.sweep ? std::string("sweep")
                                              : std::string(SchemeName(s.payload.scheme)));
      absl::Time start = absl::Now();
      RunStatus::Get().SetRun(static_cast<int>(number) + 1, static_cast<int>(total));
      auto results = run_one(s, runs[r].second, static_cast<int>(number));
      std::vector<json> headline;
      if (results.ok()) {
        headline = HeadlineRecords(*results);
        if (t > 0 && headline.size() != rows_of_run[r].size()) {
          results = absl::DataLossError(absl::StrCat(headline.size(), " results where ",
                                                     entries[0].label, " had ",
                                                     rows_of_run[r].size()));
        }
      }
      if (!results.ok()) {
        failure = absl::StrCat("transport ", e.label, ": ", what, ": ",
                               std::string(results.status().message()));
        exit_code = Interrupted() ? 130 : kExitRuntime;
        break;
      }
      if (!json_path.empty()) {
        if (absl::Status st = AppendJsonLines(json_path, *results); !st.ok()) {
          failure = std::string(st.message());
          exit_code = kExitRuntime;
          break;
        }
      }
      for (size_t i = 0; i < headline.size(); ++i) {
        if (t == 0) {
          rows_of_run[r].push_back(rows.size());
          rows.push_back({std::vector<std::optional<json>>(entries.size())});
        }
        rows[rows_of_run[r][i]].records[t] = std::move(headline[i]);
      }
      fmt::print("# run {}/{}: {}: {} done ({:.1f} s)\n", number + 1, total, e.label, what,
                 absl::ToDoubleSeconds(absl::Now() - start));
      std::fflush(stdout);
    }
  }
  if (!rows.empty()) PrintComparison(stdout, entries, rows);
  if (failure.empty() && !json_path.empty()) {
    std::vector<json> records;
    for (const auto& row : rows) records.push_back(ComparisonRecord(entries, row, command));
    if (absl::Status st = AppendJsonLines(json_path, records); !st.ok()) {
      failure = std::string(st.message());
      exit_code = kExitRuntime;
    } else {
      fmt::print("# results (per transport, then \"kind\":\"comparison\"): {}\n", json_path);
    }
  }
  std::fflush(stdout);
  if (!failure.empty()) fmt::print(stderr, "psbench: {}\n", failure);
  return exit_code;
}

}  // namespace psbench
