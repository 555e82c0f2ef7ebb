// The transport conformance suite: what every transport promises at the seam
// (transports/transport.h), checked the same way on each one that runs in one process: the
// in-process loopback transport and grpc in both wire modes here, grpc+verbs (both polling
// modes) in verbs_transport_test on an RDMA device; a real PS server and real clients. Echo and push move every byte and are counted; --validate catches damage on
// either side; many payloads in flight each complete once; exchanges (immediate, held for a
// synchronous step, refused, failed, dropped, damaged, malformed, cancelled by a shutdown);
// a PS that stops fails what comes after, naming it; barriers; sessions against
// --max-connections.
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "payloads/payload.h"
#include "tests/integration/exchange_handlers.h"
#include "tests/integration/exchange_steps.h"
#include "transports/loopback/loopback.h"
#include "transports/transport.h"

namespace psbench::testing {
namespace {

struct Target {
  std::string name;       // the test's parameter name
  std::string transport;  // "loopback" or a registered transport
  WireMode mode = WireMode::kNonSerialized;
  bool busy_poll = false;  // grpc+verbs: spin on the completion queues
};

struct PsSettings {
  ExchangeHandler* handler = nullptr;
  int64_t corrupt_every = 0;
  int max_connections = 1024;
};

class ConformanceTest : public ::testing::TestWithParam<Target> {
 protected:
  // Starts PS number `i` (the next one by default); its address is address(i).
  void StartServer(const PsSettings& settings = {}) {
    ServerOptions so;
    so.host = "127.0.0.1";
    so.port = 0;
    so.threads = 2;
    so.exchange_handler = settings.handler;
    so.corrupt_every = settings.corrupt_every;
    so.max_connections = settings.max_connections;
    so.rdma.busy_poll = GetParam().busy_poll;
    std::unique_ptr<Server> server;
    if (GetParam().transport == "loopback") {
      server = loopback::NewLoopbackServer(so);
    } else {
      auto made = MakeServer(GetParam().transport, so);
      ASSERT_TRUE(made.ok()) << made.status();
      server = std::move(*made);
    }
    auto port = server->Start();
    ASSERT_TRUE(port.ok()) << port.status();
    addresses_.push_back(GetParam().transport == "loopback" ? absl::StrCat("loopback:", *port)
                                                             : absl::StrCat("127.0.0.1:", *port));
    servers_.push_back(std::move(server));
  }

  std::unique_ptr<Client> MakeOne(bool validate, std::vector<std::string> servers = {}) {
    ClientOptions co;
    co.servers = servers.empty() ? addresses_ : servers;
    co.mode = GetParam().mode;
    co.validate = validate;
    co.connect_timeout = absl::Seconds(10);
    co.rpc_timeout = absl::Seconds(30);
    co.rdma.busy_poll = GetParam().busy_poll;
    if (GetParam().transport == "loopback") return loopback::NewLoopbackClient(co);
    auto client = MakeClient(GetParam().transport, co);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  std::unique_ptr<Client> Connect(bool validate = true) {
    auto client = MakeOne(validate);
    if (!client) return nullptr;
    absl::Status s = client->Connect();
    EXPECT_TRUE(s.ok()) << s;
    return s.ok() ? std::move(client) : nullptr;
  }

  void StopServer(size_t i = 0) {
    if (i >= servers_.size() || !servers_[i]) return;
    servers_[i]->Shutdown();
    servers_[i]->Wait();
    servers_[i].reset();
  }

  void TearDown() override {
    for (size_t i = 0; i < servers_.size(); ++i) StopServer(i);
  }

  const std::string& address(size_t i = 0) const { return addresses_[i]; }

  // A PS with `handler`, one worker, one exchange of a small training payload: its status.
  absl::Status OneExchangeWith(ExchangeHandler* handler) {
    StartServer({.handler = handler});
    auto client = Connect();
    if (client == nullptr) return absl::UnavailableError("no client");
    Payload request(TrainingSizes(false), 1), reply(TrainingSizes(false), 2);
    auto req = client->Register(request);
    auto rep = client->Register(reply);
    if (!req.ok() || !rep.ok()) return absl::InternalError("register failed");
    return ExchangeOnce(*client, *req, *rep);
  }

  std::vector<std::unique_ptr<Server>> servers_;
  std::vector<std::string> addresses_;
};

// Sizes that cross every framing boundary: a byte, a cache line, a page, a megabyte and more.
const std::vector<uint64_t> kMixed = {1, 63, 4096, 65536, (1 << 20) + 3};

uint64_t Total(const std::vector<uint64_t>& sizes) {
  uint64_t t = 0;
  for (uint64_t s : sizes) t += s;
  return t;
}

// --- echo and push ----------------------------------------------------------------------------

TEST_P(ConformanceTest, EchoAndPushMoveEveryByteAndAreCounted) {
  StartServer();
  auto client = Connect(/*validate=*/true);
  ASSERT_NE(client, nullptr);
  Payload p(kMixed, 11);
  auto id = client->Register(p);
  ASSERT_TRUE(id.ok()) << id.status();
  for (Op op : {Op::kEcho, Op::kPush, Op::kEcho, Op::kPush}) {
    client->Start(op, 0, *id, 5);
    auto done = client->Next(absl::Now() + absl::Seconds(30));
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(done->tag, 5u);
    EXPECT_TRUE(done->status.ok()) << done->status;
  }
  auto info = client->GetInfo(0);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->rpcs_served, 4u);
  EXPECT_EQ(info->bytes_received, 4 * Total(kMixed));
  EXPECT_EQ(info->sessions_lost, 0u);
}

// --validate: a push damaged on the way is caught by the PS, an echo damaged on the way back
// by the worker; both DATA_LOSS naming the PS.
TEST_P(ConformanceTest, ValidationCatchesDamageOnEitherSide) {
  StartServer({.corrupt_every = 1});
  auto client = Connect(/*validate=*/true);
  ASSERT_NE(client, nullptr);
  Payload p(kMixed, 12);
  auto id = client->Register(p);
  ASSERT_TRUE(id.ok());
  for (Op op : {Op::kPush, Op::kEcho}) {
    client->Start(op, 0, *id, 1);
    auto done = client->Next(absl::Now() + absl::Seconds(30));
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(done->status.code(), absl::StatusCode::kDataLoss) << (op == Op::kPush ? "push: " : "echo: ") << done->status;
    EXPECT_NE(done->status.message().find("PS " + address()), std::string::npos) << done->status;
  }
}

// 64 operations in flight over two PS, echo and push mixed: each completes once, well.
TEST_P(ConformanceTest, ManyPayloadsInFlightEachCompleteOnce) {
  StartServer();
  StartServer();
  auto client = Connect(/*validate=*/true);
  ASSERT_NE(client, nullptr);
  Payload small(std::vector<uint64_t>{10, 10240}, 1), large(std::vector<uint64_t>{1 << 20, 100}, 2);
  auto s = client->Register(small);
  auto l = client->Register(large);
  ASSERT_TRUE(s.ok() && l.ok());
  constexpr int kOps = 64;
  for (int i = 0; i < kOps; ++i) {
    client->Start(i % 3 == 0 ? Op::kPush : Op::kEcho, i % 2, i % 4 == 0 ? *l : *s, 1000 + i);
  }
  std::multiset<uint64_t> tags;
  for (int i = 0; i < kOps; ++i) {
    auto done = client->Next(absl::Now() + absl::Seconds(30));
    ASSERT_TRUE(done.ok()) << "after " << i << ": " << done.status();
    EXPECT_TRUE(done->status.ok()) << done->status;
    tags.insert(done->tag);
  }
  for (int i = 0; i < kOps; ++i) EXPECT_EQ(tags.count(1000 + i), 1u) << i;
  EXPECT_EQ(client->Next(absl::Now() + absl::Milliseconds(100)).status().code(),
            absl::StatusCode::kDeadlineExceeded) << "no completion beyond the operations started";
}

// A PS that stops: what is asked of it afterwards fails, naming it, within the deadline.
TEST_P(ConformanceTest, AfterThePsStopsItsOperationsFailNamingIt) {
  StartServer();
  auto client = Connect(/*validate=*/false);
  ASSERT_NE(client, nullptr);
  Payload p(std::vector<uint64_t>{4096}, 3);
  auto id = client->Register(p);
  ASSERT_TRUE(id.ok());
  client->Start(Op::kEcho, 0, *id, 1);
  ASSERT_TRUE(client->Next(absl::Now() + absl::Seconds(30)).ok());
  StopServer();
  for (Op op : {Op::kEcho, Op::kPush}) {
    client->Start(op, 0, *id, 2);
    auto done = client->Next(absl::Now() + absl::Seconds(40));
    ASSERT_TRUE(done.ok()) << "no completion: the worker would hang";
    EXPECT_FALSE(done->status.ok());
    EXPECT_NE(done->status.message().find(address()), std::string::npos) << done->status;
  }
}

// --- control plane ----------------------------------------------------------------------------

TEST_P(ConformanceTest, BarrierReleasesWhenEveryWorkerArrived) {
  StartServer();
  constexpr int kWorkers = 3;
  std::vector<std::unique_ptr<Client>> clients;
  for (int w = 0; w < kWorkers; ++w) {
    clients.push_back(Connect());
    ASSERT_NE(clients.back(), nullptr);
  }
  std::vector<std::future<absl::Status>> arrived;
  for (int w = 0; w < kWorkers; ++w) {
    arrived.push_back(std::async(std::launch::async, [&, w] {
      return clients[w]->Barrier("start", kWorkers, w, absl::Now() + absl::Seconds(30));
    }));
  }
  for (auto& a : arrived) EXPECT_TRUE(a.get().ok());
  // Alone at a barrier of two: it says so at its deadline.
  absl::Status alone = clients[0]->Barrier("alone", 2, 0, absl::Now() + absl::Milliseconds(300));
  EXPECT_EQ(alone.code(), absl::StatusCode::kDeadlineExceeded) << alone;
  EXPECT_NE(alone.message().find("only 1 of the 2 workers"), std::string::npos) << alone;
  absl::Status outside = clients[0]->Barrier("bad", 2, 5, absl::Now() + absl::Seconds(5));
  EXPECT_EQ(outside.code(), absl::StatusCode::kInvalidArgument) << outside;
}

// --max-connections counts worker sessions: one too many is refused naming the limit, and a
// worker that leaves frees its place.
TEST_P(ConformanceTest, SessionsAreCountedAgainstMaxConnections) {
  StartServer({.max_connections = 1});
  auto first = Connect();
  ASSERT_NE(first, nullptr);
  auto second = MakeOne(true);
  ASSERT_NE(second, nullptr);
  absl::Status refused = second->Connect();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(refused.message().find("--max-connections=1"), std::string::npos) << refused;
  first.reset();
  absl::Status admitted;
  for (auto until = absl::Now() + absl::Seconds(10); absl::Now() < until;) {
    auto again = MakeOne(true);
    ASSERT_NE(again, nullptr);
    if ((admitted = again->Connect()).ok()) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(admitted.ok()) << admitted;
}

// --- exchanges --------------------------------------------------------------------------------

TEST_P(ConformanceTest, ImmediateAnswerLandsInTheReplyPayload) {
  AddOneHandler handler;
  StartServer({.handler = &handler});
  for (bool validate : {true, false}) {
    auto client = Connect(validate);
    ASSERT_NE(client, nullptr);
    Payload request(TrainingSizes(/*large=*/true), 1), reply(TrainingSizes(true), 2);
    auto req = client->Register(request);
    auto rep = client->Register(reply);
    ASSERT_TRUE(req.ok() && rep.ok());
    // New gradients every step: with validate, checksums are of the bytes as sent.
    for (int step = 0; step < 4; ++step) {
      FillFloats(request, static_cast<float>(step * 10));
      ASSERT_TRUE(ExchangeOnce(*client, *req, *rep).ok()) << "step " << step;
      EXPECT_EQ(CompareFloats(request, reply, [](float x) { return x + 1; }), "") << step;
    }
  }
  EXPECT_EQ(handler.calls(), 8);
  // The handler writes its reply where the request lies (pooled memory, or the message's own
  // strings): no copy between them.
  EXPECT_TRUE(handler.aliased());
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  auto info = client->GetInfo(0);
  ASSERT_TRUE(info.ok()) << info.status();
  Payload sample(TrainingSizes(true), 0);
  EXPECT_EQ(info->rpcs_served, 8u);
  EXPECT_EQ(info->bytes_received, 8 * sample.total_bytes());
}

// N workers, each with its own client on its own thread; the handler holds every request of
// a step until the last is in, then answers all from another thread.
TEST_P(ConformanceTest, SynchronousStepAnswersEveryWorkerLater) {
  constexpr int kWorkers = 3, kSteps = 4;
  SyncStepHandler handler(kWorkers);
  StartServer({.handler = &handler});
  std::vector<std::unique_ptr<Client>> clients;
  for (int w = 0; w < kWorkers; ++w) {
    clients.push_back(Connect());
    ASSERT_NE(clients.back(), nullptr);
  }
  std::vector<std::string> failures(kWorkers);
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      failures[w] = SyncSumWorker(*clients[w], TrainingSizes(true), w, kWorkers, kSteps);
    });
  }
  for (auto& t : workers) t.join();
  for (int w = 0; w < kWorkers; ++w) EXPECT_EQ(failures[w], "") << "worker " << w;
  EXPECT_EQ(handler.steps(), kSteps);
  EXPECT_EQ(handler.max_held(), static_cast<size_t>(kWorkers));
}

TEST_P(ConformanceTest, WithoutHandlerExchangesFailAndThePsServesOn) {
  StartServer();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  Payload request(TrainingSizes(false), 1), reply(TrainingSizes(false), 2);
  auto req = client->Register(request);
  auto rep = client->Register(reply);
  ASSERT_TRUE(req.ok() && rep.ok());
  for (int i = 0; i < 2; ++i) {
    absl::Status s = ExchangeOnce(*client, *req, *rep);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find("PS " + address() + ": "), std::string::npos) << s;
    EXPECT_NE(s.message().find("does not serve exchanges"), std::string::npos) << s;
    for (Op op : {Op::kEcho, Op::kPush}) {
      client->Start(op, 0, *req, 1);
      auto done = client->Next(absl::Now() + absl::Seconds(30));
      ASSERT_TRUE(done.ok());
      EXPECT_TRUE(done->status.ok()) << done->status;
    }
  }
}

TEST_P(ConformanceTest, HandlerErrorIsPrefixedWithThePsAddress) {
  FailingHandler handler(absl::ResourceExhaustedError("optimizer state does not fit"));
  absl::Status s = OneExchangeWith(&handler);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(s.message(), "PS " + address() + ": optimizer state does not fit");
}

TEST_P(ConformanceTest, DroppedAnswerIsAnInternalError) {
  FailingHandler handler(absl::UnknownError("unused"), /*drop=*/true);
  absl::Status s = OneExchangeWith(&handler);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_NE(s.message().find("dropped the exchange unanswered"), std::string::npos) << s;
}

TEST_P(ConformanceTest, MismatchedOrUnknownPayloadsAreInvalidArgument) {
  AddOneHandler handler;
  StartServer({.handler = &handler});
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  Payload request(TrainingSizes(false), 1), shorter(std::vector<uint64_t>{16, 4096, 40}, 2),
      resized(std::vector<uint64_t>{16, 4096, 44, 65536}, 3);
  auto req = client->Register(request);
  auto s1 = client->Register(shorter);
  auto s2 = client->Register(resized);
  ASSERT_TRUE(req.ok() && s1.ok() && s2.ok());
  for (int reply : {*s1, *s2, 99, -1}) {
    absl::Status s = ExchangeOnce(*client, *req, reply);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
  EXPECT_EQ(ExchangeOnce(*client, 42, *req).code(), absl::StatusCode::kInvalidArgument);
  client->StartExchange(5, *req, *req, 1);  // no PS 5
  auto done = client->Next(absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->status.code(), absl::StatusCode::kInvalidArgument) << done->status;
  client->Start(Op::kExchange, 0, *req, 1);  // no reply payload
  done = client->Next(absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->status.code(), absl::StatusCode::kInvalidArgument) << done->status;
  EXPECT_EQ(handler.calls(), 0);
}

// --validate: the PS checks a damaged request before its handler sees it.
TEST_P(ConformanceTest, CorruptedRequestIsDataLoss) {
  AddOneHandler handler;
  StartServer({.handler = &handler, .corrupt_every = 1});
  auto client = Connect(/*validate=*/true);
  ASSERT_NE(client, nullptr);
  Payload request(TrainingSizes(true), 1), reply(TrainingSizes(true), 2);
  auto req = client->Register(request);
  auto rep = client->Register(reply);
  ASSERT_TRUE(req.ok() && rep.ok());
  absl::Status s = ExchangeOnce(*client, *req, *rep);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("PS " + address()), std::string::npos) << s;
  EXPECT_NE(s.message().find("checksum"), std::string::npos) << s;
  EXPECT_EQ(handler.calls(), 0);
}

// A PS that shuts down while its handler holds exchanges cancels them; answers that come
// after it is gone write their replies and do nothing else.
TEST_P(ConformanceTest, ShutdownCancelsHeldExchanges) {
  HoldingHandler handler;
  StartServer({.handler = &handler});
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::unique_ptr<Payload>> payloads;
  for (int w = 0; w < 2; ++w) {
    clients.push_back(Connect());
    ASSERT_NE(clients.back(), nullptr);
    payloads.push_back(std::make_unique<Payload>(TrainingSizes(w == 1), 1));
    payloads.push_back(std::make_unique<Payload>(TrainingSizes(w == 1), 2));
    auto req = clients[w]->Register(*payloads[2 * w]);
    auto rep = clients[w]->Register(*payloads[2 * w + 1]);
    ASSERT_TRUE(req.ok() && rep.ok());
    clients[w]->StartExchange(0, *req, *rep, 1);
  }
  // A transport may send from the worker's own thread, in Next (grpc+verbs): poll until both
  // exchanges are held.
  for (int i = 0; i < 400 && !handler.WaitHeld(2, std::chrono::milliseconds(1)); ++i) {
    for (auto& c : clients) {
      auto early = c->Next(absl::Now() + absl::Milliseconds(50));
      ASSERT_FALSE(early.ok()) << "an exchange completed while its handler held it";
    }
  }
  ASSERT_TRUE(handler.WaitHeld(2, std::chrono::seconds(1)));
  auto stopped = std::async(std::launch::async, [this] { StopServer(); });
  ASSERT_EQ(stopped.wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "Shutdown hangs on held exchanges";
  for (auto& c : clients) {
    auto done = c->Next(absl::Now() + absl::Seconds(20));
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_FALSE(done->status.ok());
    EXPECT_NE(done->status.message().find("PS " + address()), std::string::npos) << done->status;
  }
  handler.AnswerAll(absl::OkStatus());  // after the server is gone: harmless
}

#ifdef PSBENCH_CONFORMANCE_VERBS
// Built into verbs_transport_test, which runs where there is an RDMA device (ctest -L rdma).
INSTANTIATE_TEST_SUITE_P(Transports, ConformanceTest,
                         ::testing::Values(Target{"grpc_verbs_event", "grpc+verbs"},
                                           Target{"grpc_verbs_busy", "grpc+verbs", WireMode::kNonSerialized, true}),
                         [](const auto& info) { return info.param.name; });
#else
INSTANTIATE_TEST_SUITE_P(Transports, ConformanceTest,
                         ::testing::Values(Target{"loopback", "loopback"},
                                           Target{"grpc_non_serialized", "grpc", WireMode::kNonSerialized},
                                           Target{"grpc_serialized", "grpc", WireMode::kSerialized}),
                         [](const auto& info) { return info.param.name; });
#endif

}  // namespace
}  // namespace psbench::testing
