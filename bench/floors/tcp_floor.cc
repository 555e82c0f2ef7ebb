// psbench-floor-tcp: the plain-TCP floor that psbench's transports are compared
// against. Blocking sockets, TCP_NODELAY, 8-byte length prefix + payload, no
// serialization and no copies beyond the kernel's. Deliberately standalone so
// a reader can audit everything the floor does in one file.
//
//   psbench-floor-tcp --server --port=0 [--once] [--cpu=0]
//   psbench-floor-tcp --connect=127.0.0.1:P --test=pingpong|stream
//                     --size=N | --sizes=MIN:MAX [--iterations=N] [--warmup=N]
//                     [--window=16] [--json=FILE] [--cpu=1]

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
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
#include "fmt/core.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(bool, server, false, "Run as the server (echo for pingpong, ack for stream).");
ABSL_FLAG(int32_t, port, 0, "Server: port on 127.0.0.1 (0 = any free port; always printed).");
ABSL_FLAG(bool, once, false, "Server: exit after the first client disconnects.");
ABSL_FLAG(std::string, connect, "", "Client: server address HOST:PORT (loopback only).");
ABSL_FLAG(std::string, test, "pingpong", "Client: pingpong or stream.");
ABSL_FLAG(std::string, size, "", "Client: message size in bytes; K/M/G suffixes are binary.");
ABSL_FLAG(std::string, sizes, "", "Client: MIN:MAX doubling sweep (instead of --size).");
ABSL_FLAG(int64_t, iterations, 0,
          "Client: measured messages per size (0 = pingpong 10000 up to 64K else 1000; "
          "stream 2000 below 1M else 500).");
ABSL_FLAG(int64_t, warmup, -1, "Client: untimed messages per size first (-1 = 10% of iterations).");
ABSL_FLAG(int32_t, window, 16, "Client, stream: most messages left unacknowledged.");
ABSL_FLAG(std::string, json, "", "Client: append one JSON Lines record per size to FILE.");
ABSL_FLAG(std::string, cpu, "", "Pin the process to these CPUs: 0, 0,1 or 0-1.");

namespace {

constexpr std::string_view kProg = "psbench-floor-tcp";
constexpr uint64_t kMaxSize = uint64_t{1} << 30;  // refuse absurd lengths off the wire
constexpr uint32_t kHelloMagic = 0x4c465350;      // "PSFL"
enum class Mode : uint32_t { kPingpong = 1, kStream = 2 };
struct Hello {
  uint32_t magic;
  uint32_t mode;
};

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

// ---- socket I/O ------------------------------------------------------------

volatile sig_atomic_t g_stop = 0;
volatile sig_atomic_t g_listen_fd = -1;
volatile sig_atomic_t g_conn_fd = -1;

// shutdown() is async-signal-safe and wakes a blocked accept()/recv(), which
// closes the race between checking g_stop and entering the syscall.
void on_stop_signal(int) {
  g_stop = 1;
  if (g_conn_fd >= 0) shutdown(g_conn_fd, SHUT_RDWR);
  if (g_listen_fd >= 0) shutdown(g_listen_fd, SHUT_RDWR);
}

enum class Io { kOk, kEof, kError };

Io write_all(int fd, iovec* iov, int cnt) {
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = static_cast<size_t>(cnt);
  while (msg.msg_iovlen > 0) {
    ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR && !g_stop) continue;
      return Io::kError;
    }
    // Blocking sockets rarely write short, but a signal can interrupt a large send.
    while (msg.msg_iovlen > 0 && static_cast<size_t>(n) >= msg.msg_iov->iov_len) {
      n -= static_cast<ssize_t>(msg.msg_iov->iov_len);
      ++msg.msg_iov;
      --msg.msg_iovlen;
    }
    if (msg.msg_iovlen > 0) {
      msg.msg_iov->iov_base = static_cast<char*>(msg.msg_iov->iov_base) + n;
      msg.msg_iov->iov_len -= static_cast<size_t>(n);
    }
  }
  return Io::kOk;
}

// Returns kEof only when the peer closed before sending any byte of it.
Io read_exact(int fd, void* buf, size_t len) {
  size_t got = 0;
  while (got < len) {
    ssize_t n = recv(fd, static_cast<char*>(buf) + got, len - got, MSG_WAITALL);
    if (n < 0) {
      if (errno == EINTR && !g_stop) continue;
      return Io::kError;
    }
    if (n == 0) {
      errno = ECONNRESET;  // closed mid-message
      return got == 0 ? Io::kEof : Io::kError;
    }
    got += static_cast<size_t>(n);
  }
  return Io::kOk;
}

Io send_frame(int fd, const char* data, uint64_t len) {
  iovec iov[2] = {{&len, sizeof(len)}, {const_cast<char*>(data), len}};
  return write_all(fd, iov, 2);
}

// Receive buffer that grows to the largest frame seen and is then reused.
struct Buffer {
  std::unique_ptr<char[]> data;
  uint64_t cap = 0;
  void reserve(uint64_t n, uint64_t keep) {
    if (n <= cap) return;
    auto bigger = std::make_unique<char[]>(n);
    if (keep > 0) std::memcpy(bigger.get(), data.get(), keep);
    data = std::move(bigger);
    cap = n;
  }
};

// Reads one frame into buf, setting len. With `greedy` the first readv also
// takes payload bytes straight into buf, saving a syscall per message; that is
// only safe when at most one frame is in flight (pingpong), otherwise it could
// swallow the next frame.
Io read_frame(int fd, Buffer& buf, uint64_t& len, bool greedy) {
  uint64_t hdr = 0;
  size_t got = 0;  // header + payload bytes received so far
  while (got < sizeof(hdr)) {
    iovec iov[2] = {{reinterpret_cast<char*>(&hdr) + got, sizeof(hdr) - got}, {buf.data.get(), buf.cap}};
    ssize_t n = readv(fd, iov, greedy && buf.cap > 0 ? 2 : 1);
    if (n < 0) {
      if (errno == EINTR && !g_stop) continue;
      return Io::kError;
    }
    if (n == 0) {
      errno = ECONNRESET;  // closed mid-message
      return got == 0 ? Io::kEof : Io::kError;
    }
    got += static_cast<size_t>(n);
  }
  len = hdr;
  const uint64_t have = got - sizeof(hdr);
  if (len > kMaxSize || have > len) {
    errno = EPROTO;
    return Io::kError;
  }
  buf.reserve(len, have);
  if (len == have) return Io::kOk;
  const Io rest = read_exact(fd, buf.data.get() + have, len - have);
  return rest == Io::kEof ? Io::kError : rest;  // EOF inside a frame is an error
}

// ---- server ----------------------------------------------------------------

// Serves one connection until the client closes it. Returns false on error.
bool serve_connection(int fd) {
  Hello hello{};
  Io io = read_exact(fd, &hello, sizeof(hello));
  if (io == Io::kEof) return true;
  if (io != Io::kOk || hello.magic != kHelloMagic ||
      (hello.mode != static_cast<uint32_t>(Mode::kPingpong) && hello.mode != static_cast<uint32_t>(Mode::kStream))) {
    fmt::print(stderr, "{}: bad handshake from client\n", kProg);
    return false;
  }
  const bool pingpong = hello.mode == static_cast<uint32_t>(Mode::kPingpong);
  Buffer buf;
  while (true) {
    uint64_t len = 0;
    io = read_frame(fd, buf, len, pingpong);
    if (io == Io::kEof) return true;
    if (io == Io::kOk) {
      if (pingpong) {
        io = send_frame(fd, buf.data.get(), len);
      } else {
        iovec ack{&len, sizeof(len)};  // the ack is the bare 8-byte length just received
        io = write_all(fd, &ack, 1);
      }
    }
    if (io != Io::kOk) {
      if (!g_stop) fmt::print(stderr, "{}: connection error: {}\n", kProg, errno_str());
      return false;
    }
  }
}

int run_server() {
  const int32_t port = absl::GetFlag(FLAGS_port);
  if (port < 0 || port > 65535) usage_error(fmt::format("bad --port={}: must be 0..65535", port));
  pin_cpus(absl::GetFlag(FLAGS_cpu));

  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;  // no SA_RESTART: blocked syscalls must return
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  const int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd < 0) fatal(fmt::format("socket: {}", errno_str()));
  const int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(lfd, 16) != 0)
    fatal(fmt::format("cannot listen on 127.0.0.1:{}: {}", port, errno_str()));
  socklen_t alen = sizeof(addr);
  getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &alen);
  fmt::print("listening on 127.0.0.1:{}\n", ntohs(addr.sin_port));
  std::fflush(stdout);  // a script reads the port from this line
  g_listen_fd = lfd;

  while (!g_stop) {
    const int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (g_stop) break;
      if (errno == EINTR || errno == ECONNABORTED) continue;
      fatal(fmt::format("accept: {}", errno_str()));
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    g_conn_fd = fd;
    if (!g_stop) serve_connection(fd);
    g_conn_fd = -1;
    close(fd);
    if (absl::GetFlag(FLAGS_once)) break;
  }
  g_listen_fd = -1;
  close(lfd);
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
  const sockaddr_in server = parse_loopback(absl::GetFlag(FLAGS_connect));
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

  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fatal(fmt::format("socket: {}", errno_str()));
  if (connect(fd, reinterpret_cast<const sockaddr*>(&server), sizeof(server)) != 0)
    usage_error(fmt::format("cannot connect to {}: {}", absl::GetFlag(FLAGS_connect), errno_str()));
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  auto check = [&](Io io, std::string_view what) {
    if (io == Io::kEof) fatal(fmt::format("{}: server closed the connection", what));
    if (io != Io::kOk) fatal(fmt::format("{}: {}", what, errno_str()));
  };
  Hello hello{kHelloMagic, static_cast<uint32_t>(pingpong ? Mode::kPingpong : Mode::kStream)};
  iovec hiov{&hello, sizeof(hello)};
  check(write_all(fd, &hiov, 1), "handshake");

  const uint64_t max_size = *std::max_element(sizes.begin(), sizes.end());
  auto payload = std::make_unique<char[]>(max_size);
  for (uint64_t i = 0; i < max_size; ++i) payload[i] = static_cast<char>(i * 131 + 7);
  Buffer rbuf;
  rbuf.reserve(max_size, 0);  // preallocated and touched so no page faults are timed
  std::memset(rbuf.data.get(), 0, max_size);

  if (pingpong) {
    fmt::print("# psbench TCP floor pingpong\n# {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "bytes",
               "iterations", "min_us", "p50_us", "p90_us", "p99_us", "max_us", "mean_us");
  } else {
    fmt::print("# psbench TCP floor stream (window {})\n# {:>10} {:>10} {:>12} {:>12}\n", window, "bytes", "iterations",
               "MB/s", "msgs/s");
  }
  std::fflush(stdout);

  for (const uint64_t size : sizes) {
    const int64_t iters = iterations_flag > 0
                              ? iterations_flag
                              : (pingpong ? (size <= (64u << 10) ? 10000 : 1000) : (size < (1u << 20) ? 2000 : 500));
    const int64_t warmup = warmup_flag >= 0 ? warmup_flag : iters / 10;
    nlohmann::json rec = {
        {"tool", "tcp-floor"}, {"test", test}, {"bytes", size}, {"iterations", iters}, {"warmup", warmup}};
    if (!cpu.empty()) rec["cpu"] = cpu;

    if (pingpong) {
      std::vector<int64_t> rtt;
      rtt.reserve(static_cast<size_t>(iters));
      for (int64_t i = 0; i < warmup + iters; ++i) {
        uint64_t len = 0;
        const auto t0 = std::chrono::steady_clock::now();
        check(send_frame(fd, payload.get(), size), "send");
        check(read_frame(fd, rbuf, len, /*greedy=*/true), "receive");
        const auto t1 = std::chrono::steady_clock::now();
        if (len != size) fatal(fmt::format("echo of {} bytes came back as {}", size, len));
        if (i >= warmup) rtt.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
      }
      if (std::memcmp(rbuf.data.get(), payload.get(), size) != 0) fatal("echoed payload differs");
      const Stats s = summarize(rtt);
      fmt::print("  {:>10} {:>10} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f}\n", size, iters, s.min,
                 s.p50, s.p90, s.p99, s.max, s.mean);
      rec["latency_us"] = {{"min", s.min}, {"p50", s.p50}, {"p90", s.p90},
                           {"p99", s.p99}, {"max", s.max}, {"mean", s.mean}};
    } else {
      // Single thread, interleaved: send until `window` are unacknowledged, then
      // block for one ack. Acks are 8 bytes so the server never blocks on them.
      auto batch = [&](int64_t count) {
        int64_t outstanding = 0;
        auto take_ack = [&] {
          uint64_t ack = 0;
          check(read_exact(fd, &ack, sizeof(ack)), "receive ack");
          if (ack != size) fatal(fmt::format("ack for {} bytes said {}", size, ack));
          --outstanding;
        };
        for (int64_t i = 0; i < count; ++i) {
          if (outstanding == window) take_ack();
          check(send_frame(fd, payload.get(), size), "send");
          ++outstanding;
        }
        while (outstanding > 0) take_ack();
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
  close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "plain-TCP floor. Server: --server [--port=P] [--once] [--cpu=L]. Client: --connect=127.0.0.1:P "
      "--test=pingpong|stream --size=N|--sizes=MIN:MAX [--iterations=N] [--warmup=N] [--window=W] "
      "[--json=FILE] [--cpu=L]");
  absl::FlagsUsageConfig usage;  // --help lists this file's flags (binary and file names differ)
  usage.contains_help_flags = [](absl::string_view file) {
    return std::string_view(file.data(), file.size()).ends_with("tcp_floor.cc");
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
