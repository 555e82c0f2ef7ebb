#include "bench/comparison.h"

#include <algorithm>
#include <cctype>

#include "bench/load_report.h"
#include "bench/stats.h"
#include "fmt/core.h"

namespace psbench {
namespace {

std::string Capitalized(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

const ComparisonCell* Find(const ComparisonCells& cells, const std::string& series) {
  auto it = cells.find(series);
  return it == cells.end() ? nullptr : &it->second;
}

}  // namespace

std::optional<std::vector<double>> ComparisonCell::Values(const Figure& f) const {
  std::vector<double> values;
  for (const Record* r : records) {
    std::optional<double> v = FigureValue(*r, f);
    if (!v) return std::nullopt;  // a tail figure one record cannot give: not a median of the rest
    values.push_back(*v);
  }
  if (values.empty()) return std::nullopt;
  return values;
}

std::optional<double> ComparisonCell::Value(const Figure& f) const {
  std::optional<std::vector<double>> values = Values(f);
  if (!values) return std::nullopt;
  return Median(*std::move(values));
}

std::optional<double> ComparisonCell::Spread(const Figure& f) const {
  std::optional<std::vector<double>> values = Values(f);
  if (!values || values->size() < 2) return std::nullopt;
  const auto [low, high] = std::minmax_element(values->begin(), values->end());
  if (*low <= 0) return std::nullopt;
  return *high / *low;
}

double KeyBytes(const Record& r) { return r.payload_bytes_exact ? r.payload_bytes.value_or(0) : 0; }

void Comparison::Add(const std::string& series, const Record& r) {
  const std::string scheme = r.scheme.value_or("?");
  auto at = std::find(schemes.begin(), schemes.end(), scheme);
  if (at == schemes.end()) at = schemes.insert(schemes.end(), scheme);
  const bool tp = std::string(kind->name) == "throughput";
  ComparisonKey key;
  key.scheme_order = static_cast<int>(at - schemes.begin());
  key.scheme = scheme;
  key.bytes = KeyBytes(r);
  key.payload = r.payload_summary.value_or("");
  key.ps = tp ? static_cast<int>(r.ps.value_or(1)) : 1;
  key.workers = tp ? static_cast<int>(r.workers.value_or(1)) : 1;
  if (LoadPointOf(r)) {
    key.load = JsonTextAt(LoadOf(r), "schedule");
    key.load_rate = JsonNumberAt(LoadOf(r), "rate_per_s");
    if (key.load.empty()) key.load = "open loop";
  }
  ComparisonCell& cell = rows[key][series];
  cell.records.push_back(&r);
  repeated |= cell.records.size() > 1;
}

std::vector<std::string> Comparison::SeriesIn(const std::vector<std::string>& order) const {
  std::vector<std::string> out;
  for (const std::string& s : order) {
    for (const auto& [key, cells] : rows) {
      if (cells.contains(s)) {
        out.push_back(s);
        break;
      }
    }
  }
  return out;
}

std::optional<double> CellRatio(const ComparisonCells& cells, const std::pair<std::string, std::string>& ab,
                                const Figure& f) {
  const ComparisonCell* a = Find(cells, ab.first);
  const ComparisonCell* b = Find(cells, ab.second);
  if (a == nullptr || b == nullptr) return std::nullopt;
  std::optional<double> va = a->Value(f), vb = b->Value(f);
  if (!va || !vb || *va == 0) return std::nullopt;
  return *vb / *va;
}

std::string RatioText(double ratio) { return fmt::format("{:.2f}x", ratio); }

Table ComparisonTable(const Comparison& c, const std::vector<std::string>& series,
                      const std::vector<std::pair<std::string, std::string>>& ratios,
                      const std::vector<std::string>& notes) {
  const BenchmarkKind& kind = *c.kind;
  const bool tp = std::string(kind.name) == "throughput";
  Table t;
  t.id = kind.name;
  t.title = Capitalized(kind.name);
  t.notes.push_back(Capitalized(kind.what) + ".");
  t.notes.insert(t.notes.end(), notes.begin(), notes.end());
  std::vector<const Figure*> compared;
  bool tail = false;
  for (const Figure& f : kind.figures) {
    if (f.compared) compared.push_back(&f);
    tail |= f.tail;
  }
  if (!ratios.empty()) {
    t.notes.push_back(fmt::format("B / A: B's figure divided by A's; {} 1x, B is faster.",
                                  kind.lower_is_better ? "below" : "above"));
  }
  if (tail) t.notes.push_back("p99 is shown only with at least 100 iterations (below that it is the maximum).");
  const Figure& first = kind.figures.front();
  if (c.repeated) {
    t.notes.push_back("A payload measured more than once in a series shows the median.");
    t.notes.push_back(fmt::format("spread: the largest {} over the smallest, of a series' measurements of a payload "
                                  "(1.05x: within 5 %).",
                                  first.Column()));
  }

  const bool loaded = std::any_of(c.rows.begin(), c.rows.end(), [](const auto& row) { return !row.first.load.empty(); });
  t.columns = {"scheme", "bytes"};
  if (tp) t.columns.insert(t.columns.end(), {"workers", "PS"});
  if (loaded) {
    t.columns.push_back("load");
    t.notes.push_back("load: open loop at that rate per worker (latency from each planned start); - closed loop.");
  }
  t.groups.push_back({"", t.columns.size()});
  for (const std::string& s : series) {
    for (const Figure& f : kind.figures) t.columns.push_back(f.Column());
    if (c.repeated) t.columns.push_back("spread");
    t.groups.push_back({s, kind.figures.size() + (c.repeated ? 1 : 0)});
  }
  for (const auto& [a, b] : ratios) {
    for (const Figure* f : compared) t.columns.push_back(f->name);
    t.groups.push_back({b + " / " + a, compared.size()});
  }
  for (const auto& [key, cells] : c.rows) {
    const Record& any = *cells.begin()->second.records[0];
    std::vector<std::string> row = {key.scheme, PayloadBytesText(any)};
    if (tp) {
      row.push_back(std::to_string(key.workers));
      row.push_back(std::to_string(key.ps));
    }
    if (loaded) row.push_back(key.load.empty() ? "-" : key.load);
    for (const std::string& s : series) {
      const ComparisonCell* cell = Find(cells, s);
      for (const Figure& f : kind.figures) {
        std::optional<double> v = cell ? cell->Value(f) : std::nullopt;
        row.push_back(v ? fmt::format("{:.{}f}", *v, f.decimals) : "-");
      }
      if (c.repeated) {
        std::optional<double> spread = cell ? cell->Spread(first) : std::nullopt;
        row.push_back(spread ? RatioText(*spread) : "-");
      }
    }
    for (const auto& ab : ratios) {
      for (const Figure* f : compared) {
        std::optional<double> r = CellRatio(cells, ab, *f);
        row.push_back(r ? RatioText(*r) : "-");
      }
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace psbench
