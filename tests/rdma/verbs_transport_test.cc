// grpc+verbs at the transport seam, in one process: a real PS server and a real client over a
// real RDMA device (Soft-RoCE in the test guest, see tests/rdma/README.md). NoDeviceTest runs
// anywhere; the rest need a device.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "payloads/payload.h"
#include "tests/integration/exchange_handlers.h"
#include "tests/integration/exchange_steps.h"
#include "transports/transport.h"

namespace psbench {
namespace {

using testing::AddOneHandler;
using testing::CompareFloats;
using testing::ExchangeOnce;
using testing::FailingHandler;
using testing::FillFloats;
using testing::HoldingHandler;
using testing::SyncStepHandler;
using testing::SyncSumWorker;
using testing::TrainingSizes;

bool HaveDevice() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list != nullptr) ibv_free_device_list(list);
  return n > 0;
}

TEST(NoDeviceTest, ServerStartNamesTheMissingDevice) {
  ServerOptions options;
  options.host = "127.0.0.1";
  auto server = MakeServer("grpc+verbs", options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto port = (*server)->Start();
  if (HaveDevice()) {
    EXPECT_TRUE(port.ok()) << port.status();
  } else {
    ASSERT_FALSE(port.ok());
    EXPECT_NE(port.status().message().find(
                  "no RDMA device found: ibv_get_device_list returned 0"),
              std::string::npos)
        << port.status();
  }
}

TEST(NoDeviceTest, ClientRefusesAPlainGrpcPs) {
  ServerOptions so;
  so.host = "127.0.0.1";
  auto server = MakeServer("grpc", so);
  ASSERT_TRUE(server.ok());
  auto port = (*server)->Start();
  ASSERT_TRUE(port.ok()) << port.status();
  ClientOptions co;
  co.servers = {absl::StrCat("127.0.0.1:", *port)};
  co.connect_timeout = absl::Seconds(5);
  auto client = MakeClient("grpc+verbs", co);
  ASSERT_TRUE(client.ok());
  absl::Status s = (*client)->Connect();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not grpc+verbs"), std::string::npos) << s;
  (*server)->Shutdown();
  (*server)->Wait();
}

struct Mode {
  bool busy_poll;
  const char* name;
};

class VerbsTransportTest : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(HaveDevice()) << "needs an RDMA device: run through ctest -L rdma, which boots "
                                 "a Soft-RoCE guest";
  }

  void StartServer(RdmaOptions rdma = {}, int64_t corrupt_every = 0,
                   ExchangeHandler* handler = nullptr) {
    ServerOptions so;
    so.host = "127.0.0.1";
    so.rdma = rdma;
    so.rdma.busy_poll = GetParam().busy_poll;
    so.corrupt_every = corrupt_every;
    so.exchange_handler = handler;
    auto server = MakeServer("grpc+verbs", so);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    auto port = server_->Start();
    ASSERT_TRUE(port.ok()) << port.status();
    address_ = absl::StrCat("127.0.0.1:", *port);
  }

  std::unique_ptr<Client> Connect(RdmaOptions rdma = {}, bool validate = true) {
    ClientOptions co;
    co.servers = {address_};
    co.validate = validate;
    co.connect_timeout = absl::Seconds(10);
    co.rpc_timeout = absl::Seconds(30);
    co.rdma = rdma;
    co.rdma.busy_poll = GetParam().busy_poll;
    auto client = MakeClient("grpc+verbs", co);
    EXPECT_TRUE(client.ok());
    absl::Status s = (*client)->Connect();
    EXPECT_TRUE(s.ok()) << s;
    return s.ok() ? std::move(*client) : nullptr;
  }

  // Runs `count` ops with up to `window` in flight; returns the first error.
  static absl::Status Run(Client& c, Op op, int payload, int count, int window) {
    int started = 0, done = 0;
    absl::Status first;
    while (done < count) {
      while (started < count && started - done < window) c.Start(op, 0, payload, started++);
      auto completion = c.Next(absl::Now() + absl::Seconds(30));
      if (!completion.ok()) return completion.status();
      ++done;
      if (!completion->status.ok() && first.ok()) first = completion->status;
    }
    return first;
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

TEST_P(VerbsTransportTest, SmallEchoAndPushValidated) {
  StartServer();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<uint64_t> sizes = {32};
  Payload p(sizes, 1);
  auto id = client->Register(p);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_TRUE(Run(*client, Op::kEcho, *id, 200, 1).ok());
  EXPECT_TRUE(Run(*client, Op::kPush, *id, 200, 8).ok());
  auto info = client->GetInfo(0);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->transport, "grpc+verbs");
  EXPECT_EQ(info->rpcs_served, 400u);
  EXPECT_EQ(info->bytes_received, 400u * 32);
  EXPECT_NE(info->data_plane.find("RDMA"), std::string::npos) << info->data_plane;
  // A sweep unregisters each payload before the next: the send queues drain first, quickly.
  absl::Time start = absl::Now();
  client->Unregister(*id);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  std::vector<uint64_t> next_sizes = {4096};
  Payload next(next_sizes, 9);
  auto next_id = client->Register(next);
  ASSERT_TRUE(next_id.ok()) << next_id.status();
  EXPECT_TRUE(Run(*client, Op::kPush, *next_id, 50, 8).ok());
}

// A payload many times a slot goes in chunks; the PS's slots are larger than the worker's,
// so each echoed chunk is cut again on the way back.
TEST_P(VerbsTransportTest, LargePayloadIsChunkedBothWays) {
  RdmaOptions ps;
  ps.slot_bytes = 64 << 10;
  ps.queue_depth = 4;
  StartServer(ps);
  RdmaOptions worker;
  worker.slot_bytes = 16 << 10;
  worker.queue_depth = 3;
  auto client = Connect(worker);
  ASSERT_NE(client, nullptr);
  std::vector<uint64_t> sizes = {10, 10 << 10, 1 << 20, 3, (1 << 20) + 7};
  Payload p(sizes, 2);
  auto id = client->Register(p);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_TRUE(Run(*client, Op::kEcho, *id, 5, 1).ok());
  EXPECT_TRUE(Run(*client, Op::kPush, *id, 10, 4).ok());
  auto info = client->GetInfo(0);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->bytes_received, 15 * p.total_bytes());
}

// More buffers than one work request has SGEs: a chunk spans several chained writes.
TEST_P(VerbsTransportTest, ManyBuffersSpanSeveralWorkRequests) {
  StartServer();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<uint64_t> sizes(300);
  for (size_t i = 0; i < sizes.size(); ++i) sizes[i] = 1 + (i * 37) % 900;
  Payload p(sizes, 3);
  auto id = client->Register(p);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_TRUE(Run(*client, Op::kEcho, *id, 20, 1).ok());
  EXPECT_TRUE(Run(*client, Op::kPush, *id, 50, 16).ok());
}

// Many more payloads in flight than slots: credits hold the sender back, nothing is lost.
TEST_P(VerbsTransportTest, CreditsBoundTheWindow) {
  RdmaOptions small;
  small.queue_depth = 2;
  small.slot_bytes = 8 << 10;
  StartServer(small);
  auto client = Connect(small);
  ASSERT_NE(client, nullptr);
  std::vector<uint64_t> sizes = {100, 20000};
  Payload p(sizes, 4);
  auto id = client->Register(p);
  ASSERT_TRUE(id.ok());
  EXPECT_TRUE(Run(*client, Op::kPush, *id, 300, 64).ok());
  EXPECT_TRUE(Run(*client, Op::kEcho, *id, 100, 32).ok());
  auto info = client->GetInfo(0);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->rpcs_served, 400u);
}

// The default ring (16 slots): credits ride back in chunks, or alone once 8 wait; several
// multi-chunk payloads in flight must neither stall nor overrun a slot.
TEST_P(VerbsTransportTest, DefaultRingWithChunkedPayloadsInFlight) {
  StartServer();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<uint64_t> sizes = {2 << 20, 10, 300000};
  Payload p(sizes, 7);
  auto id = client->Register(p);
  ASSERT_TRUE(id.ok());
  EXPECT_TRUE(Run(*client, Op::kPush, *id, 40, 8).ok());
  EXPECT_TRUE(Run(*client, Op::kEcho, *id, 12, 4).ok());
  auto info = client->GetInfo(0);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->bytes_received, 52 * p.total_bytes());
}

// One slot each way: every credit goes back alone.
TEST_P(VerbsTransportTest, QueueDepthOne) {
  RdmaOptions one;
  one.queue_depth = 1;
  one.slot_bytes = 4096;
  StartServer(one);
  auto client = Connect(one);
  ASSERT_NE(client, nullptr);
  std::vector<uint64_t> sizes = {5000, 1, 20000};
  Payload p(sizes, 8);
  auto id = client->Register(p);
  ASSERT_TRUE(id.ok());
  EXPECT_TRUE(Run(*client, Op::kPush, *id, 30, 4).ok());
  EXPECT_TRUE(Run(*client, Op::kEcho, *id, 30, 4).ok());
}

// The PS's connections live as long as the workers' session calls: when a worker goes, its
// queue pair and completion-queue budget come back. Deep queues fill the PS's budget with a
// few workers, so a leak would show at once.
TEST_P(VerbsTransportTest, LeavingWorkersFreeTheirConnections) {
  RdmaOptions deep;
  deep.queue_depth = 2048;
  deep.slot_bytes = 4096;
  StartServer(deep);
  // Returns the connected client, or null with the reason in *status.
  auto connect = [&](absl::Status* status) -> std::unique_ptr<Client> {
    ClientOptions co;
    co.servers = {address_};
    co.rdma = deep;
    auto client = MakeClient("grpc+verbs", co);
    *status = client.ok() ? (*client)->Connect() : client.status();
    return status->ok() ? std::move(*client) : nullptr;
  };
  std::vector<std::unique_ptr<Client>> clients;
  absl::Status refused;
  for (int i = 0; i < 12 && refused.ok(); ++i) {
    if (auto c = connect(&refused)) clients.push_back(std::move(c));
  }
  ASSERT_FALSE(refused.ok()) << "the PS's completion-queue budget never ran out";
  EXPECT_NE(refused.message().find("is full"), std::string::npos) << refused;
  ASSERT_FALSE(clients.empty());
  clients.pop_back();  // one worker leaves
  absl::Status s;
  for (int attempt = 0; attempt < 50 && !connect(&s); ++attempt) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(s.ok()) << "the leaving worker's connection was not freed: " << s;
}

TEST_P(VerbsTransportTest, ValidateCatchesCorruptedBytes) {
  StartServer({}, /*corrupt_every=*/2);
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<uint64_t> sizes = {64, 4096, 100000};
  Payload p(sizes, 5);
  auto id = client->Register(p);
  ASSERT_TRUE(id.ok());
  absl::Status push = Run(*client, Op::kPush, *id, 4, 1);
  EXPECT_EQ(push.code(), absl::StatusCode::kDataLoss) << push;
  EXPECT_NE(push.message().find("buffer"), std::string::npos) << push;
  absl::Status echo = Run(*client, Op::kEcho, *id, 4, 1);
  EXPECT_EQ(echo.code(), absl::StatusCode::kDataLoss) << echo;
}

// The PS goes away: the worker's ops fail with a message, within seconds, not a hang.
TEST_P(VerbsTransportTest, VanishedPsEndsOpsWithAnError) {
  StartServer();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<uint64_t> sizes = {1 << 16};
  Payload p(sizes, 6);
  auto id = client->Register(p);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(Run(*client, Op::kEcho, *id, 3, 1).ok());
  server_->Shutdown();
  server_->Wait();
  server_.reset();
  absl::Time start = absl::Now();
  absl::Status s = Run(*client, Op::kEcho, *id, 1, 1);
  EXPECT_FALSE(s.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
  EXPECT_NE(s.message().find("PS 127.0.0.1"), std::string::npos) << s;
}

TEST_P(VerbsTransportTest, BadDeviceAndMtuAreNamed) {
  StartServer();
  RdmaOptions bad;
  bad.device = "nosuchdev0";
  ClientOptions co;
  co.servers = {address_};
  co.rdma = bad;
  auto client = MakeClient("grpc+verbs", co);
  ASSERT_TRUE(client.ok());
  absl::Status s = (*client)->Connect();
  EXPECT_NE(s.message().find("--rdma-device=nosuchdev0 not found"), std::string::npos) << s;
  co.rdma = {};
  co.rdma.gid_index = 60000;
  client = MakeClient("grpc+verbs", co);
  s = (*client)->Connect();
  EXPECT_NE(s.message().find("--rdma-gid-index=60000"), std::string::npos) << s;
}

// --- kExchange ----------------------------------------------------------------------------

// A request that fits one slot is lent to the handler in place and answered from there; a
// larger one is gathered into registered pooled memory and answered from there. Either way
// the reply is written over the request, and lands in the worker's reply payload.
TEST_P(VerbsTransportTest, ExchangeAnswersInTheSlotOrFromPooledMemory) {
  AddOneHandler handler;
  StartServer({}, 0, &handler);
  int exchanges = 0;
  uint64_t bytes = 0;
  for (bool validate : {true, false}) {
    auto client = Connect({}, validate);
    ASSERT_NE(client, nullptr);
    for (bool large : {false, true}) {
      Payload request(TrainingSizes(large), 1), reply(TrainingSizes(large), 2);
      auto req = client->Register(request);
      auto rep = client->Register(reply);
      ASSERT_TRUE(req.ok() && rep.ok());
      for (int step = 0; step < 3; ++step) {
        FillFloats(request, static_cast<float>(step * 10 + large));
        ASSERT_TRUE(ExchangeOnce(*client, *req, *rep).ok()) << "large " << large << " step " << step;
        EXPECT_EQ(CompareFloats(request, reply, [](float x) { return x + 1; }), "");
        ++exchanges;
        bytes += request.total_bytes();
      }
    }
    auto info = client->GetInfo(0);
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->rpcs_served, static_cast<uint64_t>(exchanges));
    EXPECT_EQ(info->bytes_received, bytes);
  }
  EXPECT_EQ(handler.calls(), exchanges);
  EXPECT_TRUE(handler.aliased());
}

// One worker, three exchanges held at once (one lent its slot, the others copied), with
// pushes between them whose acknowledgements overtake the held replies.
TEST_P(VerbsTransportTest, HeldExchangesAreOvertakenByPushes) {
  SyncStepHandler handler(3);
  StartServer({}, 0, &handler);
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<std::unique_ptr<Payload>> requests, replies;
  std::vector<int> req_ids, rep_ids;
  for (int k = 0; k < 3; ++k) {
    requests.push_back(std::make_unique<Payload>(TrainingSizes(false), 10 + k));
    replies.push_back(std::make_unique<Payload>(TrainingSizes(false), 20 + k));
    FillFloats(*requests[k], static_cast<float>(k + 1));
    auto req = client->Register(*requests[k]);
    auto rep = client->Register(*replies[k]);
    ASSERT_TRUE(req.ok() && rep.ok());
    req_ids.push_back(*req);
    rep_ids.push_back(*rep);
  }
  Payload push(std::vector<uint64_t>{1000}, 5);
  auto push_id = client->Register(push);
  ASSERT_TRUE(push_id.ok());
  for (int k = 0; k < 3; ++k) {
    client->StartExchange(0, req_ids[k], rep_ids[k], k);
    if (k < 2) client->Start(Op::kPush, 0, *push_id, 100 + k);
  }
  std::vector<uint64_t> order;
  for (int i = 0; i < 5; ++i) {
    auto done = client->Next(absl::Now() + absl::Seconds(30));
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_TRUE(done->status.ok()) << done->status;
    order.push_back(done->tag);
  }
  // The pushes were answered while the first exchanges were held.
  EXPECT_EQ(order[0], 100u);
  EXPECT_EQ(order[1], 101u);
  for (int k = 0; k < 3; ++k) {
    // The sum over the three requests, (1 + 2 + 3) + 3 * index.
    EXPECT_EQ(CompareFloats(*requests[k], *replies[k], [&](float x) {
                return 6.0f + 3 * (x - static_cast<float>(k + 1));
              }),
              "")
        << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Poll, VerbsTransportTest,
                         ::testing::Values(Mode{false, "event"}, Mode{true, "busy"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace psbench
