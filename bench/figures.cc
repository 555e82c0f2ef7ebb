#include "bench/figures.h"

#include <algorithm>

#include "bench/load_report.h"
#include "fmt/core.h"

namespace psbench {
namespace {

// A tail percentile from fewer samples than it needs is just the maximum: "-".
std::string Tail(const Record& r, double value, uint64_t needs) {
  return r.iterations.value_or(0) >= needs ? fmt::format("{:.2f}", value) : std::string("-");
}

std::string Fixed(std::optional<double> v, int decimals) {
  return v ? fmt::format("{:.{}f}", *v, decimals) : std::string("-");
}

std::string FirstPsCpu(const Record& r) {
  std::vector<double> ps = r.PsCpu();
  return ps.empty() ? std::string("-") : CpuText(ps[0]);
}

std::vector<std::string> LatencyRow(const Record& r) {
  const LatencySummary l = r.latency_us.value_or(LatencySummary{});
  return {PayloadBytesText(r),
          std::to_string(r.iterations.value_or(0)),
          Fixed(l.min, 2),
          fmt::format("{:.2f}", l.p50),
          Fixed(l.p90, 2),
          Tail(r, l.p99, 100),
          l.p999 ? Tail(r, *l.p999, 1000) : "-",
          Fixed(l.max, 2),
          fmt::format("{:.2f}", l.mean),
          Fixed(l.stdev, 2),
          CpuText(r.WorkerCpu()),
          FirstPsCpu(r)};
}

std::vector<std::string> BandwidthRow(const Record& r) {
  return {PayloadBytesText(r),
          std::to_string(r.iterations.value_or(0)),
          Fixed(r.mb_per_s, 2),
          Fixed(r.msgs_per_s, 1),
          Fixed(r.rpc_latency_us ? std::optional<double>(r.rpc_latency_us->p50) : std::nullopt, 2),
          CpuText(r.WorkerCpu()),
          FirstPsCpu(r)};
}

// A worker's row, or the total's: the worst worker's p99 and the PS' mean CPU.
std::vector<std::string> ThroughputRow(const Record& r) {
  if (r.scope.value_or("worker") == "total") {
    std::vector<double> ps = r.PsCpu();
    double sum = 0;
    for (double u : ps) sum += u;
    return {"total",
            PayloadBytesText(r),
            std::to_string(r.iterations.value_or(0)),
            Fixed(r.rpc_per_s, 1),
            Fixed(r.mb_per_s, 2),
            Fixed(r.worst_worker_p99_us, 2),
            "",
            ps.empty() ? std::string("-") : CpuText(sum / ps.size())};
  }
  return {std::to_string(r.worker_index.value_or(0)),
          PayloadBytesText(r),
          std::to_string(r.iterations.value_or(0)),
          Fixed(r.rpc_per_s, 1),
          Fixed(r.mb_per_s, 2),
          r.rpc_latency_us ? Tail(r, r.rpc_latency_us->p99, 100) : std::string("-"),
          CpuText(r.WorkerCpu()),
          ""};
}

std::optional<double> Latency(const Record& r, double LatencySummary::*member) {
  if (!r.latency_us) return std::nullopt;
  return (*r.latency_us).*member;
}

double PerSecond(const Measurement& m, double count) { return m.seconds > 0 ? count / m.seconds : 0; }

void FillLatency(const Measurement& m, Record& r) { r.latency_us = SummarizeLatency(m.latency); }

void FillBandwidth(const Measurement& m, Record& r) {
  r.mb_per_s = PerSecond(m, static_cast<double>(m.bytes)) / 1e6;
  r.msgs_per_s = PerSecond(m, static_cast<double>(m.ops));
  r.rpc_latency_us = SummarizeLatency(m.latency);
}

void FillThroughput(const Measurement& m, Record& r) {
  r.rpc_per_s = PerSecond(m, static_cast<double>(m.ops));
  r.mb_per_s = PerSecond(m, static_cast<double>(m.bytes)) / 1e6;
  r.rpc_latency_us = SummarizeLatency(m.latency);
  r.rpc_per_ps = m.ops_per_ps;
}

}  // namespace

const std::vector<BenchmarkKind>& BenchmarkKinds() {
  static const std::vector<BenchmarkKind> kinds = {
      {"latency",
       "round trip in µs, lower is better",
       true,
       "worker",
       {{"p50_us", "p50", "µs", 2, false, true, [](const Record& r) { return Latency(r, &LatencySummary::p50); }},
        {"p99_us", "p99", "µs", 2, true, true, [](const Record& r) { return Latency(r, &LatencySummary::p99); }},
        {"mean_us", "mean", "µs", 2, false, false, [](const Record& r) { return Latency(r, &LatencySummary::mean); }}},
       "usec, round trip (RTT; perftest and OSU print half of it) | wCPU, psCPU: CPU use, 100% = one core",
       {{"#bytes", 12}, {"#iters", 9}, {"min", 9}, {"p50", 9}, {"p90", 9}, {"p99", 9}, {"p99.9", 9},
        {"max", 9}, {"mean", 9}, {"stdev", 9}, {"wCPU", 6}, {"psCPU", 6}},
       LatencyRow,
       FillLatency},
      {"bandwidth",
       "MB/s (10^6 B/s), higher is better",
       false,
       "worker",
       {{"mb_per_s", "MB/s", "", 2, false, true, [](const Record& r) { return r.mb_per_s; }}},
       "MB/s = 10^6 B/s | p50 usec: one message's time, window included | wCPU, psCPU: CPU use, 100% = one core",
       {{"#bytes", 12}, {"#iters", 9}, {"MB/s", 12}, {"msgs/s", 12}, {"p50 usec", 12}, {"wCPU", 6}, {"psCPU", 6}},
       BandwidthRow,
       FillBandwidth},
      {"throughput",
       "RPC/s and MB/s, total over the workers, higher is better",
       false,
       "total",
       // Over one payload MB/s moves with RPC/s: one ratio says it.
       {{"rpc_per_s", "RPC/s", "", 1, false, true, [](const Record& r) { return r.rpc_per_s; }},
        {"mb_per_s", "MB/s", "", 2, false, false, [](const Record& r) { return r.mb_per_s; }}},
       "a row per worker, then the total | p99 usec: one RPC's time, queueing included (total: worst worker) | "
       "wCPU, psCPU: CPU use, 100% = one core",
       {{"worker", 8}, {"#bytes", 12}, {"#iters", 9}, {"RPC/s", 12}, {"MB/s", 12}, {"p99 usec", 12},
        {"wCPU", 6}, {"psCPU", 6}},
       ThroughputRow,
       FillThroughput},
  };
  return kinds;
}

const BenchmarkKind* FindBenchmarkKind(absl::string_view name) {
  for (const BenchmarkKind& k : BenchmarkKinds()) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

const BenchmarkKind* KindOf(const Record& r) {
  return r.IsPayloadBenchmark() ? FindBenchmarkKind(r.Kind()) : nullptr;
}

std::optional<double> FigureValue(const Record& r, const Figure& f) {
  if (f.tail && r.iterations.value_or(0) < 100) return std::nullopt;
  return f.value(r);
}

bool IsHeadline(const Record& r) {
  const BenchmarkKind* kind = KindOf(r);
  return kind != nullptr && r.scope.value_or("worker") == kind->headline_scope;
}

std::vector<std::string> MeasurementParts(const Record& r) {
  const RecordSettings s = r.Settings();
  std::vector<std::string> parts = {
      s.warmup_iterations >= 0 ? fmt::format("warm-up {} iterations", s.warmup_iterations)
                               : fmt::format("warm-up {:g} s", s.warmup_s),
      s.iterations > 0 ? fmt::format("measure {} iterations", s.iterations)
                       : fmt::format("measure {:g} s", s.duration_s)};
  const std::string bench = r.Kind();
  if (bench == "bandwidth") parts.push_back(fmt::format("window {}", s.window));
  if (LoadPointOf(r)) {
    parts.push_back(fmt::format("open-loop {} load, at most {} in flight, latency from each planned start",
                                JsonTextAt(LoadOf(r), "kind"), JsonCountAt(LoadOf(r), "max_in_flight")));
  } else if (bench == "throughput") {
    parts.push_back(fmt::format("{} outstanding per PS", s.outstanding));
  }
  parts.push_back(fmt::format("validate {}", r.validate.value_or(false) ? "on" : "off"));
  parts.push_back(fmt::format("busy-poll {}", s.busy_poll ? "on" : "off"));
  // gRPC's options, where they differ from gRPC's defaults (so two tables of them differ).
  if (s.grpc_api == "callback") parts.push_back("gRPC callback API");
  if (s.grpc_tx_zerocopy > 0) parts.push_back(fmt::format("tx zero-copy from {:.0f} B", s.grpc_tx_zerocopy));
  return parts;
}

std::string PayloadBytesText(const Record& r) {
  if (!r.payload_bytes) return "-";
  return r.payload_bytes_exact ? fmt::format("{:.0f}", *r.payload_bytes)
                               : fmt::format("~{:.0f}", *r.payload_bytes);
}

std::string CpuText(std::optional<double> utilization) {
  return utilization ? fmt::format("{:.0f}%", 100.0 * *utilization) : std::string("-");
}

}  // namespace psbench
