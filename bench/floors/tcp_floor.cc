// psbench-floor-tcp: the plain-TCP floor that psbench's transports are compared
// against. Blocking sockets, TCP_NODELAY, 8-byte length prefix + payload, no
// serialization and no copies beyond the kernel's. Everything the floor does
// on the wire is in this file; floor_common.h holds only the flag handling and
// result output it shares with the gRPC floor.
//
//   psbench-floor-tcp --server --port=0 [--once] [--cpu=0]
//   psbench-floor-tcp --connect=127.0.0.1:P --test=pingpong|stream
//                     --size=N | --sizes=MIN:MAX [--iterations=N] [--warmup=N]
//                     [--window=16] [--json=FILE] [--cpu=1]

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/flag.h"
#include "floor_common.h"
#include "fmt/core.h"

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

namespace floors = psbench::floors;

namespace {

using floors::errno_str;
using floors::fatal;
using floors::kMaxSize;  // also refuses absurd lengths off the wire
using floors::usage_error;

constexpr std::string_view kProg = "psbench-floor-tcp";
constexpr uint32_t kHelloMagic = 0x4c465350;  // "PSFL"
enum class Mode : uint32_t { kPingpong = 1, kStream = 2 };
// The server echoes the Hello: a client dialling something else hears nothing back.
struct Hello {
  uint32_t magic;
  uint32_t mode;
};

// ---- socket I/O ------------------------------------------------------------

// The server drops a connection that sends no hello within kIdle (one that never speaks must
// not hold the serial accept loop), and a client whose hello is not echoed within
// kHandshake gives up (it may be queued behind such a connection: it waits that out). Once
// running, either side waits kRunWait for the other, far above any pause of a live run (a
// client sorts up to 1e8 round trips between sizes).
constexpr int kIdleSeconds = 5;
constexpr int kHandshakeSeconds = kIdleSeconds + 2;
constexpr int kRunWaitSeconds = 120;

void set_timeouts(int fd, int seconds) {
  timeval tv{seconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

bool timed_out() { return errno == EAGAIN || errno == EWOULDBLOCK; }

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

// What a failed read (n <= 0) means `got` bytes into a message: the peer closing before a
// message's first byte is a clean end (kEof), anywhere later a reset.
Io read_failure(ssize_t n, size_t got) {
  if (n < 0) return Io::kError;
  errno = ECONNRESET;  // closed mid-message
  return got == 0 ? Io::kEof : Io::kError;
}

// Returns kEof only when the peer closed before sending any byte of it.
Io read_exact(int fd, void* buf, size_t len) {
  size_t got = 0;
  while (got < len) {
    ssize_t n = recv(fd, static_cast<char*>(buf) + got, len - got, MSG_WAITALL);
    if (n < 0 && errno == EINTR && !g_stop) continue;
    if (n <= 0) return read_failure(n, got);
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
    if (n < 0 && errno == EINTR && !g_stop) continue;
    if (n <= 0) return read_failure(n, got);
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
    fmt::print(stderr, "{}: {}\n", kProg,
               io != Io::kOk && timed_out()
                   ? fmt::format("a client sent no handshake in {} s: dropped", kIdleSeconds)
                   : std::string("bad handshake from client"));
    return false;
  }
  iovec back{&hello, sizeof(hello)};
  if (write_all(fd, &back, 1) != Io::kOk) return false;
  set_timeouts(fd, kRunWaitSeconds);
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
      if (!g_stop && timed_out()) {
        fmt::print(stderr, "{}: a client silent for {} s mid-run: dropped\n", kProg, kRunWaitSeconds);
      } else if (!g_stop) {
        fmt::print(stderr, "{}: connection error: {}\n", kProg, errno_str());
      }
      return false;
    }
  }
}

int run_server() {
  const int32_t port = floors::server_port_from_flags();
  floors::pin_cpus(absl::GetFlag(FLAGS_cpu));

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
  floors::announce_listening(ntohs(addr.sin_port));
  g_listen_fd = lfd;

  while (!g_stop) {
    const int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (g_stop) break;
      if (errno == EINTR || errno == ECONNABORTED) continue;
      fatal(fmt::format("accept: {}", errno_str()));
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    set_timeouts(fd, kIdleSeconds);
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

int run_client() {
  const floors::ClientOptions opts = floors::client_options_from_flags();
  floors::Results results("tcp-floor", "TCP floor", opts);
  floors::pin_cpus(opts.cpu);

  // Allocated and filled before connecting: the server waits on no client's page faults.
  const uint64_t max_size = *std::max_element(opts.sizes.begin(), opts.sizes.end());
  auto payload = std::make_unique<char[]>(max_size);
  floors::fill_payload(payload.get(), max_size);
  Buffer rbuf;
  rbuf.reserve(max_size, 0);  // preallocated and touched so no page faults are timed
  std::memset(rbuf.data.get(), 0, max_size);

  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fatal(fmt::format("socket: {}", errno_str()));
  if (connect(fd, reinterpret_cast<const sockaddr*>(&opts.server), sizeof(opts.server)) != 0)
    usage_error(fmt::format("cannot connect to {}: {}", opts.address, errno_str()));
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  auto check = [&](Io io, std::string_view what) {
    if (io == Io::kEof) fatal(fmt::format("{}: server closed the connection", what));
    if (io != Io::kOk && timed_out()) {
      fatal(fmt::format("{}: {} said nothing for {} s", what, opts.address, kRunWaitSeconds));
    }
    if (io != Io::kOk) fatal(fmt::format("{}: {}", what, errno_str()));
  };
  // The server answers the Hello with itself; anything else (or silence) is not a TCP floor.
  const Hello hello{kHelloMagic, static_cast<uint32_t>(opts.pingpong ? Mode::kPingpong : Mode::kStream)};
  Hello answer{};
  iovec hiov{const_cast<Hello*>(&hello), sizeof(hello)};
  set_timeouts(fd, kHandshakeSeconds);
  const bool sent = write_all(fd, &hiov, 1) == Io::kOk;
  const Io echo = sent ? read_exact(fd, &answer, sizeof(answer)) : Io::kError;
  if (echo != Io::kOk && timed_out()) {
    usage_error(fmt::format("{} did not answer the handshake in {} s: not a psbench-floor-tcp --server, or one "
                            "serving another client",
                            opts.address, kHandshakeSeconds));
  }
  if (echo != Io::kOk || std::memcmp(&answer, &hello, sizeof(hello)) != 0) {
    usage_error(fmt::format("{} is not a psbench-floor-tcp --server (its answer to the handshake is not one)",
                            opts.address));
  }
  set_timeouts(fd, kRunWaitSeconds);

  results.print_header();
  for (const uint64_t size : opts.sizes) {
    const floors::SizeRun run = floors::plan_size(opts, size);
    if (opts.pingpong) {
      std::vector<int64_t> rtt;
      rtt.reserve(static_cast<size_t>(run.iterations));
      for (int64_t i = 0; i < run.warmup + run.iterations; ++i) {
        uint64_t len = 0;
        const auto t0 = std::chrono::steady_clock::now();
        check(send_frame(fd, payload.get(), size), "send");
        check(read_frame(fd, rbuf, len, /*greedy=*/true), "receive");
        const auto t1 = std::chrono::steady_clock::now();
        if (len != size) fatal(fmt::format("echo of {} bytes came back as {}", size, len));
        if (i >= run.warmup) rtt.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
      }
      if (std::memcmp(rbuf.data.get(), payload.get(), size) != 0) fatal("echoed payload differs");
      results.add_latency(run, rtt);
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
          if (outstanding == opts.window) take_ack();
          check(send_frame(fd, payload.get(), size), "send");
          ++outstanding;
        }
        while (outstanding > 0) take_ack();
      };
      batch(run.warmup);
      const auto t0 = std::chrono::steady_clock::now();
      batch(run.iterations);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      results.add_throughput(run, secs);
    }
  }
  close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const floors::Program program{
      .name = kProg,
      .source_file = "tcp_floor.cc",
      .usage =
          "plain-TCP floor. Server: --server [--port=P] [--once] [--cpu=L]. Client: --connect=127.0.0.1:P "
          "--test=pingpong|stream --size=N|--sizes=MIN:MAX [--iterations=N] [--warmup=N] [--window=W] "
          "[--json=FILE] [--cpu=L]",
  };
  if (floors::parse_command_line(argc, argv, program) == floors::Role::kServer) return run_server();
  return run_client();
}
