// The conformance suite with PS and workers in this process (conformance.h): each PS a real
// server, each worker a real client on a thread of its own. Tests are named
// Transports/ConformanceTest.CASE/TARGET.
#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/conformance/conformance.h"
#include "transports/loopback/loopback.h"
#include "transports/transport.h"

namespace psbench::testing::conformance {
namespace {

struct Target {
  std::string name;       // the test's parameter name
  std::string transport;  // "loopback" or a registered transport
  WireMode mode = WireMode::kNonSerialized;
  bool busy_poll = false;  // grpc+verbs: spin on the completion queues
};

class InProcessRun;

class ThreadWorker final : public Worker {
 public:
  ThreadWorker(InProcessRun& run, int index, int workers) : Worker(index, workers), run_(run) {}
  Client* Connect(bool validate) override;
  std::unique_ptr<Client> MakeAnother(bool validate) override;
  void Disconnect() override {
    own_.reset();
    client_ = nullptr;
  }
  void StopServer(size_t i) override;

 private:
  InProcessRun& run_;
  std::unique_ptr<Client> own_;
};

class InProcessRun final : public ::testing::Test, public PsSide {
 public:
  InProcessRun(Target target, const Case& c) : PsSide(&handlers_), target_(std::move(target)), case_(c) {}

  void TestBody() override {
    for (int i = 0; i < case_.servers; ++i) {
      StartServer();
      if (HasFatalFailure()) return;
    }
    std::thread during;
    if (case_.during) during = std::thread([this] { case_.during(*this); });
    std::vector<std::thread> workers;
    for (int w = 0; w < case_.workers; ++w) {
      workers.emplace_back([this, w] {
        ThreadWorker worker(*this, w, case_.workers);
        case_.worker(worker);
      });
    }
    for (auto& t : workers) t.join();
    if (during.joinable()) during.join();
    Stop();
    if (case_.after) case_.after(handlers_);
  }

  void TearDown() override { Stop(); }

  void Stop() override {
    for (size_t i = 0; i < servers_.size(); ++i) StopServer(i);
  }

  // Returns once PS `i` has stopped, whichever thread stops it.
  void StopServer(size_t i) {
    std::lock_guard lock(mu_);
    if (i >= servers_.size() || !servers_[i]) return;
    servers_[i]->Shutdown();
    servers_[i]->Wait();
    servers_[i].reset();
  }

  std::unique_ptr<Client> MakeClient(bool validate) {
    ClientOptions co;
    co.servers = addresses_;
    co.mode = target_.mode;
    co.validate = validate;
    co.connect_timeout = absl::Seconds(10);
    co.rpc_timeout = absl::Seconds(30);
    co.rdma.busy_poll = target_.busy_poll;
    if (target_.transport == "loopback") return loopback::NewLoopbackClient(co);
    auto client = psbench::MakeClient(target_.transport, co);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

 private:
  void StartServer() {
    ServerOptions so = PsOptions(case_, handlers_);
    so.rdma.busy_poll = target_.busy_poll;
    std::unique_ptr<Server> server;
    if (target_.transport == "loopback") {
      server = loopback::NewLoopbackServer(so);
    } else {
      auto made = MakeServer(target_.transport, so);
      ASSERT_TRUE(made.ok()) << made.status();
      server = std::move(*made);
    }
    auto port = server->Start();
    ASSERT_TRUE(port.ok()) << port.status();
    addresses_.push_back(absl::StrCat(target_.transport == "loopback" ? "loopback" : "127.0.0.1",
                                      ":", *port));
    servers_.push_back(std::move(server));  // before any worker or PS-side thread starts
  }

  const Target target_;
  const Case& case_;
  Handlers handlers_;  // outlives the servers: Stop() runs before the destructor
  std::mutex mu_;      // held while a PS stops, from a worker's or the PS side's thread
  std::vector<std::unique_ptr<Server>> servers_;
  std::vector<std::string> addresses_;
};

Client* ThreadWorker::Connect(bool validate) {
  if (client_ != nullptr) return client_;
  own_ = run_.MakeClient(validate);
  if (own_ == nullptr) return nullptr;
  absl::Status s = own_->Connect();
  EXPECT_TRUE(s.ok()) << s;
  if (!s.ok()) {
    own_.reset();
    return nullptr;
  }
  return client_ = own_.get();
}

std::unique_ptr<Client> ThreadWorker::MakeAnother(bool validate) { return run_.MakeClient(validate); }

void ThreadWorker::StopServer(size_t i) { run_.StopServer(i); }

std::vector<Target> Targets() {
#ifdef PSBENCH_CONFORMANCE_VERBS
  // Built into verbs_transport_test, which runs where there is an RDMA device (ctest -L rdma).
  return {{"grpc_verbs_event", "grpc+verbs"},
          {"grpc_verbs_busy", "grpc+verbs", WireMode::kNonSerialized, true}};
#else
  return {{"loopback", "loopback"},
          {"grpc_non_serialized", "grpc", WireMode::kNonSerialized},
          {"grpc_serialized", "grpc", WireMode::kSerialized}};
#endif
}

// Registered before main runs, as plain TESTs are (gtest_discover_tests lists them).
const bool registered = [] {
  for (const Case& c : Cases()) {
    for (const Target& t : Targets()) {
      ::testing::RegisterTest("Transports/ConformanceTest", absl::StrCat(c.name, "/", t.name).c_str(),
                              nullptr, t.name.c_str(), __FILE__, __LINE__,
                              [t, &c]() -> ::testing::Test* { return new InProcessRun(t, c); });
    }
  }
  return true;
}();

}  // namespace
}  // namespace psbench::testing::conformance
