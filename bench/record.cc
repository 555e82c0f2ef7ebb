#include "bench/record.h"

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/figures.h"
#include "bench/histogram.h"
#include "payloads/json_field.h"

namespace psbench {
namespace {

using nlohmann::json;

// --- reading and writing one field ------------------------------------------------------------
// Each typed member is a (name, member) pair in one table below: the table is the whole
// mapping between the JSON and the type, read and written by the same loops.

absl::Status WrongType(const std::string& name, const char* want) {
  return absl::InvalidArgumentError(absl::StrCat("field '", name, "' is not ", want));
}

absl::Status Parse(const std::string& name, const json& v, std::string& out) {
  if (!v.is_string()) return WrongType(name, "a string");
  out = v.get<std::string>();
  return absl::OkStatus();
}
absl::Status Parse(const std::string& name, const json& v, bool& out) {
  if (!v.is_boolean()) return WrongType(name, "true or false");
  out = v.get<bool>();
  return absl::OkStatus();
}
absl::Status Parse(const std::string& name, const json& v, int64_t& out) {
  if (!v.is_number_integer()) return WrongType(name, "an integer");
  out = v.get<int64_t>();
  return absl::OkStatus();
}
absl::Status Parse(const std::string& name, const json& v, uint64_t& out) {
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
    return WrongType(name, "a count (an integer, 0 or more)");
  }
  out = v.get<uint64_t>();
  return absl::OkStatus();
}
absl::Status Parse(const std::string& name, const json& v, double& out) {
  if (!v.is_number()) return WrongType(name, "a number");
  out = v.get<double>();
  return absl::OkStatus();
}
// A typed figure (a time, a rate, a size, a loss): never negative, which a report would print
// as it is (a -5.00 µs p50 and its ratio).
absl::Status ParseFigure(const std::string& name, const json& v, double& out) {
  if (absl::Status s = Parse(name, v, out); !s.ok()) return s;
  if (out < 0) return WrongType(name, "0 or more");
  return absl::OkStatus();
}
absl::Status Parse(const std::string& name, const json& v, std::vector<uint64_t>& out) {
  if (!v.is_array()) return WrongType(name, "a list of counts");
  out.clear();
  for (size_t i = 0; i < v.size(); ++i) {
    uint64_t n = 0;
    if (absl::Status s = Parse(absl::StrCat(name, "[", i, "]"), v[i], n); !s.ok()) return s;
    out.push_back(n);
  }
  return absl::OkStatus();
}

// Reads the members of an object: `required` must be there; `optional` and the one optional
// `count` may be.
template <typename S>
absl::Status ParseMembers(const std::string& name, const json& v,
                          std::initializer_list<std::pair<const char*, double S::*>> required,
                          std::initializer_list<std::pair<const char*, std::optional<double> S::*>> optional,
                          std::pair<const char*, std::optional<uint64_t> S::*> count, S& out) {
  if (!v.is_object()) return WrongType(name, "an object");
  for (const auto& [key, member] : required) {
    auto it = v.find(key);
    if (it == v.end()) return absl::InvalidArgumentError(absl::StrCat("field '", name, ".", key, "' is missing"));
    if (absl::Status s = ParseFigure(absl::StrCat(name, ".", key), *it, out.*member); !s.ok()) return s;
  }
  for (const auto& [key, member] : optional) {
    if (auto it = v.find(key); it != v.end()) {
      double d = 0;
      if (absl::Status s = ParseFigure(absl::StrCat(name, ".", key), *it, d); !s.ok()) return s;
      out.*member = d;
    }
  }
  if (auto it = v.find(count.first); it != v.end()) {
    uint64_t n = 0;
    if (absl::Status s = Parse(absl::StrCat(name, ".", count.first), *it, n); !s.ok()) return s;
    out.*count.second = n;
  }
  return absl::OkStatus();
}

absl::Status Parse(const std::string& name, const json& v, LatencySummary& out) {
  using L = LatencySummary;
  return ParseMembers<L>(name, v, {{"p50", &L::p50}, {"p99", &L::p99}, {"mean", &L::mean}},
                         {{"min", &L::min}, {"p90", &L::p90}, {"p999", &L::p999}, {"p9999", &L::p9999}, {"max", &L::max},
                          {"stdev", &L::stdev}},
                         {"count", &L::count}, out);
}
json ToJson(const LatencySummary& l) {
  json j = {{"p50", l.p50}, {"p99", l.p99}, {"mean", l.mean}};
  if (l.count) j["count"] = *l.count;
  for (const auto& [key, v] : {std::pair{"min", l.min}, {"p90", l.p90}, {"p999", l.p999}, {"p9999", l.p9999},
                               {"max", l.max}, {"stdev", l.stdev}}) {
    if (v) j[key] = *v;
  }
  return j;
}

absl::Status Parse(const std::string& name, const json& v, StepStats& out) {
  using S = StepStats;
  return ParseMembers<S>(name, v, {{"mean_s", &S::mean_s}},
                         {{"median_s", &S::median_s}, {"min_s", &S::min_s}, {"max_s", &S::max_s},
                          {"images_per_s", &S::images_per_s}, {"gflops", &S::gflops},
                          {"fraction_of_peak", &S::fraction_of_peak}},
                         {"iterations", &S::iterations}, out);
}
json ToJson(const StepStats& s) {
  json j = {{"mean_s", s.mean_s}};
  for (const auto& [key, v] : {std::pair{"median_s", s.median_s}, {"min_s", s.min_s}, {"max_s", s.max_s},
                               {"images_per_s", s.images_per_s}, {"gflops", s.gflops},
                               {"fraction_of_peak", s.fraction_of_peak}}) {
    if (v) j[key] = *v;
  }
  if (s.iterations) j["iterations"] = *s.iterations;
  return j;
}

template <typename T>
json ToJson(const T& v) {
  return json(v);
}

// --- the table of typed fields ------------------------------------------------------------------
// One reader and one writer per field; a field in this table is not kept in `extra`.
struct FieldIo {
  const char* name;
  std::function<absl::Status(const json&, Record&)> read;
  std::function<void(const Record&, json&)> write;
};

template <typename T>
FieldIo Optional(const char* name, std::optional<T> Record::*member) {
  return {name,
          [name, member](const json& v, Record& r) {
            T value{};
            if constexpr (std::is_same_v<T, double>) {
              if (absl::Status s = ParseFigure(name, v, value); !s.ok()) return s;
            } else if (absl::Status s = Parse(name, v, value); !s.ok()) {
              return s;
            }
            r.*member = std::move(value);
            return absl::OkStatus();
          },
          [name, member](const Record& r, json& j) {
            if (r.*member) j[name] = ToJson(*(r.*member));
          }};
}

// Kept as written; present when not null.
FieldIo Blob(const char* name, json Record::*member) {
  return {name,
          [member](const json& v, Record& r) {
            r.*member = v;
            return absl::OkStatus();
          },
          [name, member](const Record& r, json& j) {
            if (!(r.*member).is_null()) j[name] = r.*member;
          }};
}

FieldIo PayloadBytes() {
  return {"payload_bytes",
          [](const json& v, Record& r) {
            double d = 0;
            if (absl::Status s = ParseFigure("payload_bytes", v, d); !s.ok()) return s;
            r.payload_bytes = d;
            r.payload_bytes_exact = v.is_number_integer();
            return absl::OkStatus();
          },
          [](const Record& r, json& j) {
            if (!r.payload_bytes) return;
            if (r.payload_bytes_exact) {
              j["payload_bytes"] = static_cast<uint64_t>(*r.payload_bytes);
            } else {
              j["payload_bytes"] = *r.payload_bytes;
            }
          }};
}

const std::vector<FieldIo>& Fields() {
  static const std::vector<FieldIo> fields = {
      Optional("kind", &Record::kind),
      Optional("benchmark", &Record::benchmark),
      Optional("transport", &Record::transport),
      Optional("mode", &Record::mode),
      Optional("scheme", &Record::scheme),
      Optional("scope", &Record::scope),
      Optional("label", &Record::label),
      Optional("model", &Record::model),
      Optional("engine", &Record::engine),
      Optional("math", &Record::math),
      Optional("layout", &Record::layout),
      Optional("tls", &Record::tls),
      Optional("validate", &Record::validate),
      Optional("sync", &Record::sync),
      Optional("seed", &Record::seed),
      Optional("workers", &Record::workers),
      Optional("ps", &Record::ps),
      Optional("worker_index", &Record::worker_index),
      Optional("num_workers", &Record::num_workers),
      Optional("num_ps", &Record::num_ps),
      Optional("batch", &Record::batch),
      Optional("threads", &Record::threads),
      Optional("steps", &Record::steps),
      Optional("run_id", &Record::run_id),
      Optional("payload_summary", &Record::payload_summary),
      PayloadBytes(),
      Optional("payloads", &Record::payloads),
      Optional("iterations", &Record::iterations),
      Optional("bytes", &Record::bytes),
      Optional("peers_lost", &Record::peers_lost),
      Optional("seconds", &Record::seconds),
      Optional("start_unix_s", &Record::start_unix_s),
      Optional("end_unix_s", &Record::end_unix_s),
      Optional("latency_us", &Record::latency_us),
      Optional("rpc_latency_us", &Record::rpc_latency_us),
      Optional("mb_per_s", &Record::mb_per_s),
      Optional("msgs_per_s", &Record::msgs_per_s),
      Optional("rpc_per_s", &Record::rpc_per_s),
      Optional("sum_of_worker_rpc_per_s", &Record::sum_of_worker_rpc_per_s),
      Optional("worst_worker_p99_us", &Record::worst_worker_p99_us),
      Optional("rpc_per_ps", &Record::rpc_per_ps),
      Optional("steps_per_s", &Record::steps_per_s),
      Optional("elements_checked", &Record::elements_checked),
      Optional("mismatches", &Record::mismatches),
      Optional("result", &Record::result),
      Optional("images_per_s", &Record::images_per_s),
      Optional("loss_first", &Record::loss_first),
      Optional("loss_last", &Record::loss_last),
      Optional("step", &Record::step),
      Optional("compute", &Record::compute),
      Optional("communication", &Record::communication),
      Optional("forward", &Record::forward),
      Optional("forward_backward", &Record::forward_backward),
      Blob("config", &Record::config),
      Blob("cpu", &Record::cpu),
      Blob("placement", &Record::placement),
      Blob("shards", &Record::shards),
      Blob("environment", &Record::environment),
      Blob("cluster", &Record::cluster),
      Blob("command", &Record::command),
      Blob("worker_command", &Record::worker_command),
      Optional("timestamp", &Record::timestamp),
  };
  return fields;
}

// --- reading inside the blobs without exceptions ------------------------------------------------
const json& Member(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}
std::optional<double> NumberAt(const json& j, const char* key) {
  const json& v = Member(j, key);
  return v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt;
}
std::string TextAt(const json& j, const char* key) {
  const json& v = Member(j, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

// An open loop's "load" stays in `extra` (its histograms are kept as written), but what a
// report prints from it is checked as the typed fields are: a rate or percentile that is
// missing or not a number would print as 0.
absl::Status CheckLoad(const json& load) {
  if (!load.is_object()) return WrongType("load", "an object");
  for (const char* key : {"offered_per_s", "achieved_per_s"}) {
    double d = 0;
    if (!load.contains(key)) return absl::InvalidArgumentError(absl::StrCat("field 'load.", key, "' is missing"));
    if (absl::Status s = Parse(absl::StrCat("load.", key), load[key], d); !s.ok()) return s;
    if (d < 0) return WrongType(absl::StrCat("load.", key), "a rate (0 or more)");
  }
  for (const char* key : {"planned", "completed", "deferred", "dropped"}) {
    uint64_t n = 0;
    if (!load.contains(key)) continue;
    if (absl::Status s = Parse(absl::StrCat("load.", key), load[key], n); !s.ok()) return s;
  }
  for (const char* view : {"corrected_us", "uncorrected_us", "lag_us"}) {
    const bool required = std::string_view(view) == "corrected_us";
    if (!load.contains(view)) {
      if (required) return absl::InvalidArgumentError(absl::StrCat("field 'load.", view, "' is missing"));
      continue;
    }
    const json& v = load[view];
    if (!v.is_object()) return WrongType(absl::StrCat("load.", view), "an object");
    for (const auto& [key, value] : v.items()) {
      double d = 0;
      if (absl::Status s = Parse(absl::StrCat("load.", view, ".", key), value, d); !s.ok()) return s;
    }
    for (const char* key : {"p50", "p99"}) {
      if (required && !v.contains(key)) {
        return absl::InvalidArgumentError(absl::StrCat("field 'load.", view, ".", key, "' is missing"));
      }
    }
  }
  return absl::OkStatus();
}

// What a report prints of how a payload benchmark measured (warm-up, iterations or time,
// window, outstanding) comes from its "config": a record without them would read as
// "measure 0 s". Checked as the typed fields are.
absl::Status CheckConfig(const json& j) {
  const std::string benchmark = TextAt(j, "benchmark");
  const json& config = Member(j, "config");
  if (config.is_null()) {
    return absl::InvalidArgumentError(
        absl::StrCat("field 'config' is missing (the settings this ", benchmark, " record was measured with)"));
  }
  if (!config.is_object()) return WrongType("config", "an object");
  // A number at least `least`, required, and an integer when a count (Settings() reads it as
  // one); nullopt when it is not (then `status` says why).
  absl::Status status;
  auto number = [&config, &status](const char* key, double least, bool count = true) -> std::optional<double> {
    const std::string name = absl::StrCat("config.", key);
    double d = 0;
    if (!config.contains(key)) {
      status = absl::InvalidArgumentError(absl::StrCat("field '", name, "' is missing"));
    } else if (absl::Status s = Parse(name, config[key], d); !s.ok()) {
      status = s;
    } else if (count && !JsonInteger<int64_t>(config[key])) {
      status = WrongType(name, "an integer");
    } else if (!(d >= least)) {
      status = WrongType(name, least < 0 ? "-1 (by time) or more" : "0 or more");
    } else {
      return d;
    }
    return std::nullopt;
  };
  // Warm-up and measurement by count, or by time (-1 and 0 iterations).
  const std::optional<double> warmup = number("warmup_iterations", -1);
  if (!warmup) return status;
  if (*warmup < 0 && !number("warmup_s", 0, /*count=*/false)) return status;
  const std::optional<double> iterations = number("iterations", 0);
  if (!iterations) return status;
  if (*iterations == 0 && !number("duration_s", 0, /*count=*/false)) return status;
  if (benchmark == "bandwidth" && !number("window", 0)) return status;
  if (benchmark == "throughput" && !j.contains("load") && !number("outstanding", 0)) return status;
  return absl::OkStatus();
}

constexpr size_t kMaxRecordDepth = 64;

// How deeply `j` nests (a number or string: 0), without recursion: a line of 100,000 '['
// parses (the parser keeps a stack of its own), and a recursive copy of it overflows this one.
size_t Depth(const json& j) {
  size_t deepest = 0;
  std::vector<std::pair<const json*, size_t>> todo = {{&j, 0}};
  while (!todo.empty()) {
    const auto [v, depth] = todo.back();
    todo.pop_back();
    deepest = std::max(deepest, depth);
    if (v->is_structured()) {
      for (const json& child : *v) todo.emplace_back(&child, depth + 1);
    }
  }
  return deepest;
}

// A comparison's "iterations" is one count per transport, not a count: kept as written.
bool KeptAsWritten(const json& j, const char* field) {
  return TextAt(j, "kind") == "comparison" && std::string_view(field) == "iterations";
}

}  // namespace

absl::StatusOr<Record> RecordFromJson(const json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("not a JSON object");
  // psbench's own records nest a few levels (load.histograms.corrected, ...).
  if (Depth(j) > kMaxRecordDepth) {
    return absl::InvalidArgumentError(absl::StrCat("nested over ", kMaxRecordDepth, " levels deep"));
  }
  Record r;
  json rest = j;
  for (const FieldIo& f : Fields()) {
    auto it = j.find(f.name);
    // null (a NaN written by nlohmann, say) is no value of any type: kept as written.
    if (it == j.end() || it->is_null() || KeptAsWritten(j, f.name)) continue;
    if (absl::Status s = f.read(*it, r); !s.ok()) return s;
    rest.erase(f.name);
  }
  // A comparison's "load" names the schedule only (docs/records.md): no figures to check.
  if (auto it = rest.find("load"); it != rest.end() && !it->is_null() && TextAt(j, "kind") != "comparison") {
    if (absl::Status s = CheckLoad(*it); !s.ok()) return s;
  }
  if (!r.kind && r.benchmark && FindBenchmarkKind(*r.benchmark) != nullptr) {
    if (absl::Status s = CheckConfig(j); !s.ok()) return s;
  }
  r.extra = std::move(rest);
  return r;
}

json RecordToJson(const Record& r) {
  json j = r.extra.is_object() ? r.extra : json::object();
  for (const FieldIo& f : Fields()) f.write(r, j);
  return j;
}

std::vector<json> RecordsToJson(const std::vector<Record>& records) {
  std::vector<json> out;
  out.reserve(records.size());
  for (const Record& r : records) out.push_back(RecordToJson(r));
  return out;
}

LatencySummary SummarizeLatency(const Histogram& h) {
  auto us = [](double ns) { return ns / 1e3; };
  LatencySummary l;
  l.p50 = us(h.Percentile(0.50));
  l.p99 = us(h.Percentile(0.99));
  l.mean = us(h.mean());
  l.count = h.count();
  l.min = us(static_cast<double>(h.min()));
  l.p90 = us(h.Percentile(0.90));
  l.p999 = us(h.Percentile(0.999));
  l.p9999 = us(h.Percentile(0.9999));
  l.max = us(static_cast<double>(h.max()));
  l.stdev = us(h.stdev());
  return l;
}

std::string Record::Kind() const {
  if (kind) return *kind;
  if (benchmark && FindBenchmarkKind(*benchmark) != nullptr) return *benchmark;
  return "";
}

bool Record::IsPayloadBenchmark() const { return !kind && !Kind().empty(); }

std::string Record::PsbenchVersion() const { return TextAt(Member(environment, "versions"), "psbench"); }

std::string Record::RepetitionText() const {
  auto it = extra.find("repetition");
  if (it == extra.end() || !it->is_object()) return "";
  auto index = NumberAt(*it, "index"), of = NumberAt(*it, "of");
  if (!index || !of) return "";
  return RepetitionName(static_cast<int>(*index), static_cast<int>(*of));
}

std::string RepetitionName(int index, int of) { return absl::StrCat("repetition ", index, "/", of); }

std::string Record::Series() const {
  if (label && !label->empty()) return *label;
  if (!transport || transport->empty()) return "local";
  std::string s = mode && !mode->empty() ? *transport + "/" + *mode : *transport;
  // gRPC's options change what is measured: runs with them are a series of their own.
  if (TextAt(config, "grpc_api") == "callback") s += "+callback";
  if (NumberAt(config, "grpc_tx_zerocopy").value_or(0) > 0) s += "+zerocopy";
  return s;
}

std::string Record::RunId() const { return run_id ? *run_id : TextAt(config, "run_id"); }

RecordSettings Record::Settings() const {
  RecordSettings s;
  s.warmup_s = NumberAt(config, "warmup_s").value_or(0);
  s.warmup_iterations = static_cast<int64_t>(NumberAt(config, "warmup_iterations").value_or(-1));
  s.duration_s = NumberAt(config, "duration_s").value_or(0);
  s.iterations = static_cast<int64_t>(NumberAt(config, "iterations").value_or(0));
  s.window = static_cast<int64_t>(NumberAt(config, "window").value_or(0));
  s.outstanding = static_cast<int64_t>(NumberAt(config, "outstanding").value_or(0));
  const json& busy = Member(config, "busy_poll");
  s.busy_poll = busy.is_boolean() && busy.get<bool>();
  s.run_id = TextAt(config, "run_id");
  s.grpc_api = TextAt(config, "grpc_api");
  s.grpc_tx_zerocopy = NumberAt(config, "grpc_tx_zerocopy").value_or(0);
  return s;
}

std::optional<double> Record::WorkerCpu() const { return NumberAt(Member(cpu, "worker"), "utilization"); }

std::vector<double> Record::PsCpu() const {
  std::vector<double> out;
  const json& ps_list = Member(cpu, "ps");
  if (ps_list.is_array()) {
    for (const json& p : ps_list) out.push_back(NumberAt(p, "utilization").value_or(0));
  }
  return out;
}

std::string Record::WorkerCpuAffinity() const {
  std::string a = TextAt(Member(placement, "worker"), "cpu_affinity");
  return a.empty() ? "?" : a;
}

std::vector<std::string> Record::PsCpuAffinity() const {
  std::vector<std::string> out;
  const json& ps_list = Member(placement, "ps");
  if (ps_list.is_array()) {
    for (const json& p : ps_list) {
      std::string a = TextAt(p, "cpu_affinity");
      out.push_back(a.empty() ? "?" : a);
    }
  }
  return out;
}

std::vector<std::string> Record::PsHosts() const {
  std::vector<std::string> out;
  const json& ps_list = Member(placement, "ps");
  if (ps_list.is_array()) {
    for (const json& p : ps_list) out.push_back(TextAt(p, "host"));
  }
  return out;
}

std::vector<uint64_t> Record::AppliedUpdates() const {
  std::vector<uint64_t> out;
  if (!placement.is_array()) return out;
  for (const json& p : placement) {
    out.push_back(static_cast<uint64_t>(NumberAt(Member(p, "applied"), "updates").value_or(0)));
  }
  return out;
}

std::string Record::EnvironmentText(const char* key) const { return TextAt(environment, key); }

std::optional<double> Record::EnvironmentNumber(const char* key) const {
  return NumberAt(environment, key);
}

std::string Record::VersionsText() const {
  const json& v = Member(environment, "versions");
  if (!v.is_object()) return "";
  std::string text = absl::StrCat("psbench ", TextAt(v, "psbench"), ", gRPC ", TextAt(v, "grpc"), ", protobuf ",
                                  TextAt(v, "protobuf"), ", ", TextAt(v, "compiler"));
  // A PS of another build (or implementation) is part of what was measured.
  std::vector<std::string> others;
  const json& ps_list = Member(placement, "ps");
  if (ps_list.is_array()) {
    for (const json& p : ps_list) {
      const std::string theirs = TextAt(p, "version");
      if (!theirs.empty() && theirs != TextAt(v, "psbench") &&
          std::find(others.begin(), others.end(), theirs) == others.end()) {
        others.push_back(theirs);
      }
    }
  }
  if (!others.empty()) absl::StrAppend(&text, " (PS: ", absl::StrJoin(others, ", "), ")");
  return text;
}

std::optional<bool> Record::Tls() const {
  if (tls) return tls;
  const json& t = Member(config, "tls");
  if (t.is_boolean()) return t.get<bool>();
  return std::nullopt;
}

}  // namespace psbench
