// The plots of the three benchmarks: against payload size, and throughput against workers
// and PS; with two series compared, their ratio too.
#include <algorithm>
#include <cctype>
#include <functional>
#include <set>

#include "absl/strings/str_cat.h"
#include "cli/report/report_internal.h"
#include "fmt/core.h"

namespace psbench::report::internal {
namespace {

std::string FileSafe(std::string s) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '-';
  }
  return s;
}

}  // namespace

Plot& PlotMaker::Add(const std::string& name, std::string title, std::string xlabel, Plot::XAxis xaxis) {
  Plot p;
  p.file = fmt::format("{:02d}-{}.svg", report_.plots.size() + 1, FileSafe(name));
  p.title = std::move(title);
  p.xlabel = std::move(xlabel);
  p.xaxis = xaxis;
  report_.plots.push_back(std::move(p));
  return report_.plots.back();
}

namespace {

// Rows of one scheme (latency, bandwidth), or of one scheme and payload (throughput).
std::vector<std::pair<const RowKey*, const ComparisonCells*>> Select(
    const Rows& rows, const std::function<bool(const RowKey&)>& keep) {
  std::vector<std::pair<const RowKey*, const ComparisonCells*>> out;
  for (const auto& [key, cells] : rows) {
    if (keep(key)) out.push_back({&key, &cells});
  }
  return out;
}

constexpr char kSizeAxis[] = "Payload size (bytes)";

// A row's payload size on a size axis: its bytes, or a trace's mean per operation.
double RowBytes(const ComparisonCells& cells) { return cells.begin()->second.records[0]->payload_bytes.value_or(0); }

}  // namespace

void SizePlots(const std::string& bench, const Rows& rows, const std::vector<std::string>& series,
               const std::vector<std::string>& schemes,
               const std::optional<std::pair<std::string, std::string>>& ab, PlotMaker& plots) {
  for (const std::string& scheme : schemes) {
    auto sel = Select(rows, [&](const RowKey& k) { return k.scheme == scheme; });
    bool latency = bench == "latency";
    if (sel.size() < 2) {
      plots.Note(fmt::format("{} of scheme {}: one payload size measured, so no plot against size (the "
                             "table has it).", latency ? "Latency" : "Bandwidth", scheme));
      continue;
    }
    Plot& plot = plots.Add(absl::StrCat(bench, "-", scheme),
                           fmt::format("{} vs payload size (scheme {})", latency ? "Latency" : "Bandwidth", scheme),
                           kSizeAxis, Plot::XAxis::kBytes);
    plot.caption = latency ? "Round-trip latency, p50 (solid) and p99 (dashed), log-log."
                           : "Bandwidth, MB/s = 10^6 bytes/s, log-log.";
    PlotPanel panel;
    panel.ylabel = latency ? "Round-trip latency (µs)" : "Bandwidth (MB/s)";
    panel.ylog = true;
    for (const std::string& s : series) {
      for (const Figure* m : latency ? std::vector<const Figure*>{&FigureOf(bench, "p50_us"), &FigureOf(bench, "p99_us")}
                                     : std::vector<const Figure*>{&FigureOf(bench, "mb_per_s")}) {
        PlotLine line{latency ? absl::StrCat(s, " ", m->name) : s, s, m->tail ? "dashed" : "solid", {}, {}, {}};
        for (const auto& [key, cells] : sel) {
          if (auto v = CellValue(*cells, s, *m)) {
            line.x.push_back(RowBytes(*cells));
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
    for (const Figure* m : RatioFigures(bench)) {
      PlotLine line{latency ? absl::StrCat(ab->second, " / ", ab->first, " ", m->name)
                            : absl::StrCat(ab->second, " / ", ab->first),
                    ab->second, m->tail ? "dashed" : "solid", {}, {}, {}};
      for (const auto& [key, cells] : sel) {
        if (auto r = CellRatio(*cells, *ab, *m)) {
          line.x.push_back(RowBytes(*cells));
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
    bytes_text[p] = PayloadBytesText(*cells.begin()->second.records[0]);
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
      if (xs.size() < 2) {
        if (by_workers && ps.size() < 2) {
          plots.Note(fmt::format("Throughput ({}): one worker count and one PS count measured, so no plot "
                                 "(the table has it); a plot needs two of either.", what));
        }
        continue;
      }
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
      for (const Figure& m : FindBenchmarkKind("throughput")->figures) {
        PlotPanel panel;
        panel.ylabel = m.key == std::string("rpc_per_s") ? "Total throughput (RPC/s)" : "Total throughput (MB/s)";
        for (const std::string& s : series) {
          for (int n : lines) {
            PlotLine line{fmt::format("{}, {}", s, line_name(n)), s, "solid", {}, {}, line_name(n)};
            for (const auto& [key, cells] : sel) {
              if (line_of(*key) != n) continue;
              if (auto v = CellValue(*cells, s, m)) {
                line.x.push_back(x_of(*key));
                line.y.push_back(*v);
              }
            }
            // Sort by x: rows are ordered by PS, then workers.
            std::vector<size_t> order(line.x.size());
            for (size_t i = 0; i < order.size(); ++i) order[i] = i;
            std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return line.x[a] < line.x[b]; });
            PlotLine sorted{line.label, line.series, line.style, {}, {}, line.variant};
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
        PlotLine line{line_name(n), ab->second, "solid", {}, {}, line_name(n)};
        std::vector<std::pair<double, double>> xy;
        for (const auto& [key, cells] : sel) {
          if (line_of(*key) != n) continue;
          if (auto r = CellRatio(*cells, *ab, *RatioFigures("throughput")[0])) xy.push_back({double(x_of(*key)), *r});
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

}  // namespace psbench::report::internal
