// psbench-floor-mpi: the raw MPI floor for grpc+mpi, in the style of the OSU micro-benchmarks.
// Two ranks. pingpong: rank 0 sends SIZE bytes, rank 1 sends them back (MPI_Send/MPI_Recv),
// one round trip per iteration. stream: rank 0 keeps --window MPI_Isend in flight, rank 1
// answers each window with a 4-byte acknowledgement, as osu_bw does. Rank 0 prints the
// table and appends JSON Lines records in the other floors' format (round trips in µs).
//
// --thread-level=funneled asks MPI for the thread level grpc+mpi needs, so that what that
// level costs in MPI itself (Open MPI locks its queues above MPI_THREAD_SINGLE) is measured
// apart from what psbench costs.
//
//   mpirun -np 2 psbench-floor-mpi [--test=both] [--sizes=32,64K,1M,4M] [--json=FILE]
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/process/alloc_policy.h"
#include "bench/process/mutex_policy.h"
#include "bench/cli.h"
#include "bench/floors/floor_limits.h"
#include "fmt/core.h"
#include "nlohmann/json.hpp"
#include "payloads/payload.h"
#include "payloads/size.h"

ABSL_FLAG(std::string, test, "both", "pingpong | stream | both");
ABSL_FLAG(std::string, sizes, "32,64K,1M,4M", "comma-separated message sizes");
ABSL_FLAG(int64_t, iterations, 0, "measured iterations per size (0: by size, as OSU does)");
ABSL_FLAG(int64_t, warmup, -1, "untimed iterations first (-1: 10 % of --iterations)");
ABSL_FLAG(int, window, 16, "stream: messages in flight per window");
ABSL_FLAG(std::string, json, "", "append one JSON Lines record per size and test (rank 0)");
ABSL_FLAG(std::string, thread_level, "single",
          "MPI thread level to ask for: single (the floor) | funneled (what grpc+mpi asks for, "
          "gRPC running threads of its own; Open MPI then locks its queues on every call)");

namespace psbench {
namespace {

constexpr char kProgram[] = "psbench-floor-mpi";
constexpr char kUsage[] =
    "mpirun -np 2 psbench-floor-mpi [--test=pingpong|stream|both] [--sizes=32,64K,1M,4M]\n"
    "                               [--thread-level=single|funneled]\n"
    "Raw MPI ping-pong and windowed bandwidth between two ranks: the floor for grpc+mpi.";

int64_t DefaultIterations(uint64_t size) {
  return size <= 8192 ? 10000 : size <= (1 << 20) ? 1000 : 200;
}

// --thread-level as given, read before MPI starts (flags are parsed after MPI_Init_thread,
// so that only rank 0 reports a bad one); empty when not given.
std::string ThreadLevelArg(int argc, char** argv) {
  std::string level;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") break;
    for (const char* name : {"--thread-level", "-thread-level", "--thread_level", "-thread_level"}) {
      std::string n = name;
      if (arg.rfind(n + "=", 0) == 0) level = arg.substr(n.size() + 1);
      if (arg == n && i + 1 < argc) level = argv[i + 1];
    }
  }
  return level;
}

double Percentile(const std::vector<double>& sorted, double p) {
  size_t i = std::min(sorted.size() - 1, static_cast<size_t>(p * sorted.size()));
  return sorted[i];
}

int Main(int argc, char** argv) {
  int provided = 0;
  const bool funneled = ThreadLevelArg(argc, argv) == "funneled";
  MPI_Init_thread(&argc, &argv, funneled ? MPI_THREAD_FUNNELED : MPI_THREAD_SINGLE, &provided);
  int rank = 0, ranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  // One rank speaks for the job: the others keep quiet about bad flags.
  if (rank != 0 && std::freopen("/dev/null", "w", stderr) == nullptr) return 1;
  auto positional = ParseFlagsOrExit(argc, argv, kUsage, {"/bench/floors/mpi_floor.cc"});
  if (!positional.empty()) Die(kProgram, "unexpected argument '" + positional[0] + "'", kExitUsage);
  if (ranks != 2) {
    Die(kProgram,
        fmt::format("needs exactly 2 MPI ranks, has {}: launch it as mpirun -np 2 {} ...", ranks,
                    kProgram),
        kExitUsage);
  }
  const std::string thread_level = absl::GetFlag(FLAGS_thread_level);
  if (thread_level != "single" && thread_level != "funneled") {
    Die(kProgram, "--thread-level=" + thread_level + " is not a level; use single or funneled", kExitUsage);
  }
  if ((thread_level == "funneled") != funneled) {
    // Read before MPI started, in a form the pre-scan did not take.
    Die(kProgram, "--thread-level: give it as --thread-level=" + thread_level, kExitUsage);
  }
  if (provided < (funneled ? MPI_THREAD_FUNNELED : MPI_THREAD_SINGLE)) {
    Die(kProgram, "--thread-level: this MPI does not provide MPI_THREAD_" + absl::AsciiStrToUpper(thread_level),
        kExitUsage);
  }
  std::string test = absl::GetFlag(FLAGS_test);
  if (test != "pingpong" && test != "stream" && test != "both") {
    Die(kProgram, "--test=" + test + " is not a test; use pingpong, stream or both", kExitUsage);
  }
  std::vector<uint64_t> sizes;
  for (absl::string_view part : absl::StrSplit(absl::GetFlag(FLAGS_sizes), ',')) {
    auto size = ParseSize(std::string_view(part.data(), part.size()));
    if (!size.ok() || *size == 0 || *size > (1u << 30)) {
      Die(kProgram, "--sizes: '" + std::string(part) + "' is not a size in [1, 1GiB]", kExitUsage);
    }
    sizes.push_back(*size);
  }
  int window = absl::GetFlag(FLAGS_window);
  if (window < 1 || window > floors::kMaxWindow) {
    Die(kProgram, absl::StrCat("--window must be in [1, ", floors::kMaxWindow, "]"), kExitUsage);
  }
  int64_t iterations_flag = absl::GetFlag(FLAGS_iterations);
  if (iterations_flag < 0 || iterations_flag > floors::kMaxIterations) {
    Die(kProgram, absl::StrCat("--iterations must be in [0, ", floors::kMaxIterations, "] (0 = default)"), kExitUsage);
  }
  const int64_t warmup_flag = absl::GetFlag(FLAGS_warmup);
  if (warmup_flag < -1 || warmup_flag > floors::kMaxIterations) {
    Die(kProgram, absl::StrCat("--warmup must be in [0, ", floors::kMaxIterations, "] (or -1 = 10% of iterations)"),
        kExitUsage);
  }
  std::ofstream json;
  if (rank == 0 && !absl::GetFlag(FLAGS_json).empty()) {
    json.open(absl::GetFlag(FLAGS_json), std::ios::app);
    if (!json) Die(kProgram, "--json: cannot open " + absl::GetFlag(FLAGS_json), kExitUsage);
  }
  int peer = 1 - rank;
  char processor[MPI_MAX_PROCESSOR_NAME];
  int processor_len = 0;
  MPI_Get_processor_name(processor, &processor_len);
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int version_len = 0;
  MPI_Get_library_version(version, &version_len);
  std::string library(version, strnlen(version, version_len));
  library = library.substr(0, library.find_first_of(",\n"));
  using Clock = std::chrono::steady_clock;

  for (const char* kind : {"pingpong", "stream"}) {
    if (test != "both" && test != kind) continue;
    bool pingpong = std::string(kind) == "pingpong";
    if (rank == 0) {
      fmt::print("# {} {} | {} | MPI_THREAD_{} | ranks on {}\n", kProgram, kind, library,
                 absl::AsciiStrToUpper(thread_level), processor);
      if (pingpong) {
        fmt::print("  {:>10} {:>10} {:>12} {:>12} {:>12}\n", "#bytes", "#iters", "p50 usec",
                   "mean usec", "max usec");
      } else {
        fmt::print("  {:>10} {:>10} {:>12} {:>12}\n", "#bytes", "#iters", "MB/s", "msgs/s");
      }
    }
    for (uint64_t size : sizes) {
      int64_t iterations = iterations_flag > 0 ? iterations_flag : DefaultIterations(size);
      int64_t warmup = warmup_flag >= 0 ? warmup_flag : iterations / 10;
      // Allocated as psbench allocates payloads (page-aligned from 4 KiB up): the floor must
      // not pay for a misaligned copy that psbench does not.
      Payload message(std::vector<uint64_t>{size}, /*seed=*/size);
      std::byte* buffer = message.mutable_buffer(0).data();
      std::vector<std::unique_ptr<Payload>> window_buffers;
      std::vector<MPI_Request> requests(window);
      int count = static_cast<int>(size);
      nlohmann::json record = {{"tool", kProgram}, {"test", kind}, {"bytes", size},
                               {"iterations", iterations}, {"warmup", warmup},
                               {"mpi", library}, {"thread_level", thread_level}, {"host", processor},
                               {"allocator", AllocatorPolicy()},
                               {"mutex_deadlock_detection", MutexDeadlockDetection()}};
      MPI_Barrier(MPI_COMM_WORLD);
      if (pingpong) {
        std::vector<double> round_trips;
        for (int64_t i = 0; i < warmup + iterations; ++i) {
          auto start = Clock::now();
          if (rank == 0) {
            MPI_Send(buffer, count, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            MPI_Recv(buffer, count, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          } else {
            MPI_Recv(buffer, count, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buffer, count, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
          }
          if (i >= warmup) {
            round_trips.push_back(
                std::chrono::duration<double, std::micro>(Clock::now() - start).count());
          }
        }
        if (rank != 0) continue;
        std::sort(round_trips.begin(), round_trips.end());
        double mean = 0;
        for (double r : round_trips) mean += r / round_trips.size();
        record["latency_us"] = {{"min", round_trips.front()},
                                {"p50", Percentile(round_trips, 0.5)},
                                {"p90", Percentile(round_trips, 0.9)},
                                {"p99", Percentile(round_trips, 0.99)},
                                {"max", round_trips.back()},
                                {"mean", mean}};
        fmt::print("  {:>10} {:>10} {:>12.2f} {:>12.2f} {:>12.2f}\n", size, iterations,
                   Percentile(round_trips, 0.5), mean, round_trips.back());
      } else {
        // osu_bw: rank 1 receives into one buffer per window slot, then acknowledges.
        for (int k = 0; k < window; ++k) {
          window_buffers.push_back(std::make_unique<Payload>(std::vector<uint64_t>{size}, k));
        }
        int32_t ack = 0;
        int64_t windows = (iterations + window - 1) / window;
        int64_t warm_windows = (warmup + window - 1) / window;
        Clock::time_point start;
        for (int64_t w = 0; w < warm_windows + windows; ++w) {
          if (w == warm_windows) start = Clock::now();
          for (int k = 0; k < window; ++k) {
            if (rank == 0) {
              MPI_Isend(buffer, count, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &requests[k]);
            } else {
              MPI_Irecv(window_buffers[k]->mutable_buffer(0).data(), count, MPI_BYTE, peer, 2, MPI_COMM_WORLD,
                        &requests[k]);
            }
          }
          MPI_Waitall(window, requests.data(), MPI_STATUSES_IGNORE);
          if (rank == 0) {
            MPI_Recv(&ack, 1, MPI_INT32_T, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          } else {
            MPI_Send(&ack, 1, MPI_INT32_T, peer, 3, MPI_COMM_WORLD);
          }
        }
        if (rank != 0) continue;
        double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        double messages = static_cast<double>(windows) * window;
        double mbps = messages * size / seconds / 1e6;
        record["iterations"] = static_cast<int64_t>(messages);
        record["window"] = window;
        record["mb_per_s"] = mbps;
        record["msgs_per_s"] = messages / seconds;
        fmt::print("  {:>10} {:>10} {:>12.2f} {:>12.1f}\n", size, static_cast<int64_t>(messages),
                   mbps, messages / seconds);
      }
      std::fflush(stdout);
      if (json.is_open()) {
        json << record.dump() << '\n';
        json.flush();
        if (!json) Die(kProgram, "writing --json failed", kExitRuntime);
      }
    }
  }
  MPI_Finalize();
  return 0;
}

}  // namespace
}  // namespace psbench

int main(int argc, char** argv) {
  psbench::FixAllocatorPolicy();  // as psbench's own processes, before MPI starts threads
  psbench::TurnOffMutexDeadlockDetection();
  return psbench::Main(argc, argv);
}
