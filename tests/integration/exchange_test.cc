// kExchange over plain gRPC at the transport seam, in one process: a real PS server on
// loopback with test handlers, and real clients, in both wire modes.
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "payloads/payload.h"
#include "psbench.grpc.pb.h"
#include "tests/integration/exchange_handlers.h"
#include "tests/integration/exchange_steps.h"
#include "transports/grpc/raw_format.h"
#include "transports/transport.h"

namespace psbench::testing {
namespace {

class GrpcExchangeTest : public ::testing::TestWithParam<WireMode> {
 protected:
  void StartServer(ExchangeHandler* handler, int64_t corrupt_every = 0) {
    ServerOptions so;
    so.host = "127.0.0.1";
    so.port = 0;  // a free port of its own
    so.threads = 2;
    so.exchange_handler = handler;
    so.corrupt_every = corrupt_every;
    auto server = MakeServer("grpc", so);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    auto port = server_->Start();
    ASSERT_TRUE(port.ok()) << port.status();
    address_ = absl::StrCat("127.0.0.1:", *port);
  }

  std::unique_ptr<Client> Connect(bool validate = true) {
    ClientOptions co;
    co.servers = {address_};
    co.mode = GetParam();
    co.validate = validate;
    co.connect_timeout = absl::Seconds(10);
    co.rpc_timeout = absl::Seconds(30);
    auto client = MakeClient("grpc", co);
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok()) return nullptr;
    absl::Status s = (*client)->Connect();
    EXPECT_TRUE(s.ok()) << s;
    return s.ok() ? std::move(*client) : nullptr;
  }

  // One exchange, waited for (bounded).
  void StopServer() {
    if (!server_) return;
    server_->Shutdown();
    server_->Wait();
    server_.reset();
  }

  void TearDown() override { StopServer(); }

  std::unique_ptr<Server> server_;
  std::string address_;
};

TEST_P(GrpcExchangeTest, ImmediateAnswerLandsInTheReplyPayload) {
  AddOneHandler handler;
  StartServer(&handler);
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
  // Serialized: the message's strings are overwritten in place. Non-serialized: the
  // megabyte buffers arrive in many slices, are gathered into pooled memory, and the reply
  // is written there and sent from there.
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
TEST_P(GrpcExchangeTest, SynchronousStepAnswersEveryWorkerLater) {
  constexpr int kWorkers = 3, kSteps = 4;
  SyncStepHandler handler(kWorkers);
  StartServer(&handler);
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

TEST_P(GrpcExchangeTest, WithoutHandlerExchangesFailAndThePsServesOn) {
  StartServer(nullptr);
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  Payload request(TrainingSizes(false), 1), reply(TrainingSizes(false), 2);
  auto req = client->Register(request);
  auto rep = client->Register(reply);
  ASSERT_TRUE(req.ok() && rep.ok());
  for (int i = 0; i < 2; ++i) {
    absl::Status s = ExchangeOnce(*client, *req, *rep);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find("PS " + address_ + ": "), std::string::npos) << s;
    EXPECT_NE(s.message().find("does not serve exchanges"), std::string::npos) << s;
    for (Op op : {Op::kEcho, Op::kPush}) {
      client->Start(op, 0, *req, 1);
      auto done = client->Next(absl::Now() + absl::Seconds(30));
      ASSERT_TRUE(done.ok());
      EXPECT_TRUE(done->status.ok()) << done->status;
    }
  }
}

TEST_P(GrpcExchangeTest, HandlerErrorIsPrefixedWithThePsAddress) {
  FailingHandler handler(absl::ResourceExhaustedError("optimizer state does not fit"));
  StartServer(&handler);
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  Payload request(TrainingSizes(false), 1), reply(TrainingSizes(false), 2);
  auto req = client->Register(request);
  auto rep = client->Register(reply);
  ASSERT_TRUE(req.ok() && rep.ok());
  absl::Status s = ExchangeOnce(*client, *req, *rep);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(s.message(), "PS " + address_ + ": optimizer state does not fit");
}

TEST_P(GrpcExchangeTest, DroppedAnswerIsAnInternalError) {
  FailingHandler handler(absl::UnknownError("unused"), /*drop=*/true);
  StartServer(&handler);
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  Payload request(TrainingSizes(false), 1), reply(TrainingSizes(false), 2);
  auto req = client->Register(request);
  auto rep = client->Register(reply);
  ASSERT_TRUE(req.ok() && rep.ok());
  absl::Status s = ExchangeOnce(*client, *req, *rep);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_NE(s.message().find("dropped the exchange unanswered"), std::string::npos) << s;
}

TEST_P(GrpcExchangeTest, MismatchedOrUnknownPayloadsAreInvalidArgument) {
  AddOneHandler handler;
  StartServer(&handler);
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
TEST_P(GrpcExchangeTest, CorruptedRequestIsDataLoss) {
  AddOneHandler handler;
  StartServer(&handler, /*corrupt_every=*/1);
  auto client = Connect(/*validate=*/true);
  ASSERT_NE(client, nullptr);
  Payload request(TrainingSizes(true), 1), reply(TrainingSizes(true), 2);
  auto req = client->Register(request);
  auto rep = client->Register(reply);
  ASSERT_TRUE(req.ok() && rep.ok());
  absl::Status s = ExchangeOnce(*client, *req, *rep);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("PS " + address_), std::string::npos) << s;
  EXPECT_NE(s.message().find("checksum"), std::string::npos) << s;
  EXPECT_EQ(handler.calls(), 0);
}

// A PS that shuts down while its handler holds exchanges cancels them; answers that come
// after it is gone write their replies and do nothing else.
TEST_P(GrpcExchangeTest, ShutdownCancelsHeldExchanges) {
  HoldingHandler handler;
  StartServer(&handler);
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
  ASSERT_TRUE(handler.WaitHeld(2, std::chrono::seconds(20)));
  auto stopped = std::async(std::launch::async, [this] { StopServer(); });
  ASSERT_EQ(stopped.wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "Shutdown hangs on held exchanges";
  for (auto& c : clients) {
    auto done = c->Next(absl::Now() + absl::Seconds(20));
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_FALSE(done->status.ok());
    EXPECT_NE(done->status.message().find("PS " + address_), std::string::npos) << done->status;
  }
  handler.AnswerAll(absl::OkStatus());  // after the server is gone: harmless
}

// --- the worker's own checks of a reply ---------------------------------------------------

// A PS that answers exchanges wrongly (in both wire modes): a reply buffer one byte longer
// than the request's, or checksums that do not match the reply. Nothing in a real PS does
// that, so only a fake can show that the worker checks.
class BadReplyPs final : public wire::PsControl::Service,
                         public wire::PsData::Service,
                         public grpc::CallbackGenericService {
 public:
  enum class Fault { kSizes, kChecksums };
  explicit BadReplyPs(Fault fault) : fault_(fault) {}

  std::string Start() {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(static_cast<wire::PsControl::Service*>(this));
    builder.RegisterService(static_cast<wire::PsData::Service*>(this));
    builder.RegisterCallbackGenericService(this);
    server_ = builder.BuildAndStart();
    return port > 0 ? absl::StrCat("127.0.0.1:", port) : "";
  }
  ~BadReplyPs() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

  grpc::Status GetInfo(grpc::ServerContext*, const wire::InfoRequest*,
                       wire::ServerInfo* reply) override {
    reply->set_transport("grpc");
    return grpc::Status::OK;
  }

  // Serialized: the request back, damaged.
  grpc::Status Exchange(grpc::ServerContext*, const wire::PayloadMessage* request,
                        wire::PayloadMessage* reply) override {
    std::vector<std::string> buffers(request->buffers().begin(), request->buffers().end());
    std::vector<uint64_t> checksums = Damage(buffers);
    for (const auto& b : buffers) reply->add_buffers(b);
    for (uint64_t c : checksums) reply->add_checksums(c);
    return grpc::Status::OK;
  }

  // Non-serialized: the same, as raw bytes.
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    class Reactor : public grpc::ServerGenericBidiReactor {
     public:
      explicit Reactor(BadReplyPs* ps) : ps_(ps) { StartRead(&request_); }
      void OnReadDone(bool ok) override {
        if (!ok) return Finish(grpc::Status(grpc::StatusCode::INTERNAL, "no request"));
        grpc_transport::SliceReader reader(request_);
        auto header = grpc_transport::ReadPayloadHeader(reader);
        if (!header.ok()) return Finish(grpc::Status(grpc::StatusCode::INTERNAL, "bad request"));
        std::vector<std::string> buffers;
        for (uint64_t size : header->sizes) {
          buffers.emplace_back(size, '\0');
          reader.Read(buffers.back().data(), size);
        }
        std::vector<uint64_t> checksums = ps_->Damage(buffers);
        std::vector<uint64_t> sizes;
        std::string flat;
        for (const auto& b : buffers) {
          sizes.push_back(b.size());
          flat += b;
        }
        flat = grpc_transport::EncodePayloadHeader(sizes, &checksums) + flat;
        grpc::Slice slice(flat);
        response_ = grpc::ByteBuffer(&slice, 1);
        StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
      }
      void OnDone() override { delete this; }

     private:
      BadReplyPs* ps_;
      grpc::ByteBuffer request_, response_;
    };
    return new Reactor(this);
  }

 private:
  // Damages the reply to be; returns the checksums to send with it.
  std::vector<uint64_t> Damage(std::vector<std::string>& buffers) {
    if (fault_ == Fault::kSizes) buffers[0].push_back('x');
    std::vector<uint64_t> checksums;
    for (const auto& b : buffers) checksums.push_back(Checksum(std::as_bytes(std::span(b))));
    if (fault_ == Fault::kChecksums) checksums.back() ^= 1;
    return checksums;
  }

  const Fault fault_;
  std::unique_ptr<grpc::Server> server_;
};

class GrpcExchangeReplyCheckTest : public ::testing::TestWithParam<WireMode> {};

TEST_P(GrpcExchangeReplyCheckTest, BadReplyIsDataLossNamingThePs) {
  for (auto fault : {BadReplyPs::Fault::kSizes, BadReplyPs::Fault::kChecksums}) {
    BadReplyPs ps(fault);
    std::string address = ps.Start();
    ASSERT_NE(address, "");
    ClientOptions co;
    co.servers = {address};
    co.mode = GetParam();
    co.validate = true;
    co.connect_timeout = absl::Seconds(10);
    auto client = MakeClient("grpc", co);
    ASSERT_TRUE(client.ok());
    ASSERT_TRUE((*client)->Connect().ok());
    Payload request(TrainingSizes(false), 1), reply(TrainingSizes(false), 2);
    auto req = (*client)->Register(request);
    auto rep = (*client)->Register(reply);
    ASSERT_TRUE(req.ok() && rep.ok());
    (*client)->StartExchange(0, *req, *rep, 1);
    auto done = (*client)->Next(absl::Now() + absl::Seconds(30));
    ASSERT_TRUE(done.ok()) << done.status();
    const absl::Status& s = done->status;
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_NE(s.message().find("PS " + address + ": "), std::string::npos) << s;
    EXPECT_NE(s.message().find(fault == BadReplyPs::Fault::kSizes
                                   ? "buffer 1 of the exchange reply has 17 bytes, the request's 16"
                                   : "checksum"),
              std::string::npos)
        << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, GrpcExchangeReplyCheckTest,
                         ::testing::Values(WireMode::kNonSerialized, WireMode::kSerialized),
                         [](const auto& info) {
                           return info.param == WireMode::kSerialized ? std::string("Serialized")
                                                                      : std::string("NonSerialized");
                         });

INSTANTIATE_TEST_SUITE_P(Modes, GrpcExchangeTest,
                         ::testing::Values(WireMode::kNonSerialized, WireMode::kSerialized),
                         [](const auto& info) {
                           return info.param == WireMode::kSerialized ? std::string("Serialized")
                                                                      : std::string("NonSerialized");
                         });

}  // namespace
}  // namespace psbench::testing
