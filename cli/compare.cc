#include "cli/compare.h"

#include <algorithm>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/cli.h"
#include "bench/comparison.h"
#include "bench/figures.h"
#include "bench/hdr_text.h"
#include "bench/load_report.h"
#include "bench/report.h"
#include "bench/run_status.h"
#include "cli/launch/launch.h"
#include "fmt/core.h"

namespace psbench {
namespace {

using nlohmann::json;

// The labels of the entries, in order.
std::vector<std::string> Labels(const std::vector<CompareEntry>& entries) {
  std::vector<std::string> labels;
  for (const auto& e : entries) labels.push_back(e.label);
  return labels;
}

// One benchmark's comparison over the entries' headline records (per entry, in run order).
Comparison MakeComparison(const BenchmarkKind& kind, const std::vector<CompareEntry>& entries,
                          const std::vector<std::vector<Record>>& headlines) {
  Comparison c(kind);
  for (size_t t = 0; t < entries.size(); ++t) {
    for (const Record& r : headlines[t]) {
      if (KindOf(r) == &kind) c.Add(entries[t].label, r);
    }
  }
  return c;
}

// A row's record of the first entry that has one (the baseline's, unless its run failed).
const Record& FirstRecord(const std::vector<CompareEntry>& entries, const ComparisonCells& cells) {
  for (const CompareEntry& e : entries) {
    if (auto it = cells.find(e.label); it != cells.end()) return *it->second.records[0];
  }
  return *cells.begin()->second.records[0];  // not reached: a row has a record of some entry
}

// How the first entry's records of a benchmark measured, in words.
std::string MeasurementNote(const std::vector<CompareEntry>& entries, const Comparison& c) {
  const Record& r = FirstRecord(entries, c.rows.begin()->second);
  return "Measured: " + absl::StrJoin(MeasurementParts(r), ", ") + ", tls " +
         (r.Tls().value_or(false) ? "on" : "off") + ".";
}

}  // namespace

void MarkRepetition(std::vector<Record>& records, int index, int of) {
  if (of <= 1) return;
  for (Record& r : records) r.extra["repetition"] = {{"index", index}, {"of", of}};
}

std::string RepetitionSuffix(int index, int of) {
  return of <= 1 ? std::string() : absl::StrCat(" (", RepetitionName(index, of), ")");
}

void PrintComparison(std::FILE* out, const std::vector<CompareEntry>& entries,
                     const std::vector<std::vector<Record>>& headlines, int repetitions, bool stopped) {
  const std::vector<std::string> labels = Labels(entries);
  // The mode is said once when the labels do not carry it, and only where a transport has one.
  const bool any_mode = std::any_of(entries.begin(), entries.end(),
                                    [](const CompareEntry& e) { return TransportHonoursMode(e.transport); });
  const bool carried = std::any_of(entries.begin(), entries.end(), [](const CompareEntry& e) {
    return TransportHonoursMode(e.transport) && e.label == TransportWithMode(e.transport, e.mode);
  });
  const bool one_mode = any_mode && !carried;
  const std::string partial = stopped ? " | stopped at a failure: of the runs that completed" : "";
  const std::string mode = one_mode ? absl::StrCat(" | mode ", std::string(WireModeName(entries[0].mode))) : "";
  if (entries.size() == 1) {
    fmt::print(out, "\n# psbench repetitions: {}{} | {} runs of each, fresh processes for each{}\n", labels[0],
               mode, repetitions, partial);
  } else {
    fmt::print(out, "\n# psbench comparison: {} (baseline = {}){}{}{}\n", absl::StrJoin(labels, " | "), labels[0],
               mode,
               repetitions > 1 ? absl::StrCat(" | ", repetitions, " repetitions, the entries alternating")
                               : std::string(),
               partial);
  }
  std::vector<std::pair<std::string, std::string>> ratios;
  for (size_t t = 1; t < entries.size(); ++t) ratios.push_back({labels[0], labels[t]});
  for (const BenchmarkKind& kind : BenchmarkKinds()) {
    const Comparison c = MakeComparison(kind, entries, headlines);
    if (c.rows.empty()) continue;
    fmt::print(out, "\n{}", RenderText(ComparisonTable(c, labels, ratios, {MeasurementNote(entries, c)})));
  }
  std::fflush(out);
}

// The machine-readable rows: per payload, the figures of every entry and their ratios to
// the first.
std::vector<Record> ComparisonRecords(const std::vector<CompareEntry>& entries,
                                      const std::vector<std::vector<Record>>& headlines,
                                      const std::vector<std::string>& command) {
  json transports = json::array();
  for (const auto& e : entries) {
    json entry = {{"label", e.label}, {"transport", e.transport}};
    if (TransportHonoursMode(e.transport)) entry["mode"] = std::string(WireModeName(e.mode));
    transports.push_back(entry);
  }
  const std::string timestamp = absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone());
  std::vector<Record> out;
  for (const BenchmarkKind& kind : BenchmarkKinds()) {
    const Comparison c = MakeComparison(kind, entries, headlines);
    for (const auto& [key, cells] : c.rows) {
      const Record& first = FirstRecord(entries, cells);
      Record r;
      r.kind = "comparison";
      r.benchmark = kind.name;
      r.scheme = first.scheme;
      r.payload_summary = first.payload_summary;
      r.payload_bytes = first.payload_bytes;
      r.payload_bytes_exact = first.payload_bytes_exact;
      r.scope = first.scope;
      r.workers = first.workers;
      r.ps = first.ps;
      r.seed = first.seed;
      r.validate = first.validate;
      r.tls = first.Tls().value_or(false);
      r.command = command;
      r.timestamp = timestamp;
      if (!key.load.empty()) r.extra["load"] = {{"schedule", key.load}, {"rate_per_s", key.load_rate}};
      json values = json::object(), ratios = json::object(), spreads = json::object(), iterations = json::array(),
           measurements = json::array();
      for (const Figure& f : kind.figures) {
        json v = json::array(), q = json::array(), w = json::array();
        auto or_null = [](std::optional<double> x) { return x ? json(*x) : json(nullptr); };
        for (const CompareEntry& e : entries) {
          auto cell = cells.find(e.label);
          const bool has = cell != cells.end();
          v.push_back(or_null(has ? cell->second.Value(f) : std::nullopt));
          q.push_back(or_null(CellRatio(cells, {entries[0].label, e.label}, f)));
          w.push_back(or_null(has ? cell->second.Spread(f) : std::nullopt));
        }
        values[f.key] = v;
        ratios[f.key] = q;
        if (c.repeated) spreads[f.key] = w;
      }
      for (const CompareEntry& e : entries) {
        auto cell = cells.find(e.label);
        iterations.push_back(cell == cells.end() ? json(nullptr)
                                                 : json(cell->second.records[0]->iterations.value_or(0)));
        measurements.push_back(cell == cells.end() ? 0 : cell->second.records.size());
      }
      if (auto b = first.extra.find("buffers"); b != first.extra.end()) r.extra["buffers"] = *b;
      r.extra["transports"] = transports;
      if (entries.size() > 1) {  // one series (repetitions of one transport) has nothing to divide by
        r.extra["baseline"] = entries[0].label;
        r.extra["ratio"] = "value / baseline value (ratios[m][i] = values[m][i] / values[m][0])";
        r.extra["ratios"] = ratios;
      }
      r.extra["better"] = kind.lower_is_better ? "lower" : "higher";
      r.extra["values"] = values;
      r.extra["iterations"] = iterations;
      // A payload measured more than once: values are medians, and each figure's spread is
      // the largest measurement over the smallest.
      r.extra["measurements"] = measurements;
      if (c.repeated) {
        r.extra["spread"] = spreads;
        r.extra["value"] = "median of the measurements; spread = largest / smallest";
      }
      out.push_back(std::move(r));
    }
  }
  return out;
}

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

// Runs every scenario under every entry (fresh processes for each run), scenario by
// scenario, the entries alternating within each repetition; then prints the comparison and
// appends its records. Stops at the first failed run: prints what completed, names the entry
// on stderr and returns 1 (128 + the signal when interrupted).
int RunComparison(const std::vector<CompareEntry>& entries,
                  const std::vector<std::pair<Scenario, size_t>>& runs, int repetitions, const RunOne& run_one,
                  const std::string& json_path, const std::string& hdr_out, const std::vector<std::string>& command) {
  // Per entry, the headline records of its runs in run order.
  std::vector<std::vector<Record>> headlines(entries.size());
  const size_t total = entries.size() * runs.size() * static_cast<size_t>(repetitions);
  std::string failure;
  int exit_code = 0;
  size_t number = 0;
  for (size_t r = 0; r < runs.size() && failure.empty(); ++r) {
    size_t rows_of_run = 0;  // the first entry's headline count of this scenario
    for (int rep = 0; rep < repetitions && failure.empty(); ++rep) {
      for (size_t t = 0; t < entries.size(); ++t, ++number) {
        const CompareEntry& e = entries[t];
        Scenario s = runs[r].first;
        s.transport = e.transport;
        s.mode = e.mode;
        std::string what = absl::StrCat(std::string(BenchmarkName(s.benchmark)), " ", SchemeLabel(s));
        absl::Time start = absl::Now();
        RunStatus::Get().SetRun(static_cast<int>(number) + 1, static_cast<int>(total));
        auto results = run_one(s, runs[r].second, static_cast<int>(number));
        std::vector<Record> headline;
        if (results.ok()) {
          MarkRepetition(*results, rep + 1, repetitions);
          for (const Record& rec : *results) {
            if (IsHeadline(rec)) headline.push_back(rec);
          }
          if (t == 0 && rep == 0) rows_of_run = headline.size();
          if (headline.size() != rows_of_run) {
            results = absl::DataLossError(absl::StrCat(headline.size(), " results where the scenario's first run, ",
                                                       entries[0].label, repetitions > 1 ? "'s repetition 1," : ",",
                                                       " had ", rows_of_run));
          }
        }
        if (!results.ok()) {
          failure = absl::StrCat("transport ", e.label, ": ", what, RepetitionSuffix(rep + 1, repetitions), ": ",
                                 std::string(results.status().message()));
          exit_code = FailedRunExitCode(results.status());
          break;
        }
        if (!json_path.empty()) {
          if (absl::Status st = AppendJsonLines(json_path, *results); !st.ok()) {
            failure = std::string(st.message());
            exit_code = kExitRuntime;
            break;
          }
        }
        headlines[t].insert(headlines[t].end(), headline.begin(), headline.end());
        fmt::print("# run {}/{}: {}: {}{} done ({:.1f} s)\n", number + 1, total, e.label, what,
                   RepetitionSuffix(rep + 1, repetitions), absl::ToDoubleSeconds(absl::Now() - start));
        std::fflush(stdout);
      }
    }
  }
  bool any = false;
  for (const auto& h : headlines) any |= !h.empty();
  if (any) PrintComparison(stdout, entries, headlines, repetitions, !failure.empty());
  std::vector<Record> all;
  for (const auto& h : headlines) all.insert(all.end(), h.begin(), h.end());
  PrintOpenLoop(stdout, all);
  if (int st = WriteHdrOrWarn(hdr_out, all); st != 0 && exit_code == 0) exit_code = st;
  if (failure.empty() && !json_path.empty()) {
    if (absl::Status st = AppendJsonLines(json_path, ComparisonRecords(entries, headlines, command)); !st.ok()) {
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
