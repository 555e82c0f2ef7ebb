// The PS protocol's two halves against each other: PsClient (the worker's) over real gRPC
// servers in this process, each with a ParamStore (the PS's) reporting what it applied.
#include "ps/ps_client.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ps/param_store.h"

namespace psbench::testing {
namespace {

class PsClientTest : public ::testing::Test {
 protected:
  // `n` PS, each a grpc server with its own store.
  void StartPs(int n) {
    for (int i = 0; i < n; ++i) {
      auto store = std::make_unique<ParamStore>();
      ServerOptions so;
      so.host = "127.0.0.1";
      so.threads = 2;
      so.exchange_handler = store.get();
      ParamStore* s = store.get();
      so.describe_process = [s] {
        ServerInfo info;
        if (auto report = s->Report()) info.updates = report->ToJson().dump();
        return info;
      };
      auto server = MakeServer("grpc", so);
      ASSERT_TRUE(server.ok()) << server.status();
      auto port = (*server)->Start();
      ASSERT_TRUE(port.ok()) << port.status();
      addresses_.push_back(absl::StrCat("127.0.0.1:", *port));
      stores_.push_back(std::move(store));
      servers_.push_back(std::move(*server));
    }
  }
  void TearDown() override {
    for (auto& server : servers_) {
      server->Shutdown();
      server->Wait();
    }
  }

  std::unique_ptr<Client> Connect() {
    ClientOptions co;
    co.servers = addresses_;
    co.validate = true;
    co.rpc_timeout = absl::Seconds(30);
    auto client = MakeClient("grpc", co);
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok()) return nullptr;
    absl::Status s = (*client)->Connect();
    EXPECT_TRUE(s.ok()) << s;
    return s.ok() ? std::move(*client) : nullptr;
  }

  static PsClient::Options Run(const std::string& run_id, uint32_t worker, uint32_t workers, bool sync) {
    return {.run_id = run_id, .worker = worker, .num_workers = workers, .sync = sync,
            .learning_rate = 0.5f, .momentum = 0.f, .seed = 7, .round_timeout = absl::Seconds(30), .buckets = {}};
  }

  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<ParamStore>> stores_;
  std::vector<std::unique_ptr<Server>> servers_;
};

TEST_F(PsClientTest, PlacesTensorsByBytesInModelOrder) {
  StartPs(2);
  auto client = Connect();
  ASSERT_TRUE(client);
  auto ps = PsClient::Create(*client, {400, 100, 100, 300, 4}, Run("placement", 0, 1, true));
  ASSERT_TRUE(ps.ok()) << ps.status();
  // 400 -> PS 0; 100 -> PS 1 (0 bytes); 100 -> PS 1 (100 < 400); 300 -> PS 1 (200 < 400);
  // 4 -> PS 0 (400 < 500).
  EXPECT_EQ((*ps)->shard(0).tensors, (std::vector<size_t>{0, 4}));
  EXPECT_EQ((*ps)->shard(1).tensors, (std::vector<size_t>{1, 2, 3}));
  EXPECT_EQ((*ps)->shard(0).bytes, 404u);
  EXPECT_EQ((*ps)->shard(1).bytes, 500u);
  nlohmann::json placement = (*ps)->PlacementJson();
  ASSERT_EQ(placement.size(), 2u);
  EXPECT_EQ(placement[1]["ps"], addresses_[1]);
  EXPECT_EQ(placement[1]["tensors"], 3);
  EXPECT_EQ(placement[1]["bytes"], 500);
}

TEST_F(PsClientTest, TensorsMustBeFloat32) {
  StartPs(1);
  auto client = Connect();
  ASSERT_TRUE(client);
  auto ps = PsClient::Create(*client, {8, 6}, Run("bad", 0, 1, true));
  ASSERT_FALSE(ps.ok());
  EXPECT_NE(ps.status().message().find("tensor 1: 6 bytes"), std::string::npos) << ps.status();
}

// Init sets the PS; a sync step of one worker applies SGD to its gradients; what comes back is
// the PS's parameters, and the report accounts for exactly that step.
TEST_F(PsClientTest, SyncStepComesBackAppliedAndAccounted) {
  StartPs(2);
  auto client = Connect();
  ASSERT_TRUE(client);
  auto made = PsClient::Create(*client, {16, 8, 12}, Run("sync", 0, 1, true));
  ASSERT_TRUE(made.ok()) << made.status();
  PsClient& ps = **made;
  for (int t = 0; t < 3; ++t) {
    for (uint64_t i = 0; i < ps.tensor_bytes(t) / 4; ++i) ps.outgoing(t)[i] = 10.f * t + i;
  }
  ASSERT_TRUE(ps.Exchange(ExchangeHeader::kInit, 0).ok());
  for (int t = 0; t < 3; ++t) {
    for (uint64_t i = 0; i < ps.tensor_bytes(t) / 4; ++i) {
      EXPECT_EQ(ps.incoming(t)[i], 10.f * t + i);
      ps.outgoing(t)[i] = 2.f;  // the gradient
    }
  }
  absl::Status step = ps.Exchange(ExchangeHeader::kStep, 0);
  ASSERT_TRUE(step.ok()) << step;
  for (int t = 0; t < 3; ++t) {
    for (uint64_t i = 0; i < ps.tensor_bytes(t) / 4; ++i) EXPECT_EQ(ps.incoming(t)[i], 10.f * t + i - 1.f);
  }
  int reads = -1;
  auto reports = ps.ReadBack([] {}, &reads);
  ASSERT_TRUE(reports.ok()) << reports.status();
  EXPECT_EQ(reads, 0) << "sync: the last answers are final";
  ASSERT_EQ(reports->size(), 2u);
  for (size_t p = 0; p < 2; ++p) {
    EXPECT_EQ((*reports)[p].updates, 1u);
    EXPECT_EQ((*reports)[p].run_id, ps.run_hash());
    ASSERT_EQ((*reports)[p].workers.size(), 1u);
    EXPECT_EQ((*reports)[p].workers[0].steps.ToString(), "0");
    EXPECT_EQ(ps.ReplyHeader(p).updates_applied, 1u);
  }
}

// Two workers, sync, a step in parts: buckets {3, 4} then {0, 1, 2} over 2 PS (PS 0 holds
// 0 and 4, PS 1 holds 1, 2 and 3) are 4 parts; each worker starts them in its own order, and
// every part comes back with the mean applied; the step counts once on each PS.
TEST_F(PsClientTest, SyncStepInPartsFromTwoWorkers) {
  StartPs(2);
  auto c0 = Connect(), c1 = Connect();
  ASSERT_TRUE(c0 && c1);
  const std::vector<uint64_t> bytes = {400, 100, 100, 300, 4};
  std::vector<std::unique_ptr<PsClient>> workers;
  for (uint32_t w = 0; w < 2; ++w) {
    PsClient::Options o = Run("parts", w, 2, true);
    o.buckets = {{4, 3}, {0, 1, 2}};
    auto made = PsClient::Create(w == 0 ? *c0 : *c1, bytes, o);
    ASSERT_TRUE(made.ok()) << made.status();
    workers.push_back(std::move(*made));
  }
  PsClient& ps0 = *workers[0];
  ASSERT_EQ(ps0.num_parts(), 4u);
  EXPECT_EQ(ps0.part(0).tensors, (std::vector<size_t>{4}));
  EXPECT_EQ(ps0.part(1).tensors, (std::vector<size_t>{3}));
  EXPECT_EQ(ps0.part(2).tensors, (std::vector<size_t>{0}));
  EXPECT_EQ(ps0.part(3).tensors, (std::vector<size_t>{1, 2}));
  EXPECT_EQ(ps0.part(3).ps, 1u);
  EXPECT_EQ(ps0.part(3).bytes, 200u);
  for (auto& ps : workers) {
    for (int t = 0; t < 5; ++t) std::fill(ps->outgoing(t), ps->outgoing(t) + bytes[t] / 4, 10.f + t);
    ASSERT_TRUE(ps->Exchange(ExchangeHeader::kInit, 0).ok());
    for (int t = 0; t < 5; ++t) std::fill(ps->outgoing(t), ps->outgoing(t) + bytes[t] / 4, 2.f);
  }
  std::fill(workers[1]->outgoing(1), workers[1]->outgoing(1) + 25, 4.f);  // mean 3 for tensor 1
  // Worker 0 starts its parts first to last, worker 1 last to first; all in flight at once.
  for (size_t i = 0; i < 4; ++i) workers[0]->StartPart(i, 0);
  for (size_t i = 4; i-- > 0;) workers[1]->StartPart(i, 0);
  for (auto& ps : workers) {
    std::vector<bool> back(4, false);
    for (int k = 0; k < 4; ++k) {
      auto i = ps->NextPart(absl::Now() + absl::Seconds(30));
      ASSERT_TRUE(i.ok()) << i.status();
      ASSERT_TRUE(i->has_value()) << "no part back within 30 s";
      EXPECT_FALSE(back[**i]) << "part " << **i << " twice";
      back[**i] = true;
    }
    for (int t = 0; t < 5; ++t) {
      const float want = 10.f + t - 0.5f * (t == 1 ? 3.f : 2.f);
      for (uint64_t i = 0; i < bytes[t] / 4; ++i) ASSERT_EQ(ps->incoming(t)[i], want) << t << " " << i;
    }
  }
  int reads = -1;
  auto reports = ps0.ReadBack([] {}, &reads);
  ASSERT_TRUE(reports.ok()) << reports.status();
  for (size_t p = 0; p < 2; ++p) {
    EXPECT_EQ((*reports)[p].updates, 1u);
    for (const auto& w : (*reports)[p].workers) EXPECT_EQ(w.steps.ToString(), "0");
  }
}

TEST_F(PsClientTest, BucketsMustCoverEveryTensorOnce) {
  StartPs(1);
  auto client = Connect();
  ASSERT_TRUE(client);
  for (const auto& [buckets, words] : std::vector<std::pair<std::vector<std::vector<size_t>>, std::string>>{
           {{{0}, {1}}, "tensor 2 is in no bucket"},
           {{{0, 1}, {1, 2}}, "bucket 1 lists tensor 1 again"},
           {{{0, 1, 2, 3}}, "bucket 0 lists tensor 3 of 3"}}) {
    PsClient::Options o = Run("buckets", 0, 1, true);
    o.buckets = buckets;
    auto made = PsClient::Create(*client, {4, 4, 4}, o);
    ASSERT_FALSE(made.ok());
    EXPECT_EQ(made.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(made.status().message(), words);
  }
}

// Async: two workers push; each read back is consistent with the report taken with it.
TEST_F(PsClientTest, AsyncReadBackIsConsistentWithTheReport) {
  StartPs(2);
  auto c0 = Connect(), c1 = Connect();
  ASSERT_TRUE(c0 && c1);
  auto w0 = PsClient::Create(*c0, {64, 64}, Run("async", 0, 2, false));
  auto w1 = PsClient::Create(*c1, {64, 64}, Run("async", 1, 2, false));
  ASSERT_TRUE(w0.ok() && w1.ok());
  for (PsClient* ps : {w0->get(), w1->get()}) {
    for (int t = 0; t < 2; ++t) std::fill(ps->outgoing(t), ps->outgoing(t) + 16, 100.f);
    ASSERT_TRUE(ps->Exchange(ExchangeHeader::kInit, 0).ok());
  }
  for (int step = 0; step < 3; ++step) {
    for (PsClient* ps : {w0->get(), w1->get()}) {
      for (int t = 0; t < 2; ++t) std::fill(ps->outgoing(t), ps->outgoing(t) + 16, 1.f);
      absl::Status s = ps->Exchange(ExchangeHeader::kStep, step);
      ASSERT_TRUE(s.ok()) << s;
    }
  }
  int reads = 0;
  auto reports = (*w0)->ReadBack([] {}, &reads);
  ASSERT_TRUE(reports.ok()) << reports.status();
  EXPECT_GE(reads, 1);
  for (size_t p = 0; p < 2; ++p) {
    EXPECT_EQ((*reports)[p].updates, 6u);
    ASSERT_EQ((*reports)[p].workers.size(), 2u);
    EXPECT_EQ((*reports)[p].workers[1].steps.ToString(), "0-2");
  }
  // 6 pushes of 1 at learning rate 0.5.
  for (int t = 0; t < 2; ++t) EXPECT_EQ((*w0)->incoming(t)[5], 97.f);
}

// A PS that another run took over is not read as this run's.
TEST_F(PsClientTest, ReportOfAnotherRunIsRefused) {
  StartPs(1);
  auto c0 = Connect(), c1 = Connect();
  ASSERT_TRUE(c0 && c1);
  auto first = PsClient::Create(*c0, {8}, Run("first", 0, 1, true));
  auto second = PsClient::Create(*c1, {8}, Run("second", 0, 1, true));
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_TRUE((*first)->Exchange(ExchangeHeader::kInit, 0).ok());
  EXPECT_TRUE((*first)->Report(0).ok());
  ASSERT_TRUE((*second)->Exchange(ExchangeHeader::kInit, 0).ok());
  auto report = (*first)->Report(0);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("is serving another run"), std::string::npos) << report.status();
}

// An error names what was being done and the PS.
TEST_F(PsClientTest, StepBeforeInitNamesTheStepAndThePs) {
  StartPs(1);
  auto client = Connect();
  ASSERT_TRUE(client);
  auto ps = PsClient::Create(*client, {8}, Run("no-init", 0, 1, true));
  ASSERT_TRUE(ps.ok());
  absl::Status s = (*ps)->Exchange(ExchangeHeader::kStep, 4);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("step 4 on PS " + addresses_[0]), std::string::npos) << s;
  EXPECT_NE(s.message().find("holds no parameters"), std::string::npos) << s;
}

}  // namespace
}  // namespace psbench::testing
