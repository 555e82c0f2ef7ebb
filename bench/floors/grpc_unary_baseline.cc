// psbench-floor-grpc: "the simplest possible gRPC unary echo a user would
// write", the gRPC floor psbench is compared against. Synchronous server,
// synchronous stub with one ClientContext per call for pingpong, and for
// stream the plain async stub + CompletionQueue keeping --window Push calls in
// flight. No tuning beyond lifting the message size limits.
//
//   psbench-floor-grpc --server --port=0 [--once] [--cpu=0]
//   psbench-floor-grpc --connect=127.0.0.1:P --test=pingpong|stream
//                      --size=N | --sizes=MIN:MAX [--iterations=N] [--warmup=N]
//                      [--window=16] [--json=FILE] [--cpu=1]

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/marshalling.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "baseline.grpc.pb.h"
#include "baseline.pb.h"
#include "fmt/core.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(bool, server, false, "Run as the server (Echo for pingpong, Push for stream).");
ABSL_FLAG(int32_t, port, 0, "Server: port on 127.0.0.1 (0 = any free port; always printed).");
ABSL_FLAG(bool, once, false, "Server: exit after the first client says Bye.");
ABSL_FLAG(std::string, connect, "", "Client: server address HOST:PORT (loopback only).");
ABSL_FLAG(std::string, test, "pingpong", "Client: pingpong or stream.");
ABSL_FLAG(std::string, size, "", "Client: message size in bytes; K/M/G suffixes are binary.");
ABSL_FLAG(std::string, sizes, "", "Client: MIN:MAX doubling sweep (instead of --size).");
ABSL_FLAG(int64_t, iterations, 0,
          "Client: measured calls per size (0 = pingpong 10000 up to 64K else 1000; "
          "stream 2000 below 1M else 500).");
ABSL_FLAG(int64_t, warmup, -1, "Client: untimed calls per size first (-1 = 10% of iterations).");
ABSL_FLAG(int32_t, window, 16, "Client, stream: most Push calls in flight.");
ABSL_FLAG(std::string, json, "", "Client: append one JSON Lines record per size to FILE.");
ABSL_FLAG(std::string, cpu, "", "Pin the process to these CPUs: 0, 0,1 or 0-1.");

namespace {

using psbench::floor::Ack;
using psbench::floor::Baseline;
using psbench::floor::Blob;

constexpr std::string_view kProg = "psbench-floor-grpc";
constexpr uint64_t kMaxSize = uint64_t{1} << 30;

[[noreturn]] void usage_error(const std::string& msg) {
  fmt::print(stderr, "{}: {}\n", kProg, msg);
  std::exit(2);
}
[[noreturn]] void fatal(const std::string& msg) {
  fmt::print(stderr, "{}: {}\n", kProg, msg);
  std::exit(1);
}
std::string errno_str() { return std::strerror(errno); }

// ---- flag handling (identical in both floors) ------------------------------

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
    // absl's built-in --help*/--flagfile family is not in the registry; let absl handle it.
    static constexpr std::string_view kBuiltinBool[] = {"help",        "helpfull", "helpshort",
                                                        "helppackage", "version",  "only_check_args"};
    static constexpr std::string_view kBuiltinValue[] = {"helpon",  "helpmatch",  "flagfile",
                                                         "fromenv", "tryfromenv", "undefok"};
    if (std::find(std::begin(kBuiltinBool), std::end(kBuiltinBool), name) != std::end(kBuiltinBool)) continue;
    if (std::find(std::begin(kBuiltinValue), std::end(kBuiltinValue), name) != std::end(kBuiltinValue)) {
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
    bool ok = true;
    if (flag->IsOfType<bool>()) {
      bool v;
      ok = absl::ParseFlag(value, &v, &err);
    } else if (flag->IsOfType<int32_t>()) {
      int32_t v;
      ok = absl::ParseFlag(value, &v, &err);
    } else if (flag->IsOfType<int64_t>()) {
      int64_t v;
      ok = absl::ParseFlag(value, &v, &err);
    }
    if (!ok) usage_error(fmt::format("bad value '{}' for --{}{}", value, name, err.empty() ? "" : ": " + err));
  }
}

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

// Accepts "0", "0,1", "0-1", "0-3,6". Pinning before any thread exists makes
// every later thread inherit the mask.
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

// HOST:PORT where HOST is "localhost" or an IPv4 literal in 127.0.0.0/8.
sockaddr_in parse_loopback(const std::string& addr) {
  const auto colon = addr.rfind(':');
  if (colon == std::string::npos) usage_error(fmt::format("bad address '{}': want HOST:PORT", addr));
  std::string host = addr.substr(0, colon);
  if (host == "localhost") host = "127.0.0.1";
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1 || (ntohl(sa.sin_addr.s_addr) >> 24) != 127)
    usage_error(fmt::format("bad address '{}': host must be loopback (127.x.x.x or localhost)", addr));
  const std::string_view port_s = std::string_view(addr).substr(colon + 1);
  int port = 0;
  auto [p, ec] = std::from_chars(port_s.data(), port_s.data() + port_s.size(), port);
  if (ec != std::errc{} || p != port_s.data() + port_s.size() || port < 1 || port > 65535)
    usage_error(fmt::format("bad address '{}': port must be 1..65535", addr));
  sa.sin_port = htons(static_cast<uint16_t>(port));
  return sa;
}

// ---- server ----------------------------------------------------------------

class BaselineService final : public Baseline::Service {
 public:
  explicit BaselineService(bool once) : once_(once) {}

  grpc::Status Echo(grpc::ServerContext*, const Blob* request, Blob* response) override {
    response->set_data(request->data());
    return grpc::Status::OK;
  }
  grpc::Status Push(grpc::ServerContext*, const Blob*, Ack*) override { return grpc::Status::OK; }
  grpc::Status Bye(grpc::ServerContext*, const Ack*, Ack*) override {
    // Shutdown() from inside a handler would wait on this very call, so hand
    // the exit to main's sigwait instead.
    if (once_) kill(getpid(), SIGUSR1);
    return grpc::Status::OK;
  }

 private:
  bool once_;
};

int run_server() {
  const int32_t port = absl::GetFlag(FLAGS_port);
  if (port < 0 || port > 65535) usage_error(fmt::format("bad --port={}: must be 0..65535", port));
  pin_cpus(absl::GetFlag(FLAGS_cpu));

  // Block the stop signals before gRPC starts threads (they inherit the mask),
  // so only main's sigwait ever sees them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  BaselineService service(absl::GetFlag(FLAGS_once));
  grpc::ServerBuilder builder;
  int selected_port = 0;
  builder.AddListeningPort(fmt::format("127.0.0.1:{}", port), grpc::InsecureServerCredentials(), &selected_port);
  builder.SetMaxReceiveMessageSize(INT_MAX);
  builder.SetMaxSendMessageSize(INT_MAX);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a busy port must fail, not be shared
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || selected_port == 0) fatal(fmt::format("cannot listen on 127.0.0.1:{}", port));
  fmt::print("listening on 127.0.0.1:{}\n", selected_port);
  std::fflush(stdout);  // a script reads the port from this line

  int sig = 0;
  sigwait(&stop, &sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server->Wait();
  return 0;
}

// ---- client ----------------------------------------------------------------

struct Stats {
  double min, p50, p90, p99, max, mean;
};

// Nearest-rank percentiles over per-iteration round trips, in microseconds.
Stats summarize(std::vector<int64_t>& ns) {
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

int run_client() {
  const sockaddr_in addr = parse_loopback(absl::GetFlag(FLAGS_connect));
  const std::string target = fmt::format("{}:{}", inet_ntoa(addr.sin_addr), ntohs(addr.sin_port));
  const std::string test = absl::GetFlag(FLAGS_test);
  if (test != "pingpong" && test != "stream")
    usage_error(fmt::format("unknown --test={}: want pingpong or stream", test));
  const bool pingpong = test == "pingpong";
  const std::vector<uint64_t> sizes = sizes_from_flags();
  const int64_t iterations_flag = absl::GetFlag(FLAGS_iterations);
  const int64_t warmup_flag = absl::GetFlag(FLAGS_warmup);
  const int32_t window = absl::GetFlag(FLAGS_window);
  if (iterations_flag < 0) usage_error("--iterations must be >= 0 (0 = default)");
  if (warmup_flag < -1) usage_error("--warmup must be >= 0 (or -1 = 10% of iterations)");
  if (window < 1) usage_error("--window must be >= 1");
  const std::string cpu = absl::GetFlag(FLAGS_cpu);
  std::ofstream json;
  if (const std::string path = absl::GetFlag(FLAGS_json); !path.empty()) {
    json.open(path, std::ios::app);
    if (!json) usage_error(fmt::format("cannot open --json={} for appending", path));
  }
  pin_cpus(cpu);

  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  // Connecting up front keeps connection setup out of the warmup and turns a
  // refused connection into a usage error rather than a failed first call.
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(5);
  for (auto state = channel->GetState(true); state != GRPC_CHANNEL_READY; state = channel->GetState(true)) {
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) usage_error(fmt::format("cannot connect to {}", target));
    if (!channel->WaitForStateChange(state, deadline))
      usage_error(fmt::format("cannot connect to {}: timed out", target));
  }
  std::unique_ptr<Baseline::Stub> stub = Baseline::NewStub(channel);
  grpc::CompletionQueue cq;

  if (pingpong) {
    fmt::print("# psbench gRPC unary baseline pingpong\n# {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
               "bytes", "iterations", "min_us", "p50_us", "p90_us", "p99_us", "max_us", "mean_us");
  } else {
    fmt::print("# psbench gRPC unary baseline stream (window {})\n# {:>10} {:>10} {:>12} {:>12}\n", window, "bytes",
               "iterations", "MB/s", "msgs/s");
  }
  std::fflush(stdout);

  for (const uint64_t size : sizes) {
    const int64_t iters = iterations_flag > 0
                              ? iterations_flag
                              : (pingpong ? (size <= (64u << 10) ? 10000 : 1000) : (size < (1u << 20) ? 2000 : 500));
    const int64_t warmup = warmup_flag >= 0 ? warmup_flag : iters / 10;
    nlohmann::json rec = {
        {"tool", "grpc-unary-baseline"}, {"test", test}, {"bytes", size}, {"iterations", iters}, {"warmup", warmup}};
    if (!cpu.empty()) rec["cpu"] = cpu;

    // Built once per size, as a user would; each call still serializes it.
    Blob request;
    std::string payload(size, '\0');
    for (uint64_t i = 0; i < size; ++i) payload[i] = static_cast<char>(i * 131 + 7);
    request.set_data(payload);

    if (pingpong) {
      std::vector<int64_t> rtt;
      rtt.reserve(static_cast<size_t>(iters));
      Blob last;
      for (int64_t i = 0; i < warmup + iters; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        grpc::ClientContext ctx;
        Blob response;
        const grpc::Status status = stub->Echo(&ctx, request, &response);
        const auto t1 = std::chrono::steady_clock::now();
        if (!status.ok()) fatal(fmt::format("Echo failed: {} ({})", status.error_message(), int(status.error_code())));
        if (response.data().size() != size)
          fatal(fmt::format("echo of {} bytes came back as {}", size, response.data().size()));
        if (i >= warmup) rtt.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
        if (i + 1 == warmup + iters) last = std::move(response);
      }
      if (last.data() != payload) fatal("echoed payload differs");
      const Stats s = summarize(rtt);
      fmt::print("  {:>10} {:>10} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f}\n", size, iters, s.min,
                 s.p50, s.p90, s.p99, s.max, s.mean);
      rec["latency_us"] = {{"min", s.min}, {"p50", s.p50}, {"p90", s.p90},
                           {"p99", s.p99}, {"max", s.max}, {"mean", s.mean}};
    } else {
      struct PushCall {
        grpc::ClientContext ctx;
        Ack ack;
        grpc::Status status;
        std::unique_ptr<grpc::ClientAsyncResponseReader<Ack>> rpc;
      };
      auto start = [&] {
        auto* call = new PushCall;
        call->rpc = stub->AsyncPush(&call->ctx, request, &cq);
        call->rpc->Finish(&call->ack, &call->status, call);
      };
      // Keep `window` calls in flight: start one more as each completes.
      auto batch = [&](int64_t count) {
        int64_t started = 0;
        for (; started < std::min<int64_t>(window, count); ++started) start();
        for (int64_t done = 0; done < count; ++done) {
          void* tag = nullptr;
          bool ok = false;
          if (!cq.Next(&tag, &ok)) fatal("completion queue shut down");
          std::unique_ptr<PushCall> call(static_cast<PushCall*>(tag));
          if (!ok || !call->status.ok())
            fatal(fmt::format("Push failed: {} ({})", call->status.error_message(), int(call->status.error_code())));
          if (started < count) {
            start();
            ++started;
          }
        }
      };
      batch(warmup);
      const auto t0 = std::chrono::steady_clock::now();
      batch(iters);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double mbps = static_cast<double>(size) * static_cast<double>(iters) / secs / 1e6;
      const double mps = static_cast<double>(iters) / secs;
      fmt::print("  {:>10} {:>10} {:>12.2f} {:>12.1f}\n", size, iters, mbps, mps);
      rec["window"] = window;
      rec["mb_per_s"] = mbps;
      rec["msgs_per_s"] = mps;
    }
    std::fflush(stdout);
    if (json.is_open()) {
      json << rec.dump() << '\n';
      json.flush();
      if (!json) fatal("writing --json file failed");
    }
  }

  grpc::ClientContext bye_ctx;  // best effort; only a --once server cares
  Ack bye;
  stub->Bye(&bye_ctx, Ack(), &bye);
  cq.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq.Next(&tag, &ok)) {
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "gRPC unary baseline floor. Server: --server [--port=P] [--once] [--cpu=L]. Client: --connect=127.0.0.1:P "
      "--test=pingpong|stream --size=N|--sizes=MIN:MAX [--iterations=N] [--warmup=N] [--window=W] "
      "[--json=FILE] [--cpu=L]");
  absl::FlagsUsageConfig usage;  // --help lists this file's flags (binary and file names differ)
  usage.contains_help_flags = [](absl::string_view file) {
    return std::string_view(file.data(), file.size()).ends_with("grpc_unary_baseline.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  prescan_flags(argc, argv);
  const std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) usage_error(fmt::format("unexpected argument '{}'", rest[1]));
  const bool server = absl::GetFlag(FLAGS_server);
  const bool client = !absl::GetFlag(FLAGS_connect).empty();
  if (server == client) usage_error("give exactly one of --server or --connect=HOST:PORT");
  return server ? run_server() : run_client();
}
