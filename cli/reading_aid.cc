#include "cli/reading_aid.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/sysinfo.h"
#include "bench/table.h"
#include "cli/launch/launch.h"
#include "cli/launch/process.h"
#include "cli/launch/scratch.h"
#include "fmt/core.h"

namespace psbench {
namespace {

using nlohmann::json;
constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
// Enough for a stable median of a multi-megabyte message on loopback, little enough that the
// floors add a few seconds to a tour of about 40.
constexpr int kIterations = 100, kWarmup = 10;

std::string Cell(double v) { return std::isnan(v) ? "-" : fmt::format("{:.1f}", v); }

// "3.03MiB", "10.0KiB", "10B": a payload's size at a glance (the exact bytes are in the records).
std::string Bytes(uint64_t b) {
  if (b >= (1u << 20)) return fmt::format("{:.2f}MiB", b / double(1u << 20));
  if (b >= 1024) return fmt::format("{:.1f}KiB", b / 1024.0);
  return fmt::format("{}B", b);
}

// One floor tool: its server, then a pingpong and a stream client per size; the records, or
// why not (one line).
struct Floor {
  const char* binary;  // psbench-floor-tcp, psbench-floor-grpc
  const char* name;    // "tcp", "grpc"
  const char* api;     // psbench-floor-grpc's --api, or nullptr
};

absl::StatusOr<std::vector<Record>> RunFloor(const LaunchOptions& o, const Floor& floor,
                                           const std::vector<uint64_t>& sizes) {
  const std::string path = o.bin_dir + "/" + floor.binary;
  std::vector<std::string> server_argv = {path, "--server", "--port=0"};
  if (floor.api != nullptr) server_argv.push_back(absl::StrCat("--api=", floor.api));
  if (!o.ps_cpu.empty()) server_argv.push_back("--cpu=" + o.ps_cpu);
  auto server = ChildProcess::Start(floor.binary, server_argv, {.capture_stdout = true});
  if (!server.ok()) return server.status();
  // "listening on 127.0.0.1:PORT" first.
  auto line = server->ReadLine(absl::Now() + absl::Seconds(10));
  if (!line.ok() || line->rfind("listening on ", 0) != 0) {
    return absl::UnavailableError(absl::StrCat(floor.binary, " did not start listening"));
  }
  const std::string address = line->substr(13);
  auto scratch = ScratchDir::Create("floor");
  if (!scratch.ok()) return scratch.status();
  const std::string out = (*scratch)->path() + "/record.jsonl";
  std::vector<Record> records;
  absl::Status failure;
  for (uint64_t bytes : sizes) {
    for (const char* test : {"pingpong", "stream"}) {
      std::vector<std::string> argv = {path, "--connect=" + address, absl::StrCat("--test=", test),
                                       absl::StrCat("--size=", bytes), absl::StrCat("--iterations=", kIterations),
                                       absl::StrCat("--warmup=", kWarmup), "--json=" + out};
      if (floor.api != nullptr) argv.push_back(absl::StrCat("--api=", floor.api));
      if (!o.worker_cpu.empty()) argv.push_back("--cpu=" + o.worker_cpu);
      std::remove(out.c_str());
      auto client = ChildProcess::Start(floor.binary, argv, {.capture_stdout = true});
      if (!client.ok()) {
        failure = client.status();
        break;
      }
      // Its output is read until it ends (at most a minute of silence), or psbench is told to
      // stop: a floor must not outlast a SIGTERM to psbench.
      for (absl::Time quiet_until = absl::Now() + absl::Seconds(60); !Interrupted();) {
        auto got = client->ReadLine(std::min(quiet_until, absl::Now() + absl::Milliseconds(200)));
        if (got.ok()) quiet_until = absl::Now() + absl::Seconds(60);
        else if (got.status().code() != absl::StatusCode::kDeadlineExceeded || absl::Now() >= quiet_until) break;
      }
      int status = client->Stop(SIGTERM, absl::Seconds(5));
      if (Interrupted()) {
        failure = InterruptedError();
        break;
      }
      std::ifstream in(out);
      std::string text;
      std::getline(in, text);
      auto record = json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (status != 0 || !record.is_object()) {
        failure = absl::InternalError(absl::StrCat(floor.binary, " --test=", test, " ",
                                                   ChildProcess::Describe(status)));
        break;
      }
      record["kind"] = "floor";
      record["floor"] = floor.name;
      record["command"] = argv;
      record["placement"] = {{"server_cpu", o.ps_cpu}, {"client_cpu", o.worker_cpu}};
      record["environment"] = Environment();
      auto typed = RecordFromJson(record);
      if (!typed.ok()) {  // the floors and psbench are built together: a bug, not bad input
        failure = absl::InternalError(absl::StrCat(floor.binary, " wrote a record psbench cannot read: ",
                                                   typed.status().message()));
        break;
      }
      records.push_back(*std::move(typed));
    }
    if (!failure.ok()) break;
  }
  server->Stop(SIGTERM, absl::Seconds(5));
  if (!failure.ok()) return failure;
  return records;
}

}  // namespace

void PrintTourSummary(const std::string& transport, const std::vector<TourRow>& rows, int repetitions) {
  Table t;
  t.id = "summary";
  t.title = fmt::format("Summary ({})", transport);
  t.notes = {"latency p50: round trip µs | bandwidth MB/s | throughput: total RPC/s"};
  if (repetitions > 1) t.notes.push_back(fmt::format("each the median of {} repetitions", repetitions));
  t.columns = {"scheme", "bytes", "payload", "latency p50", "bandwidth MB/s", "throughput RPC/s"};
  for (const TourRow& r : rows) {
    t.rows.push_back({r.scheme, Bytes(r.bytes), r.payload, Cell(r.latency_p50_us), Cell(r.bandwidth_mb_per_s),
                      Cell(r.throughput_rpc_per_s)});
  }
  fmt::print("\n{}", RenderText(t));
}

std::vector<Record> PrintReadingAid(const LaunchOptions& o, bool local, const std::vector<TourRow>& rows) {
  if (!local) {
    fmt::print("# To judge these figures: latency is a round trip (perftest and OSU print half of one);\n"
               "# the floors psbench ships (psbench-floor-tcp, psbench-floor-grpc, psbench-floor-mpi) measure\n"
               "# this fabric without psbench: bench/floors/README.md\n");
    return {};
  }
  std::vector<uint64_t> sizes;
  for (const TourRow& r : rows) {
    if (std::find(sizes.begin(), sizes.end(), r.bytes) == sizes.end()) sizes.push_back(r.bytes);
  }
  std::vector<Record> records;
  std::map<std::pair<std::string, uint64_t>, Record> by;  // (floor/test, bytes) -> record
  std::vector<std::string> problems;
  // gRPC's floor is the strongest program on the API psbench's non-serialized mode uses.
  for (const Floor& floor : {Floor{"psbench-floor-tcp", "tcp", nullptr}, Floor{"psbench-floor-grpc", "grpc", "generic"}}) {
    if (Interrupted()) return records;  // the caller says so
    auto got = RunFloor(o, floor, sizes);
    if (!got.ok()) {
      problems.push_back(std::string(got.status().message()));
      continue;
    }
    for (Record& r : *got) {
      const std::string test = r.extra.value("test", "");  // the floor's own field: pingpong, stream
      by[{absl::StrCat(floor.name, "/", test), r.bytes.value_or(0)}] = r;
      records.push_back(std::move(r));
    }
  }
  auto figure = [&by](const std::string& key, uint64_t bytes) {
    auto it = by.find({key, bytes});
    if (it == by.end()) return kNone;
    const Record& r = it->second;
    if (key.ends_with("pingpong")) return r.latency_us ? r.latency_us->p50 : kNone;
    return r.mb_per_s.value_or(kNone);
  };
  Table t;
  t.id = "reading_aid";
  t.title = "Reading aid: this machine's floors, measured just now";
  t.notes = {fmt::format("Loopback, placed as the tour's PS and worker: one message of each payload's size, {} "
                         "round trips (MB/s: a window of 16).", kIterations),
             "tcp: a socket loop, no RPC layer (psbench-floor-tcp); grpc: a minimal async generic gRPC echo "
             "of one buffer (psbench-floor-grpc --api=generic).",
             "Latency is a round trip: perftest and OSU print half of one."};
  t.groups = {{"", 1}, {"latency p50 µs", 3}, {"bandwidth MB/s", 3}};
  t.columns = {"scheme", "psbench", "tcp", "grpc", "psbench", "tcp", "grpc"};
  for (const TourRow& r : rows) {
    t.rows.push_back({r.scheme, Cell(r.latency_p50_us), Cell(figure("tcp/pingpong", r.bytes)),
                      Cell(figure("grpc/pingpong", r.bytes)), Cell(r.bandwidth_mb_per_s),
                      Cell(figure("tcp/stream", r.bytes)), Cell(figure("grpc/stream", r.bytes))});
  }
  fmt::print("\n{}", RenderText(t));
  for (const std::string& p : problems) fmt::print("# floor not measured: {}\n", p);
  return records;
}

}  // namespace psbench
