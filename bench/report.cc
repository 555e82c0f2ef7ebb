#include "bench/report.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/cli.h"
#include "bench/sysinfo.h"
#include "fmt/core.h"
#include "payloads/size.h"

namespace psbench {
namespace {

using nlohmann::json;

json LatencyJson(const Histogram& h) {
  auto us = [](double ns) { return ns / 1e3; };
  return {{"count", h.count()},
          {"min", us(static_cast<double>(h.min()))},
          {"p50", us(h.Percentile(0.50))},
          {"p90", us(h.Percentile(0.90))},
          {"p99", us(h.Percentile(0.99))},
          {"p999", us(h.Percentile(0.999))},
          {"max", us(static_cast<double>(h.max()))},
          {"mean", us(h.mean())},
          {"stdev", us(h.stdev())}};
}

json CpuJson(const CpuTimes& c, double seconds) {
  return {{"user_s", c.user_s},
          {"system_s", c.system_s},
          {"utilization", seconds > 0 ? c.total() / seconds : 0.0}};
}

std::string Pct(const json& cpu) {
  return fmt::format("{:.0f}%", 100.0 * cpu.value("utilization", 0.0));
}

}  // namespace

json MakeRecord(const Scenario& s, const PayloadPlan& plan, const Measurement& m) {
  json buffers = json::array();
  json names = json::array();
  bool named = false;
  for (size_t p = 0; p < plan.payloads.size(); ++p) {
    json sizes = json::array();
    json ns = json::array();
    for (const auto& b : plan.payloads[p]) {
      sizes.push_back(b.bytes);
      ns.push_back(b.name);
      named |= !b.name.empty();
    }
    buffers.push_back(sizes);
    names.push_back(ns);
  }
  bool one = plan.payloads.size() == 1;
  json r = {
      {"benchmark", BenchmarkName(s.benchmark)},
      {"transport", s.transport},
      {"mode", WireModeName(s.mode)},  // erased below where the transport has no modes
      {"tls", s.tls},
      {"scheme", s.sweep ? "sweep" : SchemeName(s.payload.scheme)},
      {"buffers", one ? buffers[0] : buffers},
      {"payload_summary", plan.Summary()},
      // Exact for one payload; the mean per operation for a trace of several.
      {"payload_bytes", one ? json(plan.Bytes(0))
                            : json(m.ops ? static_cast<double>(m.bytes) / m.ops : 0.0)},
      {"payloads", plan.payloads.size()},
      {"iterations", m.ops},
      {"seconds", m.seconds},
      {"bytes", m.bytes},
      {"workers", s.num_workers},
      {"ps", m.ps_info.size()},
      {"scope", "worker"},
      {"worker_index", s.worker_index},
      {"validate", s.validate},
      {"seed", s.payload.seed},
  };
  if (named) r["buffer_names"] = one ? names[0] : names;
  if (!TransportHonoursMode(s.transport)) r.erase("mode");
  json lat = LatencyJson(m.latency);
  double rate = m.seconds > 0 ? static_cast<double>(m.ops) / m.seconds : 0;
  double mbps = m.seconds > 0 ? static_cast<double>(m.bytes) / m.seconds / 1e6 : 0;
  switch (s.benchmark) {
    case Benchmark::kLatency:
      r["latency_us"] = lat;
      break;
    case Benchmark::kBandwidth:
      r["mb_per_s"] = mbps;
      r["msgs_per_s"] = rate;
      r["rpc_latency_us"] = lat;
      break;
    case Benchmark::kThroughput:
      r["rpc_per_s"] = rate;
      r["mb_per_s"] = mbps;
      r["rpc_latency_us"] = lat;
      r["rpc_per_ps"] = m.ops_per_ps;
      break;
    case Benchmark::kUpdates:  // not a payload measurement: worker/updates_worker.cc
      break;
  }
  r["start_unix_s"] = absl::ToDoubleSeconds(m.start - absl::UnixEpoch());
  r["end_unix_s"] = absl::ToDoubleSeconds(m.end - absl::UnixEpoch());
  // What each PS counted itself during the measurement (all workers): with one worker it
  // must equal this record's own count, an independent check that nothing was lost.
  // sessions_lost: workers that left that PS without a goodbye during the measurement
  // (killed, crashed, failed, cut off). A worker holds one session per PS, so the most any
  // PS lost is how many of this worker's peers were lost: this record's numbers are its own
  // and valid, but the run it belongs to lost workers.
  json ps_counted = json::array();
  uint64_t peers_lost = 0;
  for (size_t i = 0; i < m.ps_info.size(); ++i) {
    uint64_t lost = i < m.ps_sessions_lost.size() ? m.ps_sessions_lost[i] : 0;
    peers_lost = std::max(peers_lost, lost);
    ps_counted.push_back({{"address", m.ps_info[i].address},
                          {"rpcs", m.ps_rpcs[i]},
                          {"bytes", m.ps_bytes[i]},
                          {"sessions_lost", lost}});
  }
  r["ps_counted"] = ps_counted;
  r["peers_lost"] = peers_lost;
  json ps_cpu = json::array();
  json ps_place = json::array();
  for (size_t i = 0; i < m.ps_info.size(); ++i) {
    const ServerInfo& info = m.ps_info[i];
    json c = CpuJson(m.ps_cpu[i], m.seconds);
    c["address"] = info.address;
    ps_cpu.push_back(c);
    ps_place.push_back({{"address", info.address},
                        {"host", info.host},
                        {"pid", info.pid},
                        {"cpu_affinity", info.cpu_affinity},
                        {"last_cpu", info.last_cpu},
                        {"version", info.version},
                        {"grpc_version", info.grpc_version},
                        {"transport", info.transport},
                        {"data_plane", info.data_plane}});
  }
  r["cpu"] = {{"worker", CpuJson(m.worker_cpu, m.seconds)}, {"ps", ps_cpu}};
  r["placement"] = {{"worker",
                     {{"host", HostName()},
                      {"pid", getpid()},
                      {"cpu_affinity", CurrentAffinity()},
                      {"last_cpu", LastCpu()}}},
                    {"ps", ps_place}};
  r["config"] = ScenarioToJson(s);
  r["environment"] = Environment();
  r["timestamp"] = absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone());
  return r;
}

json AggregateThroughput(const std::vector<json>& workers) {
  json total = workers.at(0);
  double first_start = 1e300, last_end = 0, rate_sum = 0, worst_p99 = 0;
  uint64_t iterations = 0, bytes = 0;
  json per_worker = json::array();
  json worker_cpu = json::array();
  // Operations each PS served, summed over the workers (not worker 0's own counts).
  std::vector<uint64_t> rpc_per_ps;
  for (const json& w : workers) {
    if (auto it = w.find("rpc_per_ps"); it != w.end() && it->is_array()) {
      rpc_per_ps.resize(std::max(rpc_per_ps.size(), it->size()), 0);
      for (size_t i = 0; i < it->size(); ++i) rpc_per_ps[i] += (*it)[i].get<uint64_t>();
    }
    iterations += w.value("iterations", uint64_t{0});
    bytes += w.value("bytes", uint64_t{0});
    first_start = std::min(first_start, w.value("start_unix_s", 0.0));
    last_end = std::max(last_end, w.value("end_unix_s", 0.0));
    rate_sum += w.value("rpc_per_s", 0.0);
    worst_p99 = std::max(worst_p99, w["rpc_latency_us"].value("p99", 0.0));
    per_worker.push_back({{"worker_index", w["worker_index"]},
                          {"rpc_per_s", w["rpc_per_s"]},
                          {"mb_per_s", w["mb_per_s"]}});
    worker_cpu.push_back(w["cpu"]["worker"]);
  }
  // Totals over the union of the workers' windows: a worker that finishes early does not
  // inflate the total with the faster run the others get after it.
  double span = last_end - first_start;
  total["scope"] = "total";
  total.erase("worker_index");
  total.erase("rpc_latency_us");
  total["iterations"] = iterations;
  total["bytes"] = bytes;
  total["seconds"] = span;
  total["start_unix_s"] = first_start;
  total["end_unix_s"] = last_end;
  total["rpc_per_s"] = span > 0 ? static_cast<double>(iterations) / span : 0.0;
  total["mb_per_s"] = span > 0 ? static_cast<double>(bytes) / span / 1e6 : 0.0;
  total["sum_of_worker_rpc_per_s"] = rate_sum;
  total["rpc_per_ps"] = rpc_per_ps;
  total["worst_worker_p99_us"] = worst_p99;
  total["per_worker"] = per_worker;
  total["cpu"]["workers"] = worker_cpu;
  total["cpu"].erase("worker");
  return total;
}

void CheckJsonPathOrDie(absl::string_view program, const std::string& path) {
  if (path.empty()) return;
  if (absl::Status s = AppendJsonLines(path, {}); !s.ok()) {
    Die(program, s, s.code() == absl::StatusCode::kUnavailable ? kExitRuntime : kExitUsage);
  }
}

absl::Status AppendJsonLines(const std::string& path, const std::vector<json>& records) {
  if (path == "-") {  // remote launchers gather records from each process's stdout
    for (const json& r : records) std::fputs((r.dump() + '\n').c_str(), stdout);
    if (std::fflush(stdout) != 0) return absl::InternalError("--json=-: write to stdout failed");
    return absl::OkStatus();
  }
  // A path that cannot name a file here is bad input; a disk that is read-only, full or
  // failing is a runtime failure (the caller picks its exit status from the code).
  auto failed = [&path, &records](const char* what, int err) {
    std::string msg = absl::StrCat("--json=", path, ": ", what, ": ", std::strerror(err));
    if (!records.empty()) {
      absl::StrAppend(&msg, " (", records.size(), records.size() == 1 ? " record" : " records",
                      " not saved)");
    }
    bool disk = err == EROFS || err == ENOSPC || err == EDQUOT || err == EIO || err == EFBIG ||
                err == ETXTBSY;
    return disk ? absl::UnavailableError(msg) : absl::InvalidArgumentError(msg);
  };
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return failed("cannot open for writing", errno);
  std::string text;
  for (const json& r : records) text += r.dump() + '\n';
  // One write per record set; a short write is retried, an error reported with its errno.
  for (size_t at = 0; at < text.size();) {
    ssize_t n = ::write(fd, text.data() + at, text.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : ENOSPC;
      ::close(fd);
      return failed("write failed", err);
    }
    at += static_cast<size_t>(n);
  }
  // Written is not yet stored: a regular file is synced, so that a failing disk says so now.
  struct stat st {};
  if (!records.empty() && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::fsync(fd) != 0 &&
      errno != EINVAL) {
    int err = errno;
    ::close(fd);
    return failed("write failed", err);
  }
  if (::close(fd) != 0 && errno != EINTR) return failed("write failed", errno);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<json>> ReadJsonLines(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::vector<json> records;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json r = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (r.is_discarded()) return absl::DataLossError(absl::StrCat(path, ": malformed line"));
    records.push_back(std::move(r));
  }
  return records;
}

void TablePrinter::Print(const json& r) {
  const json& cfg = r["config"];
  std::string bench = r["benchmark"];
  std::string timing =
      cfg.value("iterations", 0) > 0
          ? fmt::format("{} iterations", cfg.value("iterations", 0))
          : fmt::format("{:g}s", cfg.value("duration_s", 0.0));
  std::string warm = cfg.value("warmup_iterations", -1) >= 0
                         ? fmt::format("{} iterations", cfg.value("warmup_iterations", 0))
                         : fmt::format("{:g}s", cfg.value("warmup_s", 0.0));
  std::string payload = r["scheme"] == "sweep" ? "one buffer per size"
                                                : r["payload_summary"].get<std::string>();
  std::string header = fmt::format(
      "# psbench {} | transport {}{} | scheme {} | payload {}\n"
      "# seed {} | warm-up {} | measure {} | validate {} | tls {}",
      bench, r["transport"].get<std::string>(),
      r.contains("mode") ? " | mode " + r["mode"].get<std::string>() : std::string(),
      r["scheme"].get<std::string>(), payload, r["seed"].get<uint64_t>(), warm, timing,
      r["validate"].get<bool>() ? "on" : "off", r.value("tls", false) ? "on" : "off");
  if (bench == "bandwidth") header += fmt::format(" | window {}", cfg.value("window", 0));
  if (bench == "throughput") {
    header += fmt::format(" | {} workers x {} PS, {} outstanding per PS", r["workers"].get<int>(),
                          r["ps"].get<int>(), cfg.value("outstanding", 0));
  }
  // Where the processes were allowed to run (the JSON also has the CPU each last ran on).
  std::string ps_cpus;
  for (const json& p : r["placement"]["ps"]) {
    ps_cpus += (ps_cpus.empty() ? "" : ",") + p.value("cpu_affinity", std::string("?"));
  }
  header += fmt::format("\n# placement: worker CPUs {} | PS CPUs {} | busy-poll {}",
                        r["placement"]["worker"].value("cpu_affinity", std::string("?")),
                        ps_cpus.empty() ? "?" : ps_cpus,
                        cfg.value("busy_poll", false) ? "on" : "off");
  if (header != last_header_) {
    if (!last_header_.empty()) fmt::print(out_, "\n");
    fmt::print(out_, "{}\n", header);
    if (bench == "latency") {
      fmt::print(out_, "{:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}  [usec RTT] {:>6} {:>6}\n",
                 "#bytes", "#iters", "min", "p50", "p90", "p99", "p99.9", "max", "mean", "stdev",
                 "wCPU", "psCPU");
    } else if (bench == "bandwidth") {
      fmt::print(out_, "{:>12} {:>9} {:>12} {:>12} {:>12}  {:>6} {:>6}\n", "#bytes", "#iters",
                 "MB/s", "msgs/s", "p50 usec", "wCPU", "psCPU");
    } else {
      fmt::print(out_, "{:>8} {:>12} {:>9} {:>12} {:>12} {:>12}  {:>6} {:>6}\n", "worker", "#bytes",
                 "#iters", "RPC/s", "MB/s", "p99 usec", "wCPU", "psCPU");
    }
    last_header_ = header;
  }
  std::string bytes = r["payload_bytes"].is_number_integer()
                          ? std::to_string(r["payload_bytes"].get<uint64_t>())
                          : fmt::format("~{:.0f}", r["payload_bytes"].get<double>());
  uint64_t iters = r["iterations"];
  auto ps_cpu = [&r] {
    const json& ps = r["cpu"]["ps"];
    return ps.empty() ? std::string("-") : Pct(ps[0]);
  };
  // A tail percentile from fewer samples than it needs is just the maximum: show "-".
  auto tail = [iters](const json& l, const char* key, uint64_t needs) {
    return iters >= needs ? fmt::format("{:.2f}", l[key].get<double>()) : std::string("-");
  };
  auto all_ps_cpu = [&r] {
    const json& ps = r["cpu"]["ps"];
    double sum = 0;
    for (const json& p : ps) sum += p.value("utilization", 0.0);
    return ps.empty() ? std::string("-") : fmt::format("{:.0f}%", 100.0 * sum / ps.size());
  };
  if (bench == "latency") {
    const json& l = r["latency_us"];
    fmt::print(out_,
               "{:>12} {:>9} {:>9.2f} {:>9.2f} {:>9.2f} {:>9} {:>9} {:>9.2f} {:>9.2f} {:>9.2f}            {:>6} {:>6}\n",
               bytes, iters, l["min"].get<double>(), l["p50"].get<double>(),
               l["p90"].get<double>(), tail(l, "p99", 100), tail(l, "p999", 1000),
               l["max"].get<double>(), l["mean"].get<double>(), l["stdev"].get<double>(),
               Pct(r["cpu"]["worker"]), ps_cpu());
  } else if (bench == "bandwidth") {
    fmt::print(out_, "{:>12} {:>9} {:>12.2f} {:>12.1f} {:>12.2f}  {:>6} {:>6}\n", bytes, iters,
               r["mb_per_s"].get<double>(), r["msgs_per_s"].get<double>(),
               r["rpc_latency_us"]["p50"].get<double>(), Pct(r["cpu"]["worker"]), ps_cpu());
  } else if (r["scope"] == "total") {
    fmt::print(out_, "{:>8} {:>12} {:>9} {:>12.1f} {:>12.2f} {:>12.2f}  {:>6} {:>6}\n", "total",
               bytes, iters, r["rpc_per_s"].get<double>(), r["mb_per_s"].get<double>(),
               r.value("worst_worker_p99_us", 0.0), "", all_ps_cpu());
  } else {
    fmt::print(out_, "{:>8} {:>12} {:>9} {:>12.1f} {:>12.2f} {:>12}  {:>6} {:>6}\n",
               r["worker_index"].get<int>(), bytes, iters, r["rpc_per_s"].get<double>(),
               r["mb_per_s"].get<double>(), tail(r["rpc_latency_us"], "p99", 100),
               Pct(r["cpu"]["worker"]), "");
  }
  std::fflush(out_);
}

}  // namespace psbench
