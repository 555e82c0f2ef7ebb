// The report's header: what was measured, where, with what, and when.
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/report/report_internal.h"
#include "fmt/core.h"

namespace psbench::report::internal {
namespace {

std::string OnOff(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "on" : "off";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

}  // namespace

void BuildHeader(const std::vector<Record>& records, const std::vector<const Record*>& measured,
                 const std::map<std::string, int>& kinds, const ReportOptions& options,
                 Report& report) {
  auto& h = report.header;
  std::vector<std::string> kind_text;
  for (const auto& [kind, n] : kinds) kind_text.push_back(absl::StrCat(n, " ", kind));
  h.push_back({"Input", absl::StrCat(absl::StrJoin(options.inputs, ", "), ": ", records.size(),
                                     " records (", absl::StrJoin(kind_text, ", "), ")")});
  std::vector<std::string> series_text;
  std::map<std::string, std::string> described;
  for (const Record& rec : records) {
    std::string key = SeriesKey(rec.json);
    std::string transport = Str(rec.json, "transport"), mode = Str(rec.json, "mode");
    if (transport.empty() || described.contains(key)) continue;
    const std::string full = mode.empty() ? transport : transport + "/" + mode;  // no mode: no wire modes
    described[key] = key == full ? key : fmt::format("{} = {}", key, full);
    series_text.push_back(described[key]);
  }
  h.push_back({"Series", absl::StrJoin(series_text, "; ")});
  if (report.compare) {
    h.push_back({"Ratio", fmt::format("B/A with A = {}, B = {} (latency: below 1x = B faster; "
                                      "MB/s, RPC/s: above 1x = B faster)",
                                      report.compare->first, report.compare->second)});
  }
  // Hosts: every worker's environment, and the PS hosts from the placement.
  std::vector<std::string> hosts, versions, measurement, seeds, placement, times;
  std::vector<std::string> tls_order;  // TLS settings of the measured records, and their series
  std::map<std::string, std::vector<std::string>> tls_series;
  std::map<std::string, std::set<std::string>> roles;
  std::map<std::string, std::string> host_text;
  std::vector<std::string> host_order;
  for (const Record& rec : records) {
    const json& r = rec.json;
    const json& env = Obj(r, "environment");
    std::string host = Str(env, "host");
    if (!host.empty()) {
      if (!host_text.contains(host)) {
        host_order.push_back(host);
        host_text[host] = fmt::format("{}, {}, {:.0f} CPUs", Str(env, "kernel"), Str(env, "cpu_model"),
                                      Num(env, "online_cpus").value_or(0));
      }
      roles[host].insert("worker");
    }
    if (auto ps = Obj(r, "placement").find("ps"); ps != Obj(r, "placement").end() && ps->is_array()) {
      for (const json& p : *ps) {
        std::string ph = p.is_object() ? Str(p, "host") : "";
        if (ph.empty()) continue;
        if (!roles.contains(ph) && !host_text.contains(ph)) host_order.push_back(ph);
        roles[ph].insert("PS");
      }
    }
    const json& v = Obj(env, "versions");
    if (!v.empty()) {
      AddUnique(versions, fmt::format("psbench {}, gRPC {}, protobuf {}, {}", Str(v, "psbench"),
                                      Str(v, "grpc"), Str(v, "protobuf"), Str(v, "compiler")));
    }
    if (auto seed = Num(r, "seed")) AddUnique(seeds, fmt::format("{:.0f}", *seed));
    AddUnique(times, Str(r, "timestamp"));
  }
  for (const Record* rec : measured) {
    const json& r = rec->json;
    const json* t = r.contains("tls") ? &r["tls"] : Obj(r, "config").contains("tls") ? &r["config"]["tls"] : nullptr;
    if (t) {
      if (!tls_series.contains(OnOff(*t))) tls_order.push_back(OnOff(*t));
      AddUnique(tls_series[OnOff(*t)], SeriesKey(r));
    }
    AddUnique(measurement, absl::StrCat(Str(r, "benchmark"), ": ", MeasurementText(r)));
    const json& place = Obj(r, "placement");
    std::vector<std::string> ps_list;  // one entry per distinct affinity
    if (auto ps = place.find("ps"); ps != place.end() && ps->is_array()) {
      for (const json& p : *ps) {
        if (p.is_object()) AddUnique(ps_list, Str(p, "cpu_affinity"));
      }
    }
    std::string ps_cpus = absl::StrJoin(ps_list, " / ");
    std::string worker_cpus = Str(Obj(place, "worker"), "cpu_affinity");
    if (!worker_cpus.empty() || !ps_cpus.empty()) {
      AddUnique(placement, fmt::format("worker CPUs {}, PS CPUs {}", worker_cpus.empty() ? "?" : worker_cpus,
                                       ps_cpus.empty() ? "?" : ps_cpus));
    }
  }
  for (const std::string& host : host_order) {
    std::vector<std::string> r(roles[host].rbegin(), roles[host].rend());  // worker, PS
    auto it = host_text.find(host);
    AddUnique(hosts, fmt::format("{} ({}){}", host, absl::StrJoin(r, ", "),
                                 it == host_text.end() ? "" : ": " + it->second));
  }
  if (!hosts.empty()) h.push_back({"Hosts", absl::StrJoin(hosts, "; ")});
  if (tls_order.size() == 1) h.push_back({"TLS", tls_order[0]});
  if (tls_order.size() > 1) {
    std::vector<std::string> tls;
    for (const auto& v : tls_order) tls.push_back(fmt::format("{} ({})", v, absl::StrJoin(tls_series[v], ", ")));
    h.push_back({"TLS", absl::StrJoin(tls, "; ")});
  }
  if (!versions.empty()) h.push_back({"Versions", absl::StrJoin(versions, "; ")});
  if (!measurement.empty()) h.push_back({"Measurement", absl::StrJoin(measurement, "; ")});
  if (!placement.empty()) h.push_back({"Placement", absl::StrJoin(placement, "; ")});
  if (!seeds.empty()) h.push_back({"Seeds", absl::StrJoin(seeds, ", ")});
  if (!times.empty()) {
    std::sort(times.begin(), times.end());  // RFC 3339 UTC: text order is time order
    h.push_back({"Recorded", times.size() == 1 ? times[0] : times.front() + " to " + times.back()});
  }
}

}  // namespace psbench::report::internal
