// Plumbing shared by the two floor programs (tcp_floor.cc, grpc_unary_baseline.cc):
// command-line handling, CPU pinning, per-size iteration counts, and the table
// and JSON Lines output. What each floor measures stays in its own file.

#ifndef PSBENCH_BENCH_FLOORS_FLOOR_COMMON_H_
#define PSBENCH_BENCH_FLOORS_FLOOR_COMMON_H_

#include <netinet/in.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/declare.h"
#include "nlohmann/json_fwd.hpp"

// Each program defines these flags itself (ABSL_FLAG) so that --help shows its
// own help texts under its own file; the shared code below reads them.
ABSL_DECLARE_FLAG(bool, server);
ABSL_DECLARE_FLAG(int32_t, port);
ABSL_DECLARE_FLAG(std::string, connect);
ABSL_DECLARE_FLAG(std::string, test);
ABSL_DECLARE_FLAG(std::string, size);
ABSL_DECLARE_FLAG(std::string, sizes);
ABSL_DECLARE_FLAG(int64_t, iterations);
ABSL_DECLARE_FLAG(int64_t, warmup);
ABSL_DECLARE_FLAG(int32_t, window);
ABSL_DECLARE_FLAG(std::string, json);
ABSL_DECLARE_FLAG(std::string, cpu);

namespace psbench::floors {

// Largest message either floor accepts, on the command line or off the wire.
constexpr uint64_t kMaxSize = uint64_t{1} << 30;

// Prints "PROGRAM: msg" on stderr and exits 2 (usage) or 1 (run-time failure).
[[noreturn]] void usage_error(const std::string& msg);
[[noreturn]] void fatal(const std::string& msg);
std::string errno_str();

struct Program {
  std::string_view name;         // prefix of every error line, e.g. "psbench-floor-tcp"
  std::string_view source_file;  // --help lists the flags defined in this file
  std::string_view usage;        // one-line usage message for --help
};

enum class Role { kServer, kClient };

// Parses argv so that every usage error prints one line and exits 2 (absl alone
// would exit 1 on some), and returns which of --server / --connect was given.
Role parse_command_line(int argc, char** argv, const Program& program);

// Pins the process to a CPU list like "0", "0,1", "0-1" or "0-3,6"; "" does nothing.
void pin_cpus(const std::string& list);

// --port, checked to be 0..65535.
int32_t server_port_from_flags();

// The first stdout line of every server; run_floors.sh reads the port from it.
void announce_listening(int port);

// The client flags, validated (a usage error exits 2). --json is opened by
// Results and --cpu applied by pin_cpus, both by the caller.
struct ClientOptions {
  std::string address;  // --connect as given
  sockaddr_in server;   // --connect, parsed; always a 127.0.0.0/8 address
  std::string test;     // "pingpong" or "stream"
  bool pingpong;
  std::vector<uint64_t> sizes;
  int64_t iterations;  // 0 = per-size default
  int64_t warmup;      // -1 = 10% of iterations
  int32_t window;
  std::string cpu;
  std::string json_path;  // "" = no JSON output
};
ClientOptions client_options_from_flags();

// How many messages one size runs.
struct SizeRun {
  uint64_t size;
  int64_t iterations;  // measured
  int64_t warmup;      // untimed, sent first
};
SizeRun plan_size(const ClientOptions& opts, uint64_t size);

// Fills a payload with a fixed, non-zero byte pattern, so an echo that comes
// back zeroed or shifted fails the comparison.
void fill_payload(char* data, uint64_t size);

// One client run's output: a table header on stdout, then per size one table
// row and, with --json, one JSON Lines record.
class Results {
 public:
  // tool: the records' "tool" field; title: the floor's name in the table header.
  // Opens --json for appending; failing to is a usage error.
  Results(std::string_view tool, std::string_view title, const ClientOptions& opts);

  void print_header() const;
  // Pingpong: the measured iterations' round trips in ns (sorted in place).
  void add_latency(const SizeRun& run, std::vector<int64_t>& round_trip_ns);
  // Stream: wall time of all the measured iterations.
  void add_throughput(const SizeRun& run, double seconds);

 private:
  nlohmann::json base_record(const SizeRun& run) const;
  void finish_size(const nlohmann::json& record);

  std::string tool_;
  std::string title_;
  std::string test_;
  bool pingpong_;
  int32_t window_;
  std::string cpu_;
  std::ofstream json_;
};

}  // namespace psbench::floors

#endif  // PSBENCH_BENCH_FLOORS_FLOOR_COMMON_H_
