#include "bench/scenario_flags.h"

#include <algorithm>
#include <tuple>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "transports/rdma_flags.h"
#include "transports/transport_flags.h"
#include "bench/cli.h"
#include "payloads/size.h"

ABSL_FLAG(std::string, benchmark, "latency",
          "latency | bandwidth | throughput | updates (psbench run without it: the default tour)");
ABSL_FLAG(std::string, mode, "non-serialized",
          "non-serialized (raw gRPC byte buffers, zero-copy) | serialized (protobuf)");
ABSL_FLAG(std::string, scheme, "uniform", "payload scheme: uniform | random | skew | trace");
ABSL_FLAG(std::string, categories, "S,M,L", "buffer categories used, any subset in any order");
ABSL_FLAG(psbench::ByteSize, small, psbench::ByteSize{10}, "Small buffer size, [1B, 1KiB)");
ABSL_FLAG(psbench::ByteSize, medium, psbench::ByteSize{10 * 1024},
          "Medium buffer size, [1KiB, 1MiB)");
ABSL_FLAG(psbench::ByteSize, large, psbench::ByteSize{1024 * 1024},
          "Large buffer size, [1MiB, 10MiB]");
ABSL_FLAG(int, buffers, 10, "iovec buffers per payload");
ABSL_FLAG(std::string, skew_bias, "large", "skew: category with the 60 % share: large | medium | small");
ABSL_FLAG(uint64_t, seed, psbench::kDefaultSeed, "seed for the random scheme and payload bytes");
ABSL_FLAG(std::string, trace, "", "trace file (JSON) for --scheme=trace");
ABSL_FLAG(std::string, sizes, "", "MIN:MAX: sweep one-buffer payloads, doubling (e.g. 1:4M)");
ABSL_FLAG(absl::Duration, warmup, absl::Seconds(2), "warm-up time");
ABSL_FLAG(int64_t, warmup_iterations, -1,
          "warm up by operation count instead of time (0 = no warm-up; -1 = use --warmup)");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10), "measurement time");
ABSL_FLAG(int64_t, iterations, 0,
          "measure this many operations (per PS) instead of --duration");
ABSL_FLAG(int, window, 16, "bandwidth: payloads outstanding");
ABSL_FLAG(int, outstanding, 8, "throughput: payloads outstanding per PS");
ABSL_FLAG(std::string, load, "closed",
          "latency and throughput: closed (the next operation when one is back) | constant:RATE | "
          "poisson:RATE (open loop: each worker starts RATE operations per second on a schedule "
          "seeded by --seed, without waiting for replies; latency counts from each planned start)");
ABSL_FLAG(std::string, load_sweep, "",
          "KIND:LO..HI*FACTOR, e.g. poisson:1000..64000*2: an open-loop measurement at each rate, "
          "latency against achieved rate, and the knee");
ABSL_FLAG(int, max_in_flight, psbench::kDefaultMaxInFlight,
          "open-loop load: most operations a worker has out at once; an operation due while "
          "they are out waits (counted as deferred, timed from its planned start)");
ABSL_FLAG(std::string, hdr_out, "",
          "open-loop load: write each measurement's histograms (corrected, uncorrected, sender "
          "lag) as HdrHistogram percentile text, FILE.<histogram>.hgrm (numbered when several)");
ABSL_FLAG(bool, validate, false, "checksum every buffer end to end; fail on a mismatch");
ABSL_FLAG(absl::Duration, connect_timeout, absl::Seconds(10), "time to reach every PS");
ABSL_FLAG(absl::Duration, rpc_timeout, absl::Seconds(60), "deadline of each operation");
ABSL_FLAG(psbench::ByteSize, max_input_size, psbench::ByteSize{psbench::kDefaultMaxInputBytes},
          "largest text input read (trace, scenario file, report input); larger ones are "
          "refused before they are read");
ABSL_FLAG(psbench::ByteSize, max_payload_memory, psbench::ByteSize{0},
          "most memory a worker's payloads may take together, checked before any is allocated "
          "(default: half of what this process may use: the host's memory, or its cgroup's "
          "memory limit where one is lower)");

namespace psbench {

uint64_t MaxInputSize() { return absl::GetFlag(FLAGS_max_input_size).bytes; }

std::string HdrOutFlag() { return absl::GetFlag(FLAGS_hdr_out); }

namespace {

absl::Status LoadFromFlags(Scenario* s) {
  auto load = ParseLoad(absl::GetFlag(FLAGS_load));
  if (!load.ok()) return load.status();
  s->load = *load;
  if (std::string sweep = absl::GetFlag(FLAGS_load_sweep); FlagWasSet("load-sweep")) {
    auto parsed = ParseLoadSweep(sweep);
    if (!parsed.ok()) return parsed.status();
    s->load_sweep = *parsed;
  }
  s->max_in_flight = absl::GetFlag(FLAGS_max_in_flight);
  const bool open = s->load.open() || s->load_sweep;
  for (const char* f : {"max-in-flight", "hdr-out"}) {
    if (FlagWasSet(f) && !open) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", f, " applies to an open-loop load only (--load=constant:RATE, poisson:RATE or --load-sweep)"));
    }
  }
  if (open && FlagWasSet("outstanding")) {
    return absl::InvalidArgumentError(
        "--outstanding applies to a closed loop; under an open-loop load --max-in-flight bounds what is out");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Scenario> ScenarioFromFlags() {
  Scenario s;
  auto bench = ParseBenchmark(absl::GetFlag(FLAGS_benchmark));
  if (!bench.ok()) return bench.status();
  s.benchmark = *bench;
  s.transport = TransportFlag();
  bool known = false;
  for (const auto& t : TransportNames()) known |= t == s.transport;
  if (!known) {
    return absl::InvalidArgumentError(absl::StrCat("--transport=", s.transport,
                                                   " is not a transport; available: ",
                                                   absl::StrJoin(TransportNames(), ", ")));
  }
  auto mode = ParseWireMode(absl::GetFlag(FLAGS_mode));
  if (!mode.ok()) return mode.status();
  s.mode = *mode;

  auto scheme = ParseScheme(absl::GetFlag(FLAGS_scheme));
  if (!scheme.ok()) return scheme.status();
  s.payload.scheme = *scheme;
  auto cats = ParseCategories(absl::GetFlag(FLAGS_categories));
  if (!cats.ok()) return cats.status();
  s.payload.categories = *cats;
  // The size of a category the run leaves out would change nothing, yet be recorded.
  for (auto [flag, category, letter] : {std::tuple{"small", Category::kSmall, "S"},
                                        {"medium", Category::kMedium, "M"}, {"large", Category::kLarge, "L"}}) {
    if (FlagWasSet(flag) && std::find(cats->begin(), cats->end(), category) == cats->end()) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " sizes category ", letter, ", which --categories=",
                                                     absl::GetFlag(FLAGS_categories), " leaves out"));
    }
  }
  s.payload.small_bytes = absl::GetFlag(FLAGS_small).bytes;
  s.payload.medium_bytes = absl::GetFlag(FLAGS_medium).bytes;
  s.payload.large_bytes = absl::GetFlag(FLAGS_large).bytes;
  s.payload.buffers = absl::GetFlag(FLAGS_buffers);
  auto bias = ParseCategory(absl::GetFlag(FLAGS_skew_bias));
  if (!bias.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--skew-bias=", absl::GetFlag(FLAGS_skew_bias), " is not a category; use large, medium or small"));
  }
  s.payload.skew_bias = *bias;
  s.payload.seed = absl::GetFlag(FLAGS_seed);
  s.payload.trace_path = absl::GetFlag(FLAGS_trace);

  if (std::string sizes = absl::GetFlag(FLAGS_sizes); !sizes.empty()) {
    auto sweep = ParseSweep(sizes);
    if (!sweep.ok()) return sweep.status();
    s.sweep = *sweep;
    for (const char* f : {"scheme", "categories", "small", "medium", "large", "buffers",
                          "skew-bias", "trace"}) {
      if (FlagWasSet(f)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--sizes sweeps single-buffer payloads and cannot be combined with --", f));
      }
    }
  }
  s.warmup = absl::GetFlag(FLAGS_warmup);
  s.warmup_iterations = absl::GetFlag(FLAGS_warmup_iterations);
  if (FlagWasSet("warmup-iterations") && s.warmup_iterations < 0) {
    return absl::InvalidArgumentError("--warmup-iterations must be >= 0");
  }
  if (FlagWasSet("warmup-iterations") && FlagWasSet("warmup")) {
    return absl::InvalidArgumentError("give --warmup or --warmup-iterations, not both");
  }
  s.duration = absl::GetFlag(FLAGS_duration);
  s.iterations = absl::GetFlag(FLAGS_iterations);
  if (FlagWasSet("iterations") && FlagWasSet("duration")) {
    return absl::InvalidArgumentError("give --duration or --iterations, not both");
  }
  if (FlagWasSet("iterations") && s.iterations < 1) {
    return absl::InvalidArgumentError("--iterations must be at least 1");
  }
  s.window = absl::GetFlag(FLAGS_window);
  s.outstanding = absl::GetFlag(FLAGS_outstanding);
  if (absl::Status st = LoadFromFlags(&s); !st.ok()) return st;
  s.validate = absl::GetFlag(FLAGS_validate);
  s.busy_poll = BusyPollFlag();
  auto zerocopy = GrpcTxZerocopyFlag();
  if (!zerocopy.ok()) return zerocopy.status();
  s.grpc_tx_zerocopy = *zerocopy;
  auto api = GrpcApiFlag();
  if (!api.ok()) return api.status();
  s.grpc_api = *api;
  auto rdma = RdmaOptionsFromFlags(s.busy_poll);
  if (!rdma.ok()) return rdma.status();
  s.rdma = *rdma;
  s.connect_timeout = absl::GetFlag(FLAGS_connect_timeout);
  s.rpc_timeout = absl::GetFlag(FLAGS_rpc_timeout);
  s.max_input_size = MaxInputSize();
  s.max_payload_memory = absl::GetFlag(FLAGS_max_payload_memory).bytes;
  // 0 is "unset" inside a scenario; given on the command line it would quietly be the default.
  if (FlagWasSet("max-payload-memory") && s.max_payload_memory == 0) {
    return absl::InvalidArgumentError(
        "--max-payload-memory=0: give a byte count (unset, it is half of the memory this process may use)");
  }
  if (absl::Status st = ValidateScenario(s); !st.ok()) return st;
  return s;
}

}  // namespace psbench
