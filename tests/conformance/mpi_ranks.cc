// One rank of an MPI job that runs one conformance case (conformance.h) over grpc+mpi: a PS
// rank serves with the case's settings and checks its handler once every worker left; a
// worker rank runs the case's worker part with its one client. mpi_conformance_test launches
//
//   mpirun ... -np SERVERS conformance_mpi_ranks CASE ps : -np WORKERS conformance_mpi_ranks CASE worker
//
// Each rank is a GoogleTest program of one test and prints its result as one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "tests/conformance/conformance.h"
#include "transports/transport.h"

namespace psbench::testing::conformance {
namespace {

// This process's rank in the job, from the launcher's environment (Open MPI, PMIx, MPICH).
int WorldRank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    int rank = 0;
    if (const char* v = std::getenv(name); v != nullptr && absl::SimpleAtoi(v, &rank)) return rank;
  }
  return -1;
}

class PsRank final : public ::testing::Test, public PsSide {
 public:
  explicit PsRank(const Case& c) : PsSide(&handlers_), case_(c) {}

  void TestBody() override {
    auto made = MakeServer("grpc+mpi", PsOptions(case_, handlers_));
    ASSERT_TRUE(made.ok()) << made.status();
    server_ = std::move(*made);
    auto port = server_->Start();
    ASSERT_TRUE(port.ok()) << port.status();
    if (case_.during) case_.during(*this);
    server_->Wait();  // until every worker said goodbye, or Stop
    server_.reset();
    if (case_.after) case_.after(handlers_);
  }

  void Stop() override {
    server_->Shutdown();
    server_->Wait();
  }

 private:
  const Case& case_;
  Handlers handlers_;  // outlives the server
  std::unique_ptr<Server> server_;
};

class RankWorker final : public Worker {
 public:
  RankWorker(int index, int workers) : Worker(index, workers) {}
  ~RankWorker() override {
    // A PS waits for every worker's goodbye: a worker whose case failed before connecting
    // still joins the job and leaves it.
    if (own_ == nullptr) Connect(true);
    own_.reset();  // goodbye; MPI_Finalize
  }

  Client* Connect(bool validate) override {
    if (own_ != nullptr) return client_;
    ClientOptions options;  // no --ps: every PS rank of the job
    options.validate = validate;
    options.connect_timeout = absl::Seconds(30);
    options.rpc_timeout = absl::Seconds(60);
    auto made = MakeClient("grpc+mpi", options);
    EXPECT_TRUE(made.ok()) << made.status();
    if (!made.ok()) return nullptr;
    own_ = std::move(*made);
    absl::Status s = own_->Connect();
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) return nullptr;
    auto placement = own_->Placement();
    EXPECT_TRUE(placement && placement->worker_index == index() &&
                placement->num_workers == workers())
        << "the job placed this worker elsewhere than its rank says";
    return client_ = own_.get();
  }

  std::unique_ptr<Client> MakeAnother(bool) override {
    ADD_FAILURE() << "a grpc+mpi rank has one client";
    return nullptr;
  }
  void Disconnect() override { ADD_FAILURE() << "a grpc+mpi rank has one client"; }
  void StopServer(size_t) override { ADD_FAILURE() << "the PS is another rank"; }

 private:
  std::unique_ptr<Client> own_;
};

class WorkerRank final : public ::testing::Test {
 public:
  explicit WorkerRank(const Case& c) : case_(c) {}
  void TestBody() override {
    // PS ranks come first in the job (MPMD order), workers after them.
    int index = WorldRank() - case_.servers;
    EXPECT_GE(index, 0) << "not a worker rank of an MPI job (rank " << WorldRank() << ")";
    // Built even then: it joins the job and leaves it, so that the PS does not wait for it.
    RankWorker worker(std::max(index, 0), case_.workers);
    if (index >= 0) case_.worker(worker);
  }

 private:
  const Case& case_;
};

}  // namespace
}  // namespace psbench::testing::conformance

int main(int argc, char** argv) {
  using namespace psbench::testing::conformance;
  ::testing::InitGoogleTest(&argc, argv);
  const Case* c = argc == 3 ? FindCase(argv[1]) : nullptr;
  bool ps = argc == 3 && std::strcmp(argv[2], "ps") == 0;
  if (c == nullptr || !c->in_process_only.empty() || (!ps && std::strcmp(argv[2], "worker") != 0)) {
    std::fprintf(stderr, "usage: conformance_mpi_ranks CASE ps|worker (under mpirun; CASE one "
                         "that runs in an MPI job)\n");
    return 2;
  }
  ::testing::RegisterTest("MpiRank", (c->name + (ps ? "/ps" : "/worker")).c_str(), nullptr,
                          nullptr, __FILE__, __LINE__, [c, ps]() -> ::testing::Test* {
                            if (ps) return new PsRank(*c);
                            return new WorkerRank(*c);
                          });
  return RUN_ALL_TESTS();
}
