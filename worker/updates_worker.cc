#include "worker/updates_worker.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "bench/cli.h"
#include "bench/report.h"
#include "bench/runner.h"
#include "bench/sysinfo.h"
#include "fmt/format.h"
#include "payloads/payload.h"
#include "ps/ps_client.h"
#include "worker/timed_replay.h"
#include "worker/update_codes.h"
#include "worker/trainer_flags.h"

namespace psbench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kProgram[] = "psbench-worker";

using update_codes::Codes;

// Per step: the recorded compute, the replayed step, the exposed communication; then the
// parts' round trips.
void PrintTimedReplay(std::FILE* out, const TimedReplay& replay, const nlohmann::json& summary) {
  fmt::print(out, "  timed replay: {} tensors in {} buckets, {} parts; ms per step:\n",
             summary["tensors"].get<size_t>(), summary["buckets"].get<size_t>(), summary["parts"].get<size_t>());
  fmt::print(out, "  {:>6} {:>10} {:>12} {:>10} {:>11}\n", "step", "trace step", "compute", "step", "exposed");
  for (const TimedStep& s : replay.steps) {
    fmt::print(out, "  {:>6} {:>10} {:>12.3f} {:>10.3f} {:>11.3f}\n", s.step, s.trace_step, s.compute_us / 1e3,
               s.step_us / 1e3, s.exposed_us / 1e3);
  }
  const nlohmann::json& l = summary["part_latency_us"];
  fmt::print(out, "  median step {:.3f} ms, exposed {:.3f} ms; part round trip p50 {:.1f} us, p90 {:.1f}, "
             "p99 {:.1f}, max {:.1f} ({} parts); {} late starts\n",
             summary["median_step_us"].get<double>() / 1e3, summary["median_exposed_us"].get<double>() / 1e3,
             l["p50"].get<double>(), l["p90"].get<double>(), l["p99"].get<double>(), l["max"].get<double>(),
             l["count"].get<uint64_t>(), replay.late_starts);
}

}  // namespace

absl::Status CheckExact(const UpdatesSettings& s, int num_workers) {
  if (int64_t{s.steps} * num_workers > kMaxUpdates) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--benchmark=updates: --steps=", s.steps, " x ", num_workers, " workers is over ",
        kMaxUpdates, " updates, past which float32 sums are no longer exact"));
  }
  if (s.sync && num_workers > 0 && !update_codes::SyncSumsExact(static_cast<uint32_t>(num_workers))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--benchmark=updates --sync with ", num_workers, " workers: the PS's sum of a step's ", num_workers,
        " gradients (up to ", 4 * int64_t{num_workers}, " each) is not exact in float32; use --async, or a "
        "worker count with more factors of 2 (any count up to 2048, or a power of two, is exact)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<UpdatesSettings> UpdatesSettingsFromFlags(int num_workers) {
  UpdatesSettings s;
  s.steps = absl::GetFlag(FLAGS_steps);
  const bool async = absl::GetFlag(FLAGS_async);
  if (async && FlagWasSet("sync") && absl::GetFlag(FLAGS_sync))
    return absl::InvalidArgumentError("--sync and --async exclude each other");
  s.sync = !async && absl::GetFlag(FLAGS_sync);
  const std::string replay = absl::GetFlag(FLAGS_replay);
  if (replay != "timed" && replay != "back-to-back")
    return absl::InvalidArgumentError(absl::StrCat("--replay=", replay, ": use timed or back-to-back"));
  s.timed = replay == "timed";
  if (s.steps < 1 || s.steps > 1000000)
    return absl::InvalidArgumentError("--steps must be in [1, 1000000]");
  if (absl::Status exact = CheckExact(s, num_workers); !exact.ok()) return exact;
  return s;
}

absl::Status CheckReplay(const UpdatesSettings& settings, const PayloadPlan& plan) {
  if (!settings.timed || plan.timing != nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "--replay=timed replays a captured training's steps: give --scheme=trace a psbench-trace/2 trace "
      "(ready times per step), not sizes only");
}

std::vector<uint64_t> UpdatesModelBytes(const UpdatesSettings& settings, const PayloadPlan& plan) {
  return settings.timed ? TimedModelOf(*plan.timing).tensor_bytes : plan.AllSizes();
}

absl::Status CheckUpdatesModel(size_t tensors, size_t num_ps) {
  if (tensors >= num_ps) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--benchmark=updates: ", tensors, " tensors (the payloads' buffers) for ",
                                                 num_ps, " PS; each PS needs at least one (raise --buffers; with a trace, "
                                                 "use fewer PS)"));
}

std::vector<std::string> UpdatesWorkerArgs(const UpdatesSettings& s) {
  std::vector<std::string> args = {absl::StrCat("--steps=", s.steps), s.sync ? "--sync" : "--async"};
  if (s.timed) args.push_back("--replay=timed");
  return args;
}

int RunUpdatesWorker(const Scenario& scenario, Client& client, const UpdatesSettings& settings,
                     const std::string& json_path, bool quiet,
                     const std::vector<std::string>& command) {
  auto plans = scenario.Plans();
  if (!plans.ok()) Die(kProgram, plans.status(), kExitUsage);
  const PayloadPlan& plan = plans->front();
  if (absl::Status s = CheckReplay(settings, plan); !s.ok()) Die(kProgram, s, kExitUsage);
  // The model, each tensor a float32 one (sizes rounded up); timed, with the trace's buckets.
  TimedModel timed_model;
  if (settings.timed) timed_model = TimedModelOf(*plan.timing);
  std::vector<uint64_t> elements;
  for (uint64_t bytes : UpdatesModelBytes(settings, plan)) elements.push_back(std::max<uint64_t>(1, (bytes + 3) / 4));
  const size_t num_ps = client.num_servers();
  if (absl::Status s = CheckUpdatesModel(elements.size(), num_ps); !s.ok()) Die(kProgram, s, kExitUsage);
  if (absl::Status exact = CheckExact(settings, scenario.num_workers); !exact.ok()) Die(kProgram, exact, kExitUsage);
  const uint64_t seed = scenario.payload.seed;
  const uint32_t W = static_cast<uint32_t>(scenario.num_workers);
  const uint32_t me = static_cast<uint32_t>(scenario.worker_index);

  // The PS client places the tensors over the PS by bytes, as the trainer's variables.
  std::vector<uint64_t> tensor_bytes;
  for (uint64_t e : elements) tensor_bytes.push_back(e * sizeof(float));
  const absl::Duration op_timeout = scenario.rpc_timeout + absl::Seconds(5);
  auto made_ps = PsClient::Create(client, tensor_bytes,
                                  {.run_id = scenario.run_id,
                                   .worker = me,
                                   .num_workers = W,
                                   .sync = settings.sync,
                                   .learning_rate = 1.f,
                                   .momentum = 0.f,
                                   .seed = seed,
                                   .round_timeout = op_timeout,
                                   .buckets = timed_model.buckets});
  if (!made_ps.ok()) Die(kProgram, made_ps.status(), ExitCodeFor(made_ps.status()));
  PsClient& ps = **made_ps;
  auto fail = [](const absl::Status& s) { Die(kProgram, absl::StrCat("updates: ", s.message()), kExitRuntime); };
  const Codes update_codes(seed, W, static_cast<uint64_t>(settings.steps));
  std::vector<std::vector<uint8_t>> codes(elements.size());  // B(t, i)
  for (size_t t = 0; t < elements.size(); ++t) {
    codes[t].resize(elements[t]);
    for (uint64_t i = 0; i < elements[t]; ++i)
      codes[t][i] = static_cast<uint8_t>(update_codes::ElementCode(seed, t, i));
  }
  auto initial_values = [&] {
    for (size_t t = 0; t < elements.size(); ++t) {
      float* v = ps.outgoing(static_cast<int>(t));
      for (uint64_t i = 0; i < elements[t]; ++i) v[i] = update_codes::Initial(seed, t, i);
    }
  };

  auto moved_before = TakeMovedSnapshot(client);
  if (!moved_before.ok()) fail(moved_before.status());
  // Every worker sends the same initial values; the first sets the PS.
  initial_values();
  if (absl::Status s = ps.Exchange(ExchangeHeader::kInit, 0); !s.ok()) fail(s);
  // Nobody pushes before every worker is past this point (the barrier below): a PS that has
  // applied updates of this run already kept them from an earlier run with this run id.
  for (size_t p = 0; p < num_ps; ++p) {
    auto r = ps.Report(p);
    if (!r.ok()) fail(r.status());
    if (r->updates > 0) {
      Die(kProgram, absl::StrCat("updates: PS ", ps.ps_address(p), " already applied ", r->updates,
                                 " updates of run '", scenario.run_id,
                                 "' before this one started; give each run its own --run-id"),
          kExitUsage);
    }
  }
  if (absl::Status s = AwaitPeers(client, scenario, absl::StrCat(scenario.run_id, "/updates-start"),
                                  absl::Now() + scenario.connect_timeout + op_timeout);
      !s.ok()) {
    Die(kProgram, absl::StrCat("updates: start barrier: ", s.message()), kExitRuntime);
  }

  const float unit = settings.sync ? static_cast<float>(W) : 1.f;
  uint64_t pushed_bytes = 0;
  auto fill = [&](int step) {
    const uint32_t code = update_codes.UpdateCode(me, static_cast<uint64_t>(step));
    for (size_t t = 0; t < elements.size(); ++t) {
      Codes::FillGradient(ps.outgoing(static_cast<int>(t)), codes[t].data(), elements[t], code, unit);
      pushed_bytes += tensor_bytes[t];
    }
  };
  std::optional<TimedReplay> timed;
  const auto start = Clock::now();
  if (settings.timed) {
    auto replay = RunTimedSteps(ps, *plan.timing, timed_model, settings.steps, fill, op_timeout);
    if (!replay.ok()) fail(replay.status());
    timed = *std::move(replay);
  } else {
    for (int step = 0; step < settings.steps; ++step) {
      fill(step);
      if (absl::Status s = ps.Exchange(ExchangeHeader::kStep, static_cast<uint64_t>(step)); !s.ok()) fail(s);
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  // Read back, with what each PS says it applied at that same moment.
  int reads = 0;
  auto read = ps.ReadBack(initial_values, &reads);
  if (!read.ok()) fail(read.status());
  const std::vector<UpdateReport>& reports = *read;
  auto moved_after = TakeMovedSnapshot(client);
  if (!moved_after.ok()) fail(moved_after.status());

  // What each PS applied, checked against what this worker knows, then element by element.
  std::vector<std::string> problems, unexplained;
  uint64_t mismatches = 0, checked = 0;
  nlohmann::json first_mismatch;
  nlohmann::json explained = nlohmann::json::array();
  nlohmann::json ps_json = nlohmann::json::array();
  for (size_t p = 0; p < num_ps; ++p) {
    const UpdateReport& r = reports[p];
    const std::string& address = ps.ps_address(p);
    Codes::Applied applied;
    if (r.workers.size() != W) {
      problems.push_back(absl::StrCat("PS ", address, " reports ", r.workers.size(), " workers, not ", W));
    }
    for (size_t w = 0; w < r.workers.size() && w < W; ++w) {
      const UpdateReport::Worker& rw = r.workers[w];
      if (!rw.steps.empty() && rw.steps.ranges().rbegin()->second >= static_cast<uint64_t>(settings.steps)) {
        problems.push_back(absl::StrCat("PS ", address, " applied step ", rw.steps.ranges().rbegin()->second,
                                        " of worker ", w, "; the run has ", settings.steps));
      }
      for (uint64_t d : rw.duplicates) {
        problems.push_back(absl::StrCat("PS ", address, " applied step ", d, " of worker ", w, " twice"));
      }
      const bool all_steps = rw.steps.size() == static_cast<uint64_t>(settings.steps) &&
                             rw.duplicates.empty();
      if ((w == me || settings.sync) && !all_steps) {
        problems.push_back(absl::StrCat("PS ", address, " applied steps '", rw.steps.ToString(), "' of worker ", w,
                                        " (", rw.applied, " updates); every one of 0-", settings.steps - 1,
                                        " was acknowledged"));
      }
      for (const auto& [first, last] : rw.steps.ranges()) {
        for (uint64_t s = first; s <= last; ++s) applied.Add(update_codes.UpdateCode(static_cast<uint32_t>(w), s));
      }
      for (uint64_t d : rw.duplicates) applied.Add(update_codes.UpdateCode(static_cast<uint32_t>(w), d));
    }
    if (settings.sync && r.updates != static_cast<uint64_t>(settings.steps)) {
      problems.push_back(absl::StrCat("PS ", address, " applied ", r.updates, " steps; the run has ", settings.steps));
    }
    // Expected: P less, per element, what the applied updates took (a table by group and
    // code); a tensor that differs is explained by one update where one fits.
    double decrement[update_codes::kGroups][4];
    applied.Decrements(decrement);
    auto want = [&](size_t t, uint64_t i) {
      return update_codes::Initial(seed, t, i) - decrement[i % update_codes::kGroups][codes[t][i]];
    };
    int searched = 0, unexplained_here = 0;
    std::vector<double> diff;
    for (size_t t : ps.shard(p).tensors) {
      const float* got = ps.incoming(t);
      uint64_t tensor_mismatches = 0, first_i = 0;
      for (uint64_t i = 0; i < elements[t]; ++i) {
        ++checked;
        if (static_cast<double>(got[i]) == want(t, i)) continue;
        if (mismatches == 0) {
          first_mismatch = {{"ps", address}, {"tensor", t}, {"element", i}, {"expected", want(t, i)}, {"got", got[i]}};
        }
        if (tensor_mismatches++ == 0) first_i = i;
        ++mismatches;
      }
      if (tensor_mismatches == 0) continue;
      // Which update explains it: the differences (only for a tensor that has some), then a
      // search of the run's updates, which costs a pass over them: for the first few tensors.
      Codes::Explanation e;
      const bool search = tensor_mismatches == elements[t] && searched < 8;
      if (search) {
        diff.resize(elements[t]);
        for (uint64_t i = 0; i < elements[t]; ++i) diff[i] = static_cast<double>(got[i]) - want(t, i);
        e = update_codes.Explain(diff, codes[t]);
        ++searched;
      }
      if (e.kind == Codes::Explanation::kNone) {
        // One line per tensor for the first few; the count says the rest.
        if (unexplained_here++ < 8) {
          unexplained.push_back(fmt::format(
              "PS {} tensor {}: {} of {} elements differ (element {}: expected {}, got {}){}", address, t,
              tensor_mismatches, elements[t], first_i, want(t, first_i), got[first_i],
              search ? ", not by one update" : ""));
        }
        continue;
      }
      const bool missing = e.kind == Codes::Explanation::kMissing;
      problems.push_back(absl::StrCat("PS ", address, " tensor ", t, ": ",
                                      missing ? "the update of " : "an extra update of ",
                                      update_codes::DescribeUpdates(e),
                                      missing ? " is missing" : " was applied", " (every element off by its gradient)"));
      nlohmann::json updates = nlohmann::json::array();
      for (const auto& [w, s] : e.updates) updates.push_back({{"worker", w}, {"step", s}});
      explained.push_back({{"ps", address}, {"tensor", t}, {"kind", missing ? "missing" : "extra"},
                           {"updates", updates}, {"fitting", e.fitting}});
    }
    if (unexplained_here > 8) {
      unexplained.push_back(absl::StrCat("PS ", address, ": ", unexplained_here - 8, " more tensors differ"));
    }
    nlohmann::json placed = nlohmann::json::array();
    for (size_t t : ps.shard(p).tensors) placed.push_back(t);
    ps_json.push_back({{"ps", address},
                       {"tensors", placed},
                       {"bytes", ps.shard(p).bytes},
                       {"data_plane", ps.data_plane(p)},
                       {"applied", r.ToJson()}});
  }
  // Named updates first: they say which worker's which step went wrong where.
  problems.insert(problems.end(), unexplained.begin(), unexplained.end());

  const bool exact = problems.empty();
  Record record;
  record.kind = "updates";
  record.benchmark = "updates";
  record.transport = scenario.transport;
  if (TransportHonoursMode(scenario.transport)) record.mode = std::string(WireModeName(scenario.mode));
  record.tls = scenario.tls;
  record.validate = scenario.validate;
  record.sync = settings.sync;
  record.steps = settings.steps;
  record.seed = seed;
  record.scheme = std::string(SchemeName(scenario.payload.scheme));
  // The model's tensors as sent: timed, the trace's in model order.
  std::vector<uint64_t> buffers = plan.AllSizes();
  if (settings.timed) {
    buffers.clear();
    for (size_t t : timed_model.trace_tensor) buffers.push_back(plan.timing->tensors[t].bytes);
  }
  record.extra["buffers"] = buffers;
  record.extra["tensor_bytes"] = tensor_bytes;
  record.payload_summary = plan.Summary();
  record.payload_bytes = static_cast<double>(plan.TotalBytes());
  record.ps = static_cast<int64_t>(num_ps);
  record.workers = scenario.num_workers;
  record.worker_index = scenario.worker_index;
  record.scope = "worker";
  record.run_id = scenario.run_id;
  record.extra["learning_rate"] = 1.0;
  record.extra["momentum"] = 0.0;
  record.seconds = seconds;
  record.steps_per_s = seconds > 0 ? settings.steps / seconds : 0.0;
  record.mb_per_s = seconds > 0 ? static_cast<double>(pushed_bytes) / seconds / 1e6 : 0.0;
  record.elements_checked = checked;
  record.mismatches = mismatches;
  record.extra["reads"] = reads;
  record.extra["replay"] = timed ? TimedReplayJson(*timed, timed_model, ps) : nlohmann::json{{"mode", "back-to-back"}};
  record.result = exact ? "exact" : "mismatch";
  record.extra["problems"] = problems;
  record.extra["moved"] = MovedJson(*moved_before, *moved_after, {ps.bytes_sent(), ps.bytes_received()});
  record.placement = ps_json;
  record.config = ScenarioToJson(scenario);
  record.environment = Environment();
  record.command = command;
  record.timestamp = absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone());
  if (!first_mismatch.is_null()) record.extra["first_mismatch"] = first_mismatch;
  if (!explained.empty()) record.extra["explained"] = explained;
  if (!quiet) {
    std::string applied_text;
    for (size_t p = 0; p < num_ps; ++p) {
      absl::StrAppend(&applied_text, p ? ", " : "", "PS ", p, " ", reports[p].updates);
    }
    std::FILE* out = json_path == "-" ? stderr : stdout;
    fmt::print(out, "updates worker {}/{} over {} ({}, {} PS): {} steps in {:.3f} s ({:.1f} steps/s), "
               "{} elements {} (updates applied: {})\n",
               scenario.worker_index, scenario.num_workers,
               TransportWithMode(scenario.transport, scenario.mode), settings.sync ? "sync" : "async", num_ps,
               settings.steps, seconds, *record.steps_per_s, checked,
               exact ? "exact" : "NOT exact", applied_text);
    if (timed) PrintTimedReplay(out, *timed, record.extra["replay"]);
    std::fflush(out);
  }
  if (!json_path.empty()) {
    if (absl::Status s = AppendJsonLines(json_path, {record}); !s.ok()) Die(kProgram, s, kExitRuntime);
  }
  if (std::string why = MovedDisagreement(record.extra["moved"]); !why.empty()) {
    Die(kProgram, absl::StrCat("payload bytes not where the record says: ", why), kExitRuntime);
  }
  if (!exact) {
    Die(kProgram, absl::StrCat("updates lost or wrong: ", problems.front(),
                               problems.size() > 1 ? absl::StrCat(" (and ", problems.size() - 1, " more)") : ""),
        kExitRuntime);
  }
  return 0;
}

}  // namespace psbench
