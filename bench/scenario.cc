#include "bench/scenario.h"

#include <algorithm>
#include <initializer_list>
#include <span>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/memory_limit.h"
#include "bench/sysinfo.h"
#include "inputs/address.h"
#include "payloads/json_field.h"
#include "payloads/size.h"
#include "transports/rdma_flags.h"

namespace psbench {

absl::string_view BenchmarkName(Benchmark b) {
  switch (b) {
    case Benchmark::kLatency: return "latency";
    case Benchmark::kBandwidth: return "bandwidth";
    case Benchmark::kThroughput: return "throughput";
    case Benchmark::kUpdates: return "updates";
  }
  return "?";
}

absl::StatusOr<Benchmark> ParseBenchmark(absl::string_view text) {
  if (text == "latency") return Benchmark::kLatency;
  if (text == "bandwidth") return Benchmark::kBandwidth;
  if (text == "throughput") return Benchmark::kThroughput;
  if (text == "updates") return Benchmark::kUpdates;
  return absl::InvalidArgumentError(absl::StrCat(
      "--benchmark=", text, " is not a benchmark; use latency, bandwidth, throughput or updates"));
}

absl::StatusOr<std::pair<uint64_t, uint64_t>> ParseSweep(absl::string_view text) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("--sizes=", text, ": ", why));
  };
  if (parts.size() != 2) return bad("expected MIN:MAX, e.g. 1:4M");
  auto lo = ParseSize(parts[0]);
  if (!lo.ok()) return bad(lo.status().message());
  auto hi = ParseSize(parts[1]);
  if (!hi.ok()) return bad(hi.status().message());
  if (absl::Status s = CheckSweep(*lo, *hi); !s.ok()) return bad(s.message());
  return std::make_pair(*lo, *hi);
}

absl::Status CheckSweep(uint64_t lo, uint64_t hi) {
  if (lo < 1) return absl::InvalidArgumentError("MIN must be at least 1 byte");
  if (hi < lo) return absl::InvalidArgumentError("MAX is below MIN");
  if (hi > 1024 * kMiB) return absl::InvalidArgumentError("MAX is above 1GiB");
  return absl::OkStatus();
}

namespace {

absl::Status CheckLoad(const Scenario& s) {
  if (!s.load.open() && !s.load_sweep) return absl::OkStatus();
  if (s.benchmark != Benchmark::kLatency && s.benchmark != Benchmark::kThroughput) {
    return absl::InvalidArgumentError(absl::StrCat(
        s.load_sweep ? "--load-sweep" : "--load", " applies to --benchmark=latency and throughput only (",
        BenchmarkName(s.benchmark), s.benchmark == Benchmark::kBandwidth ? " keeps --window payloads out)"
                                                                         : " runs training steps)"));
  }
  if (s.load.open() && s.load_sweep) return absl::InvalidArgumentError("give --load or --load-sweep, not both");
  if (s.load.open() && !(s.load.rate >= kMinLoadRate && s.load.rate <= kMaxLoadRate)) {
    return absl::InvalidArgumentError(absl::StrCat("--load=", LoadName(s.load), ": the rate must be in [",
                                                   kMinLoadRate, ", ", kMaxLoadRate, "] per second"));
  }
  if (s.load_sweep) {
    if (absl::Status st = CheckLoadSweep(*s.load_sweep); !st.ok()) return st;
  }
  // Measured by time, the schedule must offer at least one operation: a constant one plans
  // none in a --duration shorter than its period (a record of none read as 0 µs), and a
  // Poisson one's first, at the start, alone would read as a rate the schedule never offered.
  const double offered = (s.load_sweep ? s.load_sweep->lo : s.load.rate) * absl::ToDoubleSeconds(s.duration);
  if (s.iterations == 0 && offered < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        s.load_sweep ? "--load-sweep=" + LoadSweepName(*s.load_sweep) : "--load=" + LoadName(s.load), " offers ",
        absl::SixDigits(offered), " operations (rate x duration)", s.load_sweep ? " at its lowest rate" : "",
        " in --duration=", absl::FormatDuration(s.duration),
        ": give a longer --duration, a higher rate or --iterations"));
  }
  if (s.max_in_flight < 1 || s.max_in_flight > kMaxMaxInFlight) {
    return absl::InvalidArgumentError(absl::StrCat("--max-in-flight must be in [1, ", kMaxMaxInFlight, "]"));
  }
  return absl::OkStatus();
}

// "load": {"kind", "rate"}, "load_sweep": {"kind", "lo", "hi", "factor"}, "max_in_flight";
// a scenario without them is closed-loop. Throws what ScenarioFromJson catches.
absl::Status LoadFromJson(const nlohmann::json& j, Scenario* s) {
  auto kind = [](const nlohmann::json& o, const char* what) -> absl::StatusOr<LoadKind> {
    // Else its fields would be said to be missing.
    if (!o.is_object()) throw JsonFieldError(absl::StrCat("'", what, "' must be an object"));
    auto parsed = ParseLoadKind(InJsonObject(what, [&] { return JsonStringField(o, "kind"); }));
    if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat("scenario: '", what, "' has an unknown kind"));
    return *parsed;
  };
  if (j.contains("load")) {
    auto k = kind(j["load"], "load");
    if (!k.ok()) return k.status();
    s->load = {*k, InJsonObject("load", [&] { return JsonNumberField(j["load"], "rate", 0.0); })};
  }
  if (j.contains("load_sweep")) {
    const nlohmann::json& w = j["load_sweep"];
    auto k = kind(w, "load_sweep");
    if (!k.ok()) return k.status();
    s->load_sweep = InJsonObject("load_sweep", [&] {
      return LoadSweep{*k, JsonNumberField(w, "lo"), JsonNumberField(w, "hi"), JsonNumberField(w, "factor")};
    });
  }
  if (j.contains("max_in_flight")) s->max_in_flight = JsonIntegerField<int>(j, "max_in_flight");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<PayloadPlan>> Scenario::Plans(PayloadMemoryCheck check) const {
  std::vector<PayloadPlan> plans;
  if (sweep) {
    for (uint64_t size = sweep->first;; size *= 2) {
      plans.push_back(SingleBufferPlan(std::min(size, sweep->second)));
      if (size >= sweep->second) break;
    }
  } else {
    auto plan = ResolvePlan(payload, max_input_size);
    if (!plan.ok()) return plan.status();
    plans.push_back(*std::move(plan));
  }
  // A worker allocates every payload of a plan (each group of a trace) before it measures it,
  // and frees them after: a small trace can name gigabytes, and 200,000 one-byte groups take
  // a page each.
  uint64_t peak = 0;
  for (const PayloadPlan& plan : plans) peak = std::max(peak, plan.ArenaBytes());
  // By default half of what this process may use: the host's memory, or its cgroup's limit.
  std::string why;
  uint64_t budget = max_payload_memory;
  if (budget == 0 && check == PayloadMemoryCheck::kExplicitOnly) return plans;
  if (budget == 0) {
    const MemoryLimit limit = ProcessMemoryLimit();
    budget = limit.bytes / 2;
    why = limit.source == "host"
              ? " (half of this host's memory)"
              : absl::StrCat(" (half of this process's memory limit, ", FormatSize(limit.bytes), " in ",
                             limit.source, ")");
  }
  if (peak > budget) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the payloads to send take ", FormatSize(peak), " of memory at once (",
        plans.size() == 1 ? absl::StrCat(plans[0].payloads.size(), " payloads")
                          : "the largest size",
        "), over --max-payload-memory=", FormatSize(budget), why,
        "; raise it or send fewer bytes"));
  }
  return plans;
}

bool PlacesOverPs(const Scenario& s, size_t num_ps) {
  return s.benchmark == Benchmark::kThroughput && s.payload.scheme == Scheme::kTrace && !s.sweep && num_ps > 1;
}

absl::StatusOr<std::vector<std::vector<Shard>>> PlaceOverPs(const PayloadPlan& plan, size_t num_ps) {
  std::vector<std::vector<Shard>> out;
  for (size_t i = 0; i < plan.payloads.size(); ++i) {
    const std::vector<uint64_t> sizes = plan.Sizes(i);
    if (sizes.size() < num_ps) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--benchmark=throughput places a trace's tensors over the PS by bytes, but ",
          plan.payloads.size() > 1 ? absl::StrCat("group ", i, " of the trace") : std::string("the trace"),
          " has ", sizes.size(), " tensor", sizes.size() == 1 ? "" : "s", " for ", num_ps,
          " PS; each PS needs at least one (use fewer PS)"));
    }
    out.push_back(PlaceByBytes(sizes, num_ps));
  }
  return out;
}

absl::Status CheckPayloadsFitMessages(const std::vector<PayloadPlan>& plans, uint64_t max_message_bytes,
                                      absl::string_view whose, size_t place_over, MessageBytesFn message_bytes) {
  for (const PayloadPlan& plan : plans) {
    std::vector<std::vector<uint64_t>> messages;  // each message's buffer sizes
    if (place_over > 0) {
      auto placed = PlaceOverPs(plan, place_over);
      if (!placed.ok()) return placed.status();
      for (size_t i = 0; i < placed->size(); ++i) {
        const std::vector<uint64_t> sizes = plan.Sizes(i);
        for (const Shard& s : (*placed)[i]) {
          std::vector<uint64_t>& part = messages.emplace_back();
          for (size_t t : s.tensors) part.push_back(sizes[t]);
        }
      }
    } else {
      for (size_t i = 0; i < plan.payloads.size(); ++i) messages.push_back(plan.Sizes(i));
    }
    for (const std::vector<uint64_t>& sizes : messages) {
      if (max_message_bytes == 0) break;
      const uint64_t bytes = message_bytes(sizes);
      if (bytes <= max_message_bytes) continue;
      uint64_t payload = 0;
      for (uint64_t s : sizes) payload += s;
      return absl::InvalidArgumentError(absl::StrCat(
          "a ", FormatSize(payload), place_over > 0 ? " part of a trace placed over the PS" : " payload",
          bytes == payload ? std::string(" is") : absl::StrCat(" makes a ", bytes, "-byte message,"),
          " over ", whose, " --max-message-size=", FormatSize(max_message_bytes),
          ", which refuses larger messages; raise it or send smaller payloads"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateScenario(const Scenario& s) {
  // Records and the scenario each worker is given are JSON, which holds UTF-8 text only: a
  // path of other bytes would be recorded, and opened, as another.
  if (!IsUtf8(s.payload.trace_path)) {
    return absl::InvalidArgumentError(absl::StrCat("--trace=", s.payload.trace_path,
                                                   ": the path is not UTF-8 text, which psbench's JSON records and "
                                                   "scenarios hold; give the file a UTF-8 name (or a link to it)"));
  }
  if (!s.sweep) {
    if (absl::Status st = ValidateSpec(s.payload); !st.ok()) return st;
  } else if (absl::Status st = CheckSweep(s.sweep->first, s.sweep->second); !st.ok()) {
    // A scenario file's sweep has not been through ParseSweep: MIN 0 or MAX near 2^64 would
    // make Plans() double forever.
    return absl::InvalidArgumentError(absl::StrCat("--sizes=", s.sweep->first, ":",
                                                   s.sweep->second, ": ", st.message()));
  }
  if (s.warmup < absl::ZeroDuration()) return absl::InvalidArgumentError("--warmup must be >= 0");
  // "inf" parses as a duration; no run waits forever, and a record's seconds are numbers.
  for (auto [flag, d] : {std::pair{"--warmup", s.warmup}, {"--duration", s.duration},
                         {"--connect-timeout", s.connect_timeout}, {"--rpc-timeout", s.rpc_timeout}}) {
    if (d == absl::InfiniteDuration() || d == -absl::InfiniteDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " is infinite: give a finite time"));
    }
  }
  // As the flag checks it (a scenario file's value has not been through the flag).
  if (s.grpc_tx_zerocopy > (uint64_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat("--grpc-tx-zerocopy=", s.grpc_tx_zerocopy,
                                                   " must be 0 (off) or at most 1GiB"));
  }
  if (s.warmup_iterations < -1) {
    return absl::InvalidArgumentError("--warmup-iterations must be >= 0");
  }
  if (s.iterations < 0) return absl::InvalidArgumentError("--iterations must be >= 0");
  if (s.iterations == 0 && s.duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--duration must be positive (or give --iterations)");
  }
  if (s.window < 1 || s.window > 4096) {
    return absl::InvalidArgumentError("--window must be in [1, 4096]");
  }
  if (s.outstanding < 1 || s.outstanding > 4096) {
    return absl::InvalidArgumentError("--outstanding must be in [1, 4096]");
  }
  if (absl::Status st = CheckLoad(s); !st.ok()) return st;
  // As many as a PS's updates run holds (a run's own launchers start at most 256).
  if (s.num_workers < 1 || s.num_workers > 65536) {
    return absl::InvalidArgumentError("--num-workers must be in [1, 65536]");
  }
  if (s.worker_index < 0 || s.worker_index >= s.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("--worker-index=", s.worker_index,
                                                   " must be in [0, --num-workers)"));
  }
  if (s.benchmark == Benchmark::kUpdates && s.sweep) {
    return absl::InvalidArgumentError(
        "--sizes does not apply to --benchmark=updates (its model is one payload's buffers; "
        "use --buffers, --small, --medium, --large or --trace)");
  }
  if (absl::Status st = CheckPsListSyntax(s.ps, "--ps"); !st.ok()) return st;
  if (!EveryWorkerToEveryPs(s.benchmark) && s.ps.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--benchmark=", BenchmarkName(s.benchmark),
        " is point-to-point and takes one PS; use --benchmark=throughput for several"));
  }
  if (s.max_input_size < 1) return absl::InvalidArgumentError("--max-input-size must be at least 1 byte");
  if (s.connect_timeout <= absl::ZeroDuration() || s.rpc_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--connect-timeout and --rpc-timeout must be positive");
  }
  return absl::OkStatus();
}


std::string SchemeLabel(const Scenario& s) {
  return s.sweep ? std::string("sweep") : std::string(SchemeName(s.payload.scheme));
}

std::vector<LoadSchedule> LoadPoints(const Scenario& s) {
  return s.load_sweep ? SweepPoints(*s.load_sweep) : std::vector<LoadSchedule>{s.load};
}

nlohmann::json ScenarioToJson(const Scenario& s) {
  nlohmann::json j = {
      {"benchmark", BenchmarkName(s.benchmark)},
      {"transport", s.transport},
      {"mode", WireModeName(s.mode)},
      {"scheme", SchemeName(s.payload.scheme)},
      {"categories", CategoriesText(s.payload.categories)},
      {"small", s.payload.small_bytes},
      {"medium", s.payload.medium_bytes},
      {"large", s.payload.large_bytes},
      {"buffers", s.payload.buffers},
      {"skew_bias", CategoryName(s.payload.skew_bias)},
      {"seed", s.payload.seed},
      {"trace", s.payload.trace_path},
      {"warmup_s", absl::ToDoubleSeconds(s.warmup)},
      {"warmup_iterations", s.warmup_iterations},
      {"duration_s", absl::ToDoubleSeconds(s.duration)},
      {"iterations", s.iterations},
      {"window", s.window},
      {"outstanding", s.outstanding},
      {"validate", s.validate},
      {"busy_poll", s.busy_poll},
      {"grpc_tx_zerocopy", s.grpc_tx_zerocopy},
      {"grpc_api", std::string(GrpcApiName(s.grpc_api))},
      {"ps", s.ps},
      {"num_workers", s.num_workers},
      {"worker_index", s.worker_index},
      {"run_id", s.run_id},
      {"connect_timeout_s", absl::ToDoubleSeconds(s.connect_timeout)},
      {"rpc_timeout_s", absl::ToDoubleSeconds(s.rpc_timeout)},
      {"max_input_size", s.max_input_size},
      {"max_payload_memory", s.max_payload_memory},
  };
  if (s.sweep) j["sizes"] = {s.sweep->first, s.sweep->second};
  // Rates as numbers: a worker runs exactly the load the driver resolved.
  if (s.load.open()) j["load"] = {{"kind", LoadKindName(s.load.kind)}, {"rate", s.load.rate}};
  if (s.load_sweep) {
    j["load_sweep"] = {{"kind", LoadKindName(s.load_sweep->kind)}, {"lo", s.load_sweep->lo},
                       {"hi", s.load_sweep->hi}, {"factor", s.load_sweep->factor}};
  }
  if (s.load.open() || s.load_sweep) j["max_in_flight"] = s.max_in_flight;
  // Only where they apply: a record names no mode its transport ignores.
  if (!TransportHonoursMode(s.transport)) {
    j.erase("mode");
    j.erase("grpc_tx_zerocopy");
    j.erase("grpc_api");
  }
  if (TransportHas(s.transport, &TransportTraits::takes_rdma_options)) {
    j["rdma"] = RdmaOptionsToJson(s.rdma);
  }
  return j;
}

namespace {

// Every field ScenarioToJson writes, at the top and in the objects it holds. A scenario with
// another comes from a psbench of another version, which meant something by it that this one
// would silently not do.
constexpr const char* kScenarioFields[] = {
    "benchmark", "transport", "mode", "scheme", "categories", "small", "medium", "large", "buffers", "skew_bias",
    "seed", "trace", "warmup_s", "warmup_iterations", "duration_s", "iterations", "window", "outstanding",
    "validate", "busy_poll", "grpc_tx_zerocopy", "grpc_api", "ps", "num_workers", "worker_index", "run_id",
    "connect_timeout_s", "rpc_timeout_s", "max_input_size", "max_payload_memory", "sizes", "load", "load_sweep",
    "max_in_flight", "rdma"};
constexpr const char* kLoadFields[] = {"kind", "rate"};
constexpr const char* kLoadSweepFields[] = {"kind", "lo", "hi", "factor"};
constexpr const char* kRdmaFields[] = {"device", "port", "gid_index", "mtu", "queue_depth", "slot_bytes", "poll"};

// INVALID_ARGUMENT naming the first field of object `o` (`where`: "" at the top) not in `known`.
absl::Status OnlyKnownFields(const nlohmann::json& o, std::span<const char* const> known, const std::string& where) {
  if (!o.is_object()) return absl::OkStatus();  // the parse says what is wrong with it
  for (const auto& [key, value] : o.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "scenario: ", where.empty() ? "" : "in '" + where + "', ", "'", key, "' is not a field psbench ",
          PsbenchVersion(), " knows (a psbench of another version wrote it? install one psbench on every node)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Scenario> ScenarioFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("scenario: not a JSON object");
  if (absl::Status st = OnlyKnownFields(j, kScenarioFields, ""); !st.ok()) return st;
  for (const auto& [where, known] : std::initializer_list<std::pair<const char*, std::span<const char* const>>>{
           {"load", kLoadFields}, {"load_sweep", kLoadSweepFields}, {"rdma", kRdmaFields}}) {
    if (!j.contains(where)) continue;
    if (absl::Status st = OnlyKnownFields(j[where], known, where); !st.ok()) return st;
  }
  try {
    Scenario s;
    auto bench = ParseBenchmark(JsonStringField(j, "benchmark"));
    if (!bench.ok()) return bench.status();
    s.benchmark = *bench;
    s.transport = JsonStringField(j, "transport");
    if (j.contains("mode")) {
      if (!TransportHonoursMode(s.transport)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "scenario: 'mode' does not apply to ", s.transport, " (only ",
            TransportsWith(&TransportTraits::honours_mode), " has wire modes)"));
      }
      auto mode = ParseWireMode(JsonStringField(j, "mode"));
      if (!mode.ok()) return mode.status();
      s.mode = *mode;
    }
    auto scheme = ParseScheme(JsonStringField(j, "scheme"));
    if (!scheme.ok()) return scheme.status();
    s.payload.scheme = *scheme;
    auto cats = ParseCategories(JsonStringField(j, "categories"));
    if (!cats.ok()) return cats.status();
    s.payload.categories = *cats;
    s.payload.small_bytes = JsonIntegerField<uint64_t>(j, "small");
    s.payload.medium_bytes = JsonIntegerField<uint64_t>(j, "medium");
    s.payload.large_bytes = JsonIntegerField<uint64_t>(j, "large");
    s.payload.buffers = JsonIntegerField<int>(j, "buffers");
    auto bias = ParseCategory(JsonStringField(j, "skew_bias"));
    if (!bias.ok()) return bias.status();
    s.payload.skew_bias = *bias;
    s.payload.seed = JsonIntegerField<uint64_t>(j, "seed");
    s.payload.trace_path = JsonStringField(j, "trace");
    s.warmup = absl::Seconds(JsonNumberField(j, "warmup_s"));
    s.warmup_iterations = JsonIntegerField<int64_t>(j, "warmup_iterations");
    s.duration = absl::Seconds(JsonNumberField(j, "duration_s"));
    s.iterations = JsonIntegerField<int64_t>(j, "iterations");
    s.window = JsonIntegerField<int>(j, "window");
    s.outstanding = JsonIntegerField<int>(j, "outstanding");
    s.validate = JsonBoolField(j, "validate");
    s.busy_poll = JsonBoolField(j, "busy_poll", false);
    if (j.contains("grpc_tx_zerocopy")) s.grpc_tx_zerocopy = JsonIntegerField<uint64_t>(j, "grpc_tx_zerocopy");
    if (j.contains("grpc_api")) {
      auto api = ParseGrpcApi(JsonStringField(j, "grpc_api"));
      if (!api.ok()) return api.status();
      s.grpc_api = *api;
    }
    const nlohmann::json& ps = JsonField(j, "ps");
    if (!ps.is_array() || !std::all_of(ps.begin(), ps.end(), [](const nlohmann::json& a) { return a.is_string(); })) {
      JsonFieldIsNot(j, "ps", "a list of HOST:PORT strings");
    }
    s.ps = ps.get<std::vector<std::string>>();
    s.num_workers = JsonIntegerField<int>(j, "num_workers");
    s.worker_index = JsonIntegerField<int>(j, "worker_index");
    s.run_id = JsonStringField(j, "run_id");
    s.connect_timeout = absl::Seconds(JsonNumberField(j, "connect_timeout_s"));
    s.rpc_timeout = absl::Seconds(JsonNumberField(j, "rpc_timeout_s"));
    if (j.contains("max_input_size")) s.max_input_size = JsonIntegerField<uint64_t>(j, "max_input_size");
    if (j.contains("max_payload_memory")) {
      s.max_payload_memory = JsonIntegerField<uint64_t>(j, "max_payload_memory");
    }
    if (j.contains("rdma")) {
      auto rdma = RdmaOptionsFromJson(j["rdma"]);
      if (!rdma.ok()) return rdma.status();
      s.rdma = *rdma;
    }
    if (absl::Status st = LoadFromJson(j, &s); !st.ok()) return st;
    if (j.contains("sizes")) {
      const nlohmann::json& sizes = j["sizes"];
      std::optional<uint64_t> lo, hi;
      if (sizes.is_array() && sizes.size() == 2) {
        lo = JsonInteger<uint64_t>(sizes[0]);
        hi = JsonInteger<uint64_t>(sizes[1]);
      }
      if (!lo || !hi) {
        return absl::InvalidArgumentError("scenario: 'sizes' must be [MIN, MAX], two byte counts");
      }
      s.sweep = std::make_pair(*lo, *hi);
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("scenario: ", e.what()));
  } catch (const JsonFieldError& e) {
    return absl::InvalidArgumentError(absl::StrCat("scenario: ", e.what()));
  }
}

}  // namespace psbench
