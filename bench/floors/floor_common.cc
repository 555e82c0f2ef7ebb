#include "floor_common.h"

#include <arpa/inet.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "absl/flags/flag.h"
#include "absl/flags/marshalling.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "bench/floors/floor_limits.h"
#include "bench/process/alloc_policy.h"
#include "bench/process/mutex_policy.h"
#include "fmt/core.h"
#include "nlohmann/json.hpp"

namespace psbench::floors {
namespace {

std::string g_program_name;  // set once, first thing, by parse_command_line

// ---- command line ------------------------------------------------------------

// absl's built-in --help*/--flagfile family is not in the flag registry.
bool is_builtin_bool_flag(std::string_view name) {
  static constexpr std::string_view kNames[] = {"help",        "helpfull", "helpshort",
                                                "helppackage", "version",  "only_check_args"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}
bool is_builtin_value_flag(std::string_view name) {
  static constexpr std::string_view kNames[] = {"helpon", "helpmatch", "flagfile", "fromenv", "tryfromenv", "undefok"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

// Whether absl would accept `value` for `flag`; only the typed flags can fail.
bool parses_as_flag_type(const absl::CommandLineFlag& flag, const std::string& value, std::string& err) {
  if (flag.IsOfType<bool>()) {
    bool v;
    return absl::ParseFlag(value, &v, &err);
  }
  if (flag.IsOfType<int32_t>()) {
    int32_t v;
    return absl::ParseFlag(value, &v, &err);
  }
  if (flag.IsOfType<int64_t>()) {
    int64_t v;
    return absl::ParseFlag(value, &v, &err);
  }
  return true;
}

// absl exits 1 on an unknown flag or unparsable value; every usage error here
// must exit 2, so check names and typed values before absl sees them.
void prescan_flags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;  // positional: rejected later
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    const auto eq = arg.find('=');
    const std::string name(arg.substr(0, eq));
    if (is_builtin_bool_flag(name)) continue;  // let absl handle it
    if (is_builtin_value_flag(name)) {
      if (eq == std::string_view::npos) ++i;
      continue;
    }
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && name.starts_with("no")) {
      flag = absl::FindCommandLineFlag(name.substr(2));
      if (flag == nullptr || !flag->IsOfType<bool>() || eq != std::string_view::npos)
        usage_error(fmt::format("unknown flag --{}", name));
      continue;
    }
    if (flag == nullptr) usage_error(fmt::format("unknown flag --{}", name));
    std::string value;
    if (eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
    } else if (flag->IsOfType<bool>()) {
      continue;
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      usage_error(fmt::format("flag --{} needs a value", name));
    }
    std::string err;
    if (!parses_as_flag_type(*flag, value, err))
      usage_error(fmt::format("bad value '{}' for --{}{}", value, name, err.empty() ? "" : ": " + err));
  }
}

// ---- sizes -------------------------------------------------------------------

// Plain integer with an optional binary K/M/G suffix.
std::optional<uint64_t> parse_size(std::string_view s) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p == s.data()) return std::nullopt;
  std::string_view suffix(p, s.data() + s.size() - p);
  int shift = 0;
  if (suffix == "K" || suffix == "k")
    shift = 10;
  else if (suffix == "M" || suffix == "m")
    shift = 20;
  else if (suffix == "G" || suffix == "g")
    shift = 30;
  else if (!suffix.empty())
    return std::nullopt;
  if (v > (UINT64_MAX >> shift)) return std::nullopt;
  return v << shift;
}

uint64_t checked_size(std::string_view s, std::string_view what) {
  auto v = parse_size(s);
  if (!v) usage_error(fmt::format("bad size '{}' for {} (integer, optional K/M/G)", s, what));
  if (*v == 0) usage_error(fmt::format("{} must be at least 1 byte", what));
  if (*v > kMaxSize) usage_error(fmt::format("{} {} exceeds the 1G limit", what, *v));
  return *v;
}

// --size=N, or --sizes=MIN:MAX doubling from MIN while <= MAX.
std::vector<uint64_t> sizes_from_flags() {
  const std::string size = absl::GetFlag(FLAGS_size);
  const std::string sweep = absl::GetFlag(FLAGS_sizes);
  if (!size.empty() && !sweep.empty()) usage_error("give either --size or --sizes, not both");
  if (!size.empty()) return {checked_size(size, "--size")};
  if (sweep.empty()) usage_error("one of --size=N or --sizes=MIN:MAX is required");
  const auto colon = sweep.find(':');
  if (colon == std::string::npos) usage_error(fmt::format("bad --sizes '{}': want MIN:MAX", sweep));
  const uint64_t lo = checked_size(std::string_view(sweep).substr(0, colon), "--sizes MIN");
  const uint64_t hi = checked_size(std::string_view(sweep).substr(colon + 1), "--sizes MAX");
  if (lo > hi) usage_error(fmt::format("bad --sizes '{}': MIN exceeds MAX", sweep));
  std::vector<uint64_t> out;
  for (uint64_t s = lo; s <= hi; s *= 2) out.push_back(s);
  return out;
}

// Defaults keep one run of every size to a few seconds on loopback.
int64_t default_iterations(bool pingpong, uint64_t size) {
  if (pingpong) return size <= (64u << 10) ? 10000 : 1000;
  return size < (1u << 20) ? 2000 : 500;
}

// ---- addresses ---------------------------------------------------------------

// HOST:PORT where HOST is "localhost" or an IPv4 literal in 127.0.0.0/8.
sockaddr_in parse_loopback(const std::string& addr) {
  const auto colon = addr.rfind(':');
  if (colon == std::string::npos) usage_error(fmt::format("bad address '{}': want HOST:PORT", addr));
  std::string host = addr.substr(0, colon);
  if (host == "localhost") host = "127.0.0.1";
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1 || (ntohl(sa.sin_addr.s_addr) >> 24) != 127)
    usage_error(fmt::format("bad address '{}': host must be IPv4 loopback (127.x.x.x or localhost){}", addr,
                            host.find(':') != std::string::npos ? "; the floors take no IPv6" : ""));
  const std::string_view port_s = std::string_view(addr).substr(colon + 1);
  int port = 0;
  auto [p, ec] = std::from_chars(port_s.data(), port_s.data() + port_s.size(), port);
  if (ec != std::errc{} || p != port_s.data() + port_s.size() || port < 1 || port > 65535)
    usage_error(fmt::format("bad address '{}': port must be 1..65535", addr));
  sa.sin_port = htons(static_cast<uint16_t>(port));
  return sa;
}

// ---- statistics --------------------------------------------------------------

struct LatencyStats {
  double min, p50, p90, p99, max, mean;  // microseconds
};

// Nearest-rank percentiles over per-iteration round trips.
LatencyStats summarize(std::vector<int64_t>& ns) {
  std::sort(ns.begin(), ns.end());
  auto pct = [&](double p) {
    size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(ns.size())));
    return static_cast<double>(ns[std::max<size_t>(rank, 1) - 1]) / 1e3;
  };
  double sum = 0;
  for (int64_t v : ns) sum += static_cast<double>(v);
  return {static_cast<double>(ns.front()) / 1e3,     pct(50), pct(90), pct(99), static_cast<double>(ns.back()) / 1e3,
          sum / static_cast<double>(ns.size()) / 1e3};
}

}  // namespace

// ---- errors ------------------------------------------------------------------

void usage_error(const std::string& msg) {
  fmt::print(stderr, "{}: {}\n", g_program_name, msg);
  std::exit(2);
}
void fatal(const std::string& msg) {
  fmt::print(stderr, "{}: {}\n", g_program_name, msg);
  std::exit(1);
}
std::string errno_str() { return std::strerror(errno); }

// ---- command line ------------------------------------------------------------

Role parse_command_line(int argc, char** argv, const Program& program) {
  psbench::FixAllocatorPolicy();  // as psbench's own processes, before any thread starts
  psbench::TurnOffMutexDeadlockDetection();
  g_program_name = program.name;
  absl::SetProgramUsageMessage(absl::string_view(program.usage.data(), program.usage.size()));
  absl::FlagsUsageConfig usage;  // --help lists the program's own flags (binary and file names differ)
  usage.contains_help_flags = [file = std::string(program.source_file)](absl::string_view f) {
    return std::string_view(f.data(), f.size()).ends_with(file);
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  prescan_flags(argc, argv);
  const std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) usage_error(fmt::format("unexpected argument '{}'", rest[1]));
  const bool server = absl::GetFlag(FLAGS_server);
  const bool client = !absl::GetFlag(FLAGS_connect).empty();
  if (server == client) usage_error("give exactly one of --server or --connect=HOST:PORT");
  return server ? Role::kServer : Role::kClient;
}

// Pinning before any thread exists makes every later thread inherit the mask.
void pin_cpus(const std::string& list) {
  if (list.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  std::string_view rest = list;
  auto num = [&](std::string_view t) {
    int v = -1;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc{} || p != t.data() + t.size() || v < 0 || v >= CPU_SETSIZE)
      usage_error(fmt::format("bad --cpu '{}': want e.g. 0, 0,1 or 0-1", list));
    return v;
  };
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const auto dash = item.find('-');
    const int a = num(item.substr(0, dash));
    const int b = dash == std::string_view::npos ? a : num(item.substr(dash + 1));
    if (a > b) usage_error(fmt::format("bad --cpu '{}': range runs backwards", list));
    for (int c = a; c <= b; ++c) CPU_SET(c, &set);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (sched_setaffinity(0, sizeof(set), &set) != 0)
    usage_error(fmt::format("cannot pin to --cpu={}: {}", list, errno_str()));
}

// ---- server ------------------------------------------------------------------

int32_t server_port_from_flags() {
  const int32_t port = absl::GetFlag(FLAGS_port);
  if (port < 0 || port > 65535) usage_error(fmt::format("bad --port={}: must be 0..65535", port));
  return port;
}

void announce_listening(int port) {
  fmt::print("listening on 127.0.0.1:{}\n", port);
  std::fflush(stdout);  // a script reads the port from this line
}

// ---- client ------------------------------------------------------------------

ClientOptions client_options_from_flags() {
  ClientOptions opts;
  opts.address = absl::GetFlag(FLAGS_connect);
  opts.server = parse_loopback(opts.address);
  opts.test = absl::GetFlag(FLAGS_test);
  if (opts.test != "pingpong" && opts.test != "stream")
    usage_error(fmt::format("unknown --test={}: want pingpong or stream", opts.test));
  opts.pingpong = opts.test == "pingpong";
  opts.sizes = sizes_from_flags();
  opts.iterations = absl::GetFlag(FLAGS_iterations);
  opts.warmup = absl::GetFlag(FLAGS_warmup);
  opts.window = absl::GetFlag(FLAGS_window);
  if (opts.iterations < 0 || opts.iterations > kMaxIterations) {
    usage_error(fmt::format("--iterations must be in [0, {}] (0 = default)", kMaxIterations));
  }
  if (opts.warmup < -1 || opts.warmup > kMaxIterations) {
    usage_error(fmt::format("--warmup must be in [0, {}] (or -1 = 10% of iterations)", kMaxIterations));
  }
  if (opts.window < 1 || opts.window > kMaxWindow) usage_error(fmt::format("--window must be in [1, {}]", kMaxWindow));
  opts.cpu = absl::GetFlag(FLAGS_cpu);
  opts.json_path = absl::GetFlag(FLAGS_json);
  return opts;
}

SizeRun plan_size(const ClientOptions& opts, uint64_t size) {
  const int64_t iterations = opts.iterations > 0 ? opts.iterations : default_iterations(opts.pingpong, size);
  const int64_t warmup = opts.warmup >= 0 ? opts.warmup : iterations / 10;
  return {size, iterations, warmup};
}

void fill_payload(char* data, uint64_t size) {
  for (uint64_t i = 0; i < size; ++i) data[i] = static_cast<char>(i * 131 + 7);
}

// ---- output ------------------------------------------------------------------

Results::Results(std::string_view tool, std::string_view title, const ClientOptions& opts)
    : tool_(tool), title_(title), test_(opts.test), pingpong_(opts.pingpong), window_(opts.window), cpu_(opts.cpu) {
  if (opts.json_path.empty()) return;
  json_.open(opts.json_path, std::ios::app);
  if (!json_) usage_error(fmt::format("cannot open --json={} for appending", opts.json_path));
}

void Results::print_header() const {
  if (pingpong_) {
    fmt::print("# psbench {} pingpong\n# {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n", title_, "bytes",
               "iterations", "min_us", "p50_us", "p90_us", "p99_us", "max_us", "mean_us");
  } else {
    fmt::print("# psbench {} stream (window {})\n# {:>10} {:>10} {:>12} {:>12}\n", title_, window_, "bytes",
               "iterations", "MB/s", "msgs/s");
  }
  std::fflush(stdout);
}

void Results::add_latency(const SizeRun& run, std::vector<int64_t>& round_trip_ns) {
  const LatencyStats s = summarize(round_trip_ns);
  fmt::print("  {:>10} {:>10} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f}\n", run.size, run.iterations,
             s.min, s.p50, s.p90, s.p99, s.max, s.mean);
  nlohmann::json rec = base_record(run);
  rec["latency_us"] = {{"min", s.min}, {"p50", s.p50}, {"p90", s.p90},
                       {"p99", s.p99}, {"max", s.max}, {"mean", s.mean}};
  finish_size(rec);
}

void Results::add_throughput(const SizeRun& run, double seconds) {
  const double mbps = static_cast<double>(run.size) * static_cast<double>(run.iterations) / seconds / 1e6;
  const double mps = static_cast<double>(run.iterations) / seconds;
  fmt::print("  {:>10} {:>10} {:>12.2f} {:>12.1f}\n", run.size, run.iterations, mbps, mps);
  nlohmann::json rec = base_record(run);
  rec["window"] = window_;
  rec["mb_per_s"] = mbps;
  rec["msgs_per_s"] = mps;
  finish_size(rec);
}

nlohmann::json Results::base_record(const SizeRun& run) const {
  nlohmann::json rec = {
      {"tool", tool_}, {"test", test_}, {"bytes", run.size}, {"iterations", run.iterations}, {"warmup", run.warmup},
      {"allocator", psbench::AllocatorPolicy()},
      {"mutex_deadlock_detection", psbench::MutexDeadlockDetection()}};
  if (!cpu_.empty()) rec["cpu"] = cpu_;
  return rec;
}

// Flushes the row before writing the record, so a reader of the table sees
// every size as soon as it is measured.
void Results::finish_size(const nlohmann::json& record) {
  std::fflush(stdout);
  if (!json_.is_open()) return;
  json_ << record.dump() << '\n';
  json_.flush();
  if (!json_) fatal("writing --json file failed");
}

}  // namespace psbench::floors
