// The TCP and gRPC floors (bench/floors/) as a user runs them: a server on port 0 whose first
// line names its port, then clients that measure and write records. Their figures stand beside
// psbench's in the tour and in bench/RESULTS.md, so a floor that measured nothing, or
// something else, would make every comparison wrong.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <map>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "tests/integration/run_helpers.h"

namespace psbench::testing {
namespace {

class FloorsTest : public IntegrationTest {
 protected:
  void TearDown() override {
    server_.reset();  // stopped before the base checks that no process is left
    IntegrationTest::TearDown();
  }

  // Starts `binary` as a server with `flags`; returns its port, or 0 (with a failure).
  int StartServer(const std::string& binary, const Argv& flags) {
    server_ = std::make_unique<Process>(Concat({BinPath(binary), "--server", "--port=0"}, flags));
    for (auto until = Clock::now() + seconds(10); Clock::now() < until;) {
      const std::string out = server_->Stdout();
      if (size_t eol = out.find('\n'); eol != std::string::npos) {
        const std::string line = out.substr(0, eol);
        EXPECT_TRUE(absl::StartsWith(line, "listening on 127.0.0.1:")) << line;
        return std::stoi(line.substr(line.rfind(':') + 1));
      }
      if (!server_->Running()) break;
      std::this_thread::sleep_for(milliseconds(20));
    }
    ADD_FAILURE() << binary << " did not announce its port: " << server_->Stderr();
    return 0;
  }

  // Runs a client against the server; returns its records.
  std::vector<Json> Client(const std::string& binary, int port, const Argv& flags) {
    const std::string json = dir_.File("records.jsonl");
    std::remove(json.c_str());
    RunResult r = RunCommand(Concat({BinPath(binary), "--connect=127.0.0.1:" + std::to_string(port),
                                     "--json=" + json},
                                    flags),
                             seconds(60));
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    std::vector<Json> records;
    for (const std::string& line : Lines(ReadFile(json))) records.push_back(Json::parse(line));
    return records;
  }

  TempDir dir_;
  std::unique_ptr<Process> server_;
};

// Each gRPC floor echoes and streams, says which it is, and runs with psbench's allocator policy.
TEST_F(FloorsTest, EveryGrpcFloorMeasuresEveryRequestedSize) {
  const std::map<std::string, std::string> tools = {
      {"generic", "grpc-generic-floor"}, {"async", "grpc-async-floor"}, {"unary", "grpc-unary-baseline"}};
  for (const auto& [api, tool] : tools) {
    SCOPED_TRACE(api);
    const std::string flag = std::string("--api=") + api;
    int port = StartServer("psbench-floor-grpc", {flag});
    ASSERT_GT(port, 0);
    auto pingpong = Client("psbench-floor-grpc", port,
                           {flag, "--test=pingpong", "--sizes=32:64", "--iterations=50", "--warmup=5"});
    ASSERT_EQ(pingpong.size(), 2u);
    auto stream = Client("psbench-floor-grpc", port,
                         {flag, "--test=stream", "--size=1M", "--iterations=40", "--warmup=4", "--window=4"});
    ASSERT_EQ(stream.size(), 1u);
    for (size_t i = 0; i < pingpong.size(); ++i) {
      const Json& r = pingpong[i];
      EXPECT_EQ(r.value("tool", ""), tool) << r.dump();
      EXPECT_EQ(r.value("bytes", 0), i == 0 ? 32 : 64) << r.dump();
      EXPECT_EQ(r.value("iterations", 0), 50) << r.dump();
      EXPECT_GT(r["latency_us"].value("p50", 0.0), 0) << r.dump();
      ExpectAllocatorPolicy(r["allocator"]);
      EXPECT_EQ(r.value("mutex_deadlock_detection", ""), "off");
    }
    EXPECT_EQ(stream[0].value("bytes", 0), 1 << 20) << stream[0].dump();
    EXPECT_EQ(stream[0].value("window", 0), 4) << stream[0].dump();
    EXPECT_GT(stream[0].value("mb_per_s", 0.0), 0) << stream[0].dump();
    EXPECT_EQ(server_->Stop(), 0) << server_->Stderr();
  }
}

TEST_F(FloorsTest, TcpFloorEchoesAndStreams) {
  int port = StartServer("psbench-floor-tcp", {});
  ASSERT_GT(port, 0);
  auto pingpong = Client("psbench-floor-tcp", port, {"--test=pingpong", "--size=4K", "--iterations=50"});
  ASSERT_EQ(pingpong.size(), 1u);
  EXPECT_EQ(pingpong[0].value("tool", ""), "tcp-floor") << pingpong[0].dump();
  EXPECT_GT(pingpong[0]["latency_us"].value("p50", 0.0), 0) << pingpong[0].dump();
  ExpectAllocatorPolicy(pingpong[0]["allocator"]);
  auto stream = Client("psbench-floor-tcp", port, {"--test=stream", "--size=1M", "--iterations=40"});
  ASSERT_EQ(stream.size(), 1u);
  EXPECT_GT(stream[0].value("mb_per_s", 0.0), 0) << stream[0].dump();
}

// A loopback socket listening on a free port that never answers; its port.
int SilentListener(int* fd) {
  *fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(*fd, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(*fd, 4) != 0) return 0;
  getsockname(*fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

// Neither side of the TCP floor waits without end: a client dialling something that is not a
// floor server says so (it used to print its header and block forever), and a connection that
// never speaks no longer holds the server's one-at-a-time accept loop from the next client.
TEST_F(FloorsTest, TcpFloorWaitsForNoOneForever) {
  int silent = -1;
  const int silent_port = SilentListener(&silent);
  ASSERT_GT(silent_port, 0);
  RunResult lost = RunCommand({BinPath("psbench-floor-tcp"), "--connect=127.0.0.1:" + std::to_string(silent_port),
                               "--size=1K", "--iterations=5"},
                              seconds(30));
  close(silent);
  ExpectOneLineFailure(lost, 2, "psbench-floor-tcp",
                       {"127.0.0.1:" + std::to_string(silent_port), "did not answer the handshake in 7 s"});
  EXPECT_LT(lost.seconds, 15) << lost.Describe();

  int port = StartServer("psbench-floor-tcp", {});
  ASSERT_GT(port, 0);
  const int idle = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(connect(idle, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  auto records = Client("psbench-floor-tcp", port, {"--test=pingpong", "--size=1K", "--iterations=20"});
  close(idle);
  EXPECT_EQ(records.size(), 1u);
  EXPECT_NE(server_->Stderr().find("a client sent no handshake in 5 s: dropped"), std::string::npos)
      << server_->Stderr();
}

// Counts a client could not hold (each measured round trip is kept) are refused up front.
TEST_F(FloorsTest, CountsOverTheirBoundsAreUsageErrors) {
  for (const std::string binary : {"psbench-floor-tcp", "psbench-floor-grpc"}) {
    for (const std::string flag : {"--iterations=1000000000000", "--warmup=9223372036854775807", "--window=1000000"}) {
      ExpectOneLineFailure(RunCommand({BinPath(binary), "--connect=127.0.0.1:1", "--size=1", flag}), 2, binary,
                           {flag.substr(0, flag.find('=')) + " must be in ["});
    }
  }
}

// A client of one API against a server of the other fails at once, saying why; --api must be
// one of the two.
TEST_F(FloorsTest, ApisDoNotMixAndUnknownApiIsAUsageError) {
  int port = StartServer("psbench-floor-grpc", {"--api=unary"});
  ASSERT_GT(port, 0);
  RunResult r = RunCommand({BinPath("psbench-floor-grpc"), "--api=generic", "--connect=127.0.0.1:" + std::to_string(port),
                            "--size=32", "--iterations=5"},
                           seconds(30));
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("UNIMPLEMENTED"), std::string::npos) << r.Describe();
  EXPECT_NE(r.err.find("--api=generic"), std::string::npos) << r.Describe();
  ExpectOneLineFailure(RunCommand({BinPath("psbench-floor-grpc"), "--api=rest", "--server"}), 2,
                       "psbench-floor-grpc", {"--api=rest", "unary, async or generic"});
  // ::1 is loopback, but not the IPv4 loopback the floors take: said so.
  ExpectOneLineFailure(RunCommand({BinPath("psbench-floor-tcp"), "--connect=[::1]:5000"}), 2, "psbench-floor-tcp",
                       {"[::1]:5000", "IPv4 loopback", "the floors take no IPv6"});
  // The async client against the unary server: the same protobuf service, so it works.
  r = RunCommand({BinPath("psbench-floor-grpc"), "--api=async", "--connect=127.0.0.1:" + std::to_string(port),
                  "--size=32", "--iterations=5"},
                 seconds(30));
  EXPECT_EQ(r.exit_code, 0) << "async and unary speak the same protobuf service: " << r.Describe();
}

}  // namespace
}  // namespace psbench::testing
