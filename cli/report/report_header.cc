// The report's header: what was measured, where, with what, and when.
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/report/report_internal.h"
#include "fmt/core.h"

namespace psbench::report::internal {

void BuildHeader(const std::vector<Input>& records, const std::vector<const Record*>& measured,
                 const std::map<std::string, int>& kinds, const ReportOptions& options,
                 Report& report) {
  auto& h = report.header;
  std::vector<std::string> kind_text;
  for (const auto& [kind, n] : kinds) kind_text.push_back(absl::StrCat(n, " ", kind));
  h.push_back({"Input", absl::StrCat(absl::StrJoin(options.inputs, ", "), ": ", records.size(),
                                     " records (", absl::StrJoin(kind_text, ", "), ")")});
  std::vector<std::string> series_text;
  std::map<std::string, std::string> described;
  for (const Input& in : records) {
    const Record& r = in.record;
    std::string key = r.Series();
    if (!r.transport || r.transport->empty() || described.contains(key)) continue;
    const std::string full = r.mode ? *r.transport + "/" + *r.mode : *r.transport;  // no mode: no wire modes
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
  for (const Input& in : records) {
    const Record& r = in.record;
    std::string host = r.EnvironmentText("host");
    if (!host.empty()) {
      if (!host_text.contains(host)) {
        host_order.push_back(host);
        host_text[host] = fmt::format("{}, {}, {:.0f} CPUs", r.EnvironmentText("kernel"),
                                      r.EnvironmentText("cpu_model"), r.EnvironmentNumber("online_cpus").value_or(0));
      }
      roles[host].insert("worker");
    }
    for (const std::string& ph : r.PsHosts()) {
      if (ph.empty()) continue;
      if (!roles.contains(ph) && !host_text.contains(ph)) host_order.push_back(ph);
      roles[ph].insert("PS");
    }
    AddUnique(versions, r.VersionsText());
    if (r.seed) AddUnique(seeds, std::to_string(*r.seed));
    AddUnique(times, r.timestamp.value_or(""));
  }
  for (const Record* rec : measured) {
    const Record& r = *rec;
    if (auto tls = r.Tls()) {
      const std::string t = *tls ? "on" : "off";
      if (!tls_series.contains(t)) tls_order.push_back(t);
      AddUnique(tls_series[t], r.Series());
    }
    AddUnique(measurement, absl::StrCat(r.Kind(), ": ", MeasurementText(r)));
    std::vector<std::string> ps_list;  // one entry per distinct affinity
    for (const std::string& a : r.PsCpuAffinity()) {
      if (a != "?") AddUnique(ps_list, a);
    }
    std::string ps_cpus = absl::StrJoin(ps_list, " / ");
    std::string worker_cpus = r.WorkerCpuAffinity();
    if (worker_cpus != "?" || !ps_cpus.empty()) {
      AddUnique(placement, fmt::format("worker CPUs {}, PS CPUs {}", worker_cpus, ps_cpus.empty() ? "?" : ps_cpus));
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
