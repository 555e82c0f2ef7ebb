// psbench_hostile_client HOST:PORT [MAX_MESSAGE_BYTES]: a hostile client straight at a PS port
// (any transport: grpc, and the gRPC control port of grpc+verbs and grpc+mpi). Each attack must
// be refused (the connection closed, or the call failed) without taking the PS down; at the end
// a fresh, well-behaved GetInfo must still be answered, with a stalled half-sent connection
// still open beside it. Prints one PASS/FAIL line per attack, exits 0 when every attack was
// refused and the PS still answers, 1 otherwise, 2 on usage errors.
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "psbench.grpc.pb.h"
#include "transports/grpc/raw_format.h"

namespace {

using psbench::grpc_transport::EncodePayloadHeader;
using psbench::grpc_transport::kRawEchoMethod;
using psbench::grpc_transport::kRawExchangeMethod;
using psbench::grpc_transport::kRawPushMethod;

std::string g_host, g_port, g_target;
int g_failed = 0;

void Report(bool ok, const std::string& name, const std::string& detail) {
  std::printf("%s %s: %s\n", ok ? "PASS" : "FAIL", name.c_str(), detail.c_str());
  std::fflush(stdout);
  if (!ok) ++g_failed;
}

// A TCP connection to the PS, or -1.
int Dial() {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(g_host.c_str(), g_port.c_str(), &hints, &res) != 0 || !res) return -1;
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  return fd;
}

bool SendAll(int fd, const std::string& bytes) {
  for (size_t at = 0; at < bytes.size();) {
    ssize_t n = send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (n <= 0) return false;  // the PS may already have closed: that is a refusal too
    at += static_cast<size_t>(n);
  }
  return true;
}

// Whether the PS refuses the connection within `timeout_ms`: closes it (EOF or reset) or
// sends a GOAWAY frame (HTTP/2 frame type 7), after its own preface (SETTINGS).
bool ClosedByPeer(int fd, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[4096];
  std::string got;
  while (std::chrono::steady_clock::now() < deadline) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    deadline - std::chrono::steady_clock::now())
                                    .count());
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, std::max(left, 1)) <= 0) continue;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return true;
    got.append(buf, static_cast<size_t>(n));
    for (size_t at = 0; at + 9 <= got.size();) {  // walk the frames received so far
      size_t len = (static_cast<uint8_t>(got[at]) << 16) | (static_cast<uint8_t>(got[at + 1]) << 8) |
                   static_cast<uint8_t>(got[at + 2]);
      if (got[at + 3] == 7) return true;
      at += 9 + len;
    }
  }
  return false;
}

std::string Garbage(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  // Byte 0x07: field 0 with wire type 7, which no protobuf parser accepts.
  s[0] = '\x07';
  return s;
}

const std::string kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

std::string Frame(uint8_t type, uint8_t flags, uint32_t stream, const std::string& payload,
                  uint32_t claimed_length) {
  std::string f;
  f.push_back(static_cast<char>(claimed_length >> 16));
  f.push_back(static_cast<char>(claimed_length >> 8));
  f.push_back(static_cast<char>(claimed_length));
  f.push_back(static_cast<char>(type));
  f.push_back(static_cast<char>(flags));
  f.push_back(static_cast<char>((stream >> 24) & 0x7f));
  f.push_back(static_cast<char>(stream >> 16));
  f.push_back(static_cast<char>(stream >> 8));
  f.push_back(static_cast<char>(stream));
  return f + payload;
}

// Raw TCP: bytes, then (optionally) our side's end of writing; the PS must close.
void TcpAttack(const std::string& name, const std::string& bytes, bool shut_write,
               const std::string& what) {
  int fd = Dial();
  if (fd < 0) {
    Report(false, name, "cannot connect to " + g_target);
    return;
  }
  SendAll(fd, bytes);
  if (shut_write) shutdown(fd, SHUT_WR);
  bool closed = ClosedByPeer(fd, 10000);
  close(fd);
  Report(closed, name, closed ? what + ": the PS closed the connection or sent GOAWAY"
                              : what + ": the connection was still open 10 s later");
}

std::shared_ptr<grpc::Channel> NewChannel() {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  args.SetMaxReceiveMessageSize(-1);
  // A channel of its own per call: one refused call must not decide the next one's fate.
  args.SetInt("grpc.use_local_subchannel_pool", 1);
  return grpc::CreateCustomChannel(g_target, grpc::InsecureChannelCredentials(), args);
}

// A well-formed gRPC call whose body is `body`: it must fail (any status but OK).
void CallAttack(const std::string& name, const std::string& method, const std::string& body,
                grpc::StatusCode want = grpc::StatusCode::OK) {
  auto channel = NewChannel();
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  grpc::Slice slice(body.data(), body.size());
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer reply;
  grpc::CompletionQueue cq;
  auto call = stub.PrepareUnaryCall(&ctx, method, request, &cq);
  call->StartCall();
  grpc::Status status;
  call->Finish(&reply, &status, reinterpret_cast<void*>(1));
  void* tag;
  bool ok;
  cq.Next(&tag, &ok);
  std::string detail = std::to_string(body.size()) + " bytes to " + method + ": " +
                       (status.ok() ? std::string("OK")
                                    : "status " + std::to_string(status.error_code()) + " " +
                                          status.error_message().substr(0, 160));
  bool refused = !status.ok() && status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED &&
                 status.error_code() != grpc::StatusCode::UNAVAILABLE;
  if (want != grpc::StatusCode::OK) refused = status.error_code() == want;
  Report(refused, name, detail);
}

// A call that half-closes without sending a message: it must be answered with `want`, well
// before its deadline.
void NoMessageAttack(const std::string& name, const std::string& method, grpc::StatusCode want) {
  auto channel = NewChannel();
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(&ctx, method, &cq);
  void* tag;
  bool ok;
  call->StartCall(reinterpret_cast<void*>(1));
  cq.Next(&tag, &ok);
  if (ok) {
    call->WritesDone(reinterpret_cast<void*>(2));
    cq.Next(&tag, &ok);
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(3));
  cq.Next(&tag, &ok);
  Report(status.error_code() == want, name,
         "no message to " + method + ": status " + std::to_string(status.error_code()) + " " +
             status.error_message().substr(0, 160));
}

// The transport the PS serves, as its GetInfo says ("" when it does not answer).
std::string TransportOfPs() {
  auto stub = psbench::wire::PsControl::NewStub(NewChannel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  psbench::wire::ServerInfo info;
  return stub->GetInfo(&ctx, psbench::wire::InfoRequest(), &info).ok() ? info.transport() : "";
}

// A well-behaved GetInfo over a fresh channel.
bool StillAnswers(std::string* detail) {
  auto stub = psbench::wire::PsControl::NewStub(NewChannel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  psbench::wire::ServerInfo info;
  grpc::Status s = stub->GetInfo(&ctx, psbench::wire::InfoRequest(), &info);
  *detail = s.ok() ? "GetInfo answered by pid " + std::to_string(info.pid()) + " (" +
                         info.transport() + ")"
                   : "GetInfo failed: " + s.error_message();
  return s.ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: psbench_hostile_client HOST:PORT [MAX_MESSAGE_BYTES]\n");
    return 2;
  }
  g_target = argv[1];
  size_t colon = g_target.rfind(':');
  if (colon == std::string::npos) {
    std::fprintf(stderr, "psbench_hostile_client: '%s' is not HOST:PORT\n", argv[1]);
    return 2;
  }
  g_host = g_target.substr(0, colon);
  g_port = g_target.substr(colon + 1);
  const uint64_t max_message = argc == 3 ? std::stoull(argv[2]) : 0;

  // --- raw TCP: not HTTP/2 at all, or HTTP/2 cut short or broken --------------------------------
  TcpAttack("tcp/garbage", Garbage(64 * 1024, 1), false, "64 KiB of random bytes");
  TcpAttack("tcp/http1", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", false, "an HTTP/1.1 request");
  TcpAttack("tcp/truncated-preface", kPreface.substr(0, 11), true,
            "11 bytes of the HTTP/2 preface, then EOF");
  TcpAttack("tcp/truncated-frame",
            kPreface + Frame(4, 0, 0, std::string(6, '\0'), 12), true,
            "the preface and a SETTINGS frame claiming 12 bytes with 6 sent, then EOF");
  // (DATA on stream 0, a protocol error, is not here: gRPC 1.51 neither closes the connection
  // nor sends GOAWAY for it; after/still-serving shows it harms no one.)
  TcpAttack("tcp/huge-frame",
            kPreface + Frame(4, 0, 0, "", 0) + Frame(1, 4, 1, std::string(64, 'x'), 0xffffff),
            false, "a HEADERS frame claiming 16 MiB, over the default frame size");

  // --- gRPC calls with bodies that are not what the methods take -----------------------------
  // gRPC's payload methods exist on a grpc PS only: a grpc+verbs or grpc+mpi PS must not
  // answer them at all (its bytes go over its own data plane, never silently over gRPC).
  const std::string transport = TransportOfPs();
  const grpc::StatusCode data_want =
      transport == "grpc" ? grpc::StatusCode::OK : grpc::StatusCode::UNIMPLEMENTED;
  // Non-serialized (raw byte buffers): a header, then the buffers.
  std::string header = EncodePayloadHeader({1000, 1000}, nullptr);
  CallAttack("raw/garbage", kRawPushMethod, Garbage(4096, 2), data_want);
  CallAttack("raw/empty", kRawEchoMethod, "", data_want);
  NoMessageAttack("raw/no-message", kRawPushMethod,
                  transport == "grpc" ? grpc::StatusCode::INVALID_ARGUMENT : grpc::StatusCode::UNIMPLEMENTED);
  CallAttack("raw/truncated-header", kRawPushMethod, header.substr(0, header.size() / 2), data_want);
  CallAttack("raw/truncated-body", kRawEchoMethod, header + std::string(1500, 'b'), data_want);
  CallAttack("raw/extra-bytes", kRawPushMethod, header + std::string(2500, 'b'), data_want);
  CallAttack("raw/exchange-truncated", kRawExchangeMethod, header + std::string(10, 'b'), data_want);
  {
    // A header that claims more buffers than any payload has, and one that claims 2^62 bytes:
    // both must be refused before anything is allocated for them.
    std::string absurd = EncodePayloadHeader({uint64_t{1} << 62, uint64_t{1} << 62}, nullptr);
    CallAttack("raw/absurd-sizes", kRawPushMethod, absurd + "tiny", data_want);
    std::string many = EncodePayloadHeader({1}, nullptr);
    uint32_t count = psbench::grpc_transport::kMaxBuffers + 1;
    std::memcpy(many.data() + 8, &count, sizeof count);  // the count field of the fixed part
    CallAttack("raw/too-many-buffers", kRawPushMethod, many + "x", data_want);
  }
  // Serialized (protobuf).
  CallAttack("serialized/garbage", "/psbench.wire.PsData/Push", Garbage(4096, 3), data_want);
  {
    psbench::wire::PayloadMessage m;
    m.add_buffers(std::string(1000, 'a'));
    m.add_buffers(std::string(1000, 'b'));
    std::string bytes = m.SerializeAsString();
    // Cut inside the second buffer's bytes: its length field announces more than follows.
    CallAttack("serialized/truncated", "/psbench.wire.PsData/Echo",
               bytes.substr(0, bytes.size() / 2 + 10), data_want);
    psbench::wire::PayloadMessage bad;  // checksums that do not match the buffers' count
    bad.add_buffers("abc");
    bad.add_checksums(1);
    bad.add_checksums(2);
    CallAttack("serialized/checksum-count", "/psbench.wire.PsData/Push", bad.SerializeAsString(), data_want);
    // Empty buffers are 2 bytes each on the wire and about 64 once parsed: refused after the
    // PS counts them, before it parses them. Over the count cap, and within it but dense.
    const grpc::StatusCode too_many =
        transport == "grpc" ? grpc::StatusCode::RESOURCE_EXHAUSTED : grpc::StatusCode::UNIMPLEMENTED;
    psbench::wire::PayloadMessage empties;
    for (uint32_t i = 0; i <= psbench::grpc_transport::kMaxBuffers; ++i) empties.add_buffers("");
    std::string flood = empties.SerializeAsString();
    if (max_message == 0 || flood.size() <= max_message) {
      CallAttack("serialized/too-many-buffers", "/psbench.wire.PsData/Exchange", flood, too_many);
    }
    CallAttack("serialized/dense-empty-buffers", "/psbench.wire.PsData/Echo",
               flood.substr(0, 2 * 50000), too_many);
  }
  NoMessageAttack("serialized/no-message", "/psbench.wire.PsData/Push",
                  transport == "grpc" ? grpc::StatusCode::INVALID_ARGUMENT : grpc::StatusCode::UNIMPLEMENTED);
  CallAttack("grpc/unknown-method", "/psbench.Raw/Nope", "x", grpc::StatusCode::UNIMPLEMENTED);
  // Control plane (every transport's): garbage to each service, and a goodbye for no session.
  CallAttack("control/barrier-garbage", "/psbench.wire.PsControl/Barrier", Garbage(256, 4));
  {
    psbench::wire::BarrierRequest b;  // valid protobuf, absurd values
    b.set_name("hostile");
    b.set_parties(-5);
    b.set_worker_index(1 << 30);
    CallAttack("control/barrier-absurd", "/psbench.wire.PsControl/Barrier", b.SerializeAsString());
    psbench::wire::GoodbyeRequest g;
    g.set_session_id(0xdeadbeef);
    CallAttack("control/goodbye-unknown", "/psbench.wire.PsControl/Goodbye", g.SerializeAsString());
    // A name longer than any run's barrier: refused, not held.
    b.set_name(std::string(2048, 'n'));
    b.set_parties(1);
    b.set_worker_index(0);
    CallAttack("control/barrier-long-name", "/psbench.wire.PsControl/Barrier", b.SerializeAsString(),
               grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    // A session id is what lets its worker say goodbye; one a stranger could guess (the small
    // numbers a counter gives) would let it hide that worker's loss.
    auto stub = psbench::wire::PsControl::NewStub(NewChannel());
    int answered = 0;
    for (uint64_t id = 1; id <= 256; ++id) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      psbench::wire::GoodbyeRequest g;
      g.set_session_id(id);
      psbench::wire::GoodbyeReply reply;
      if (stub->Goodbye(&ctx, g, &reply).ok()) ++answered;
    }
    Report(answered == 0, "control/goodbye-guess",
           std::to_string(answered) + " of the session ids 1 to 256 were open");
  }
  CallAttack("control/verbs-garbage", "/psbench.wire.PsVerbs/Session", Garbage(256, 5));
  // (A well-formed Hello from another job is answered: the worker, not the PS, compares jobs.)
  CallAttack("control/mpi-garbage", "/psbench.wire.PsMpi/Hello", Garbage(256, 6));

  // --- over the PS's --max-message-size ---------------------------------------------------------
  if (max_message > 0) {
    std::string big(max_message + 1, 'o');
    CallAttack("oversized/control", "/psbench.wire.PsControl/Barrier", big,
               grpc::StatusCode::RESOURCE_EXHAUSTED);
    if (transport == "grpc") {
      CallAttack("oversized/raw", kRawPushMethod, big, grpc::StatusCode::RESOURCE_EXHAUSTED);
      CallAttack("oversized/serialized", "/psbench.wire.PsData/Push", big,
                 grpc::StatusCode::RESOURCE_EXHAUSTED);
    }
  }

  // --- and the PS still answers, with a stalled connection open beside it --------------------
  int stalled = Dial();
  if (stalled >= 0) SendAll(stalled, kPreface.substr(0, 5));
  std::string detail;
  bool answers = StillAnswers(&detail);
  Report(answers, "after/still-serving",
         detail + (stalled >= 0 ? ", with a half-sent preface open" : ""));
  if (stalled >= 0) close(stalled);
  return g_failed == 0 ? 0 : 1;
}
