#include "bench/flag_scope.h"

#include <algorithm>
#include <functional>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bench/cli.h"
#include "transports/rdma_flags.h"
#include "transports/transport_flags.h"
#include "transports/transport.h"

namespace psbench {
namespace {

using Kind = RunShape::Kind;

bool AnyTransport(const std::vector<std::string>& transports, bool TransportTraits::*trait) {
  return std::any_of(transports.begin(), transports.end(),
                     [&](const std::string& t) { return TransportHas(t, trait); });
}

bool RunsScheme(const RunShape& shape, bool (*pred)(Scheme)) {
  return std::any_of(shape.schemes.begin(), shape.schemes.end(), pred);
}

bool Runs(const RunShape& shape, Benchmark b) {
  return shape.kind == Kind::kTour || (shape.kind == Kind::kBenchmark && shape.benchmark == b);
}

// One rule: the flags it covers, whether they apply to a shape, and where they do.
struct Rule {
  std::vector<std::string> flags;
  std::function<bool(const RunShape&)> applies;
  const char* where;
};

const std::vector<Rule>& Rules() {
  static const auto* rules = new std::vector<Rule>{
      {{"window"},
       [](const RunShape& s) { return Runs(s, Benchmark::kBandwidth); },
       "applies to --benchmark=bandwidth only (payloads outstanding)"},
      {{"load", "load-sweep", "max-in-flight", "hdr-out"},
       [](const RunShape& s) {
         return s.kind == Kind::kBenchmark &&
                (s.benchmark == Benchmark::kLatency || s.benchmark == Benchmark::kThroughput);
       },
       "applies to --benchmark=latency and --benchmark=throughput only (open-loop load)"},
      // Repeated runs are summarized by payload: the payload benchmarks' figures.
      {{"repetitions"},
       [](const RunShape& s) { return s.kind == Kind::kTour || s.kind == Kind::kBenchmark; },
       "applies to the payload benchmarks only (latency, bandwidth, throughput), not to "
       "--trainer or --benchmark=updates"},
      {{"outstanding"},
       [](const RunShape& s) { return Runs(s, Benchmark::kThroughput); },
       "applies to --benchmark=throughput only (payloads outstanding per PS)"},
      {{"batch", "engine", "math", "layout", "threads", "warmup-steps", "learning-rate", "momentum", "write-trace"},
       [](const RunShape& s) { return s.kind == Kind::kTraining; },
       "applies to --trainer only"},
      {{"replay"},
       [](const RunShape& s) {
         return s.kind == Kind::kUpdates && RunsScheme(s, [](Scheme c) { return c == Scheme::kTrace; });
       },
       "applies to --benchmark=updates with --scheme=trace only (it replays a captured training)"},
      {{"steps", "sync", "async"},
       [](const RunShape& s) { return s.kind == Kind::kTraining || s.kind == Kind::kUpdates; },
       "applies to --trainer and --benchmark=updates only"},
      // A training run's payloads are the model's gradients, timed by steps.
      {{"benchmark", "transports", "scheme", "sizes", "duration", "iterations", "warmup",
        "warmup-iterations", "categories", "small", "medium", "large", "buffers", "skew-bias", "trace",
        "max-payload-memory"},
       [](const RunShape& s) { return s.kind != Kind::kTraining; },
       "does not apply to --trainer (its payloads are the model's gradients; see --steps, "
       "--warmup-steps)"},
      // A trace gives every buffer's size; the categories and their sizes make the others.
      {{"categories", "small", "medium", "large", "buffers"},
       [](const RunShape& s) { return RunsScheme(s, [](Scheme c) { return c != Scheme::kTrace; }); },
       "does not apply to --scheme=trace (the trace gives every buffer's size)"},
      {{"skew-bias"},
       [](const RunShape& s) { return RunsScheme(s, [](Scheme c) { return c == Scheme::kSkew; }); },
       "applies to --scheme=skew only"},
      // Updates pushes --steps exchanges of the payload plan's buffers.
      {{"sizes", "duration", "iterations", "warmup", "warmup-iterations", "transports"},
       [](const RunShape& s) { return s.kind != Kind::kUpdates; },
       "does not apply to --benchmark=updates (it pushes --steps exchanges of the payload "
       "plan's buffers per PS)"},
  };
  return *rules;
}

// Every --rdma-* flag, by where it is defined (a new one is covered without listing it).
std::vector<std::string> RdmaFlagsSet() {
  std::vector<std::string> out;
  for (const std::string& name : FlagsSet()) {
    std::string absl_name = name;
    std::replace(absl_name.begin(), absl_name.end(), '-', '_');
    const absl::CommandLineFlag* f = absl::FindCommandLineFlag(absl_name);
    if (f != nullptr && absl::EndsWith(f->Filename(), kRdmaFlagsFile)) out.push_back(name);
  }
  return out;
}

}  // namespace

RunShape ShapeOf(const Scenario& s, bool training, bool tour) {
  RunShape shape;
  shape.kind = training                                ? Kind::kTraining
               : s.benchmark == Benchmark::kUpdates    ? Kind::kUpdates
               : tour                                  ? Kind::kTour
                                                       : Kind::kBenchmark;
  shape.benchmark = s.benchmark;
  shape.transports = {s.transport};
  shape.schemes = {s.payload.scheme};
  if (shape.kind == Kind::kTour && !FlagWasSet("scheme") && !s.sweep) {
    shape.schemes = {Scheme::kUniform, Scheme::kRandom, Scheme::kSkew};
  }
  return shape;
}

absl::Status CheckTransportFlagsApply(const std::vector<std::string>& transports,
                                      const std::string& threads_flag) {
  if (FlagWasSet(threads_flag) && !AnyTransport(transports, &TransportTraits::threaded_data_plane)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", threads_flag, " applies to ", TransportsWith(&TransportTraits::threaded_data_plane),
        " only (the other transports poll their data plane on threads of their own)"));
  }
  if (FlagWasSet("grpc-api") && !AnyTransport(transports, &TransportTraits::honours_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--grpc-api applies to ", TransportsWith(&TransportTraits::honours_mode),
        " only (the other transports' payloads do not go over gRPC)"));
  }
  if (auto api = GrpcApiFlag(); FlagWasSet(threads_flag) && api.ok() && *api == GrpcApi::kCallback) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", threads_flag, " applies to --grpc-api=cq only (the callback API's calls run on gRPC's own threads)"));
  }
  if (FlagWasSet("grpc-tx-zerocopy") && !AnyTransport(transports, &TransportTraits::honours_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--grpc-tx-zerocopy applies to ", TransportsWith(&TransportTraits::honours_mode),
        " only (the other transports' payloads do not go over gRPC)"));
  }
  if (FlagWasSet("mode") && !AnyTransport(transports, &TransportTraits::honours_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--mode applies to ", TransportsWith(&TransportTraits::honours_mode),
        " only (the other transports move the buffers as they are, with no wire mode)"));
  }
  if (!AnyTransport(transports, &TransportTraits::takes_rdma_options)) {
    for (const std::string& flag : RdmaFlagsSet()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, " applies to ", TransportsWith(&TransportTraits::takes_rdma_options), " only"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckFlagsApply(const RunShape& shape) {
  for (const Rule& rule : Rules()) {
    if (rule.applies(shape)) continue;
    for (const std::string& flag : rule.flags) {
      if (FlagWasSet(flag)) return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", rule.where));
    }
  }
  return CheckTransportFlagsApply(shape.transports);
}

}  // namespace psbench
