// One rank of an MPI job that tests kExchange over grpc+mpi at the transport seam: the PS rank
// runs a real MpiServer with a test handler, each worker rank a real MpiClient (one per
// process: a process joins one MPI job). mpi_exchange_test launches it:
//
//   mpirun ... -np 1 mpi_exchange_ranks ps CASE : -np W mpi_exchange_ranks worker CASE
//
// Every rank prints "ps: ok" or "worker I: ok", or "...: FAIL <why>" lines, and exits 0 or 1.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/integration/exchange_handlers.h"
#include "transports/transport.h"

namespace psbench::testing {
namespace {

class Checker {
 public:
  explicit Checker(std::string who) : who_(std::move(who)) {}
  void Expect(bool ok, const std::string& what) {
    if (ok) return;
    std::printf("%s: FAIL %s\n", who_.c_str(), what.c_str());
    std::fflush(stdout);
    failed_ = true;
  }
  int Finish() {
    if (!failed_) std::printf("%s: ok\n", who_.c_str());
    std::fflush(stdout);
    return failed_ ? 1 : 0;
  }

 private:
  std::string who_;
  bool failed_ = false;
};

std::string Text(const absl::Status& s) { return s.ToString(); }

// --- the PS rank -----------------------------------------------------------------------------

int RunPs(const std::string& test_case) {
  Checker check("ps");
  AddOneHandler add_one;
  SyncStepHandler sync(3);
  HoldingHandler holding;
  FailingHandler failing(absl::ResourceExhaustedError("optimizer state does not fit"));
  ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  if (test_case == "immediate" || test_case == "corrupt" || test_case == "invalid") {
    options.exchange_handler = &add_one;
  }
  if (test_case == "sync") options.exchange_handler = &sync;
  if (test_case == "shutdown") options.exchange_handler = &holding;
  if (test_case == "error") options.exchange_handler = &failing;
  if (test_case == "corrupt") options.corrupt_every = 1;
  auto server = MakeServer("grpc+mpi", options);
  if (!server.ok()) {
    check.Expect(false, Text(server.status()));
    return check.Finish();
  }
  auto port = (*server)->Start();
  check.Expect(port.ok(), Text(port.status()));
  if (!port.ok()) return check.Finish();
  if (test_case == "shutdown") {
    // Both workers' exchanges held; then the PS stops without answering them.
    check.Expect(holding.WaitHeld(2, std::chrono::seconds(60)), "the exchanges never arrived");
    absl::Time start = absl::Now();
    (*server)->Shutdown();
    (*server)->Wait();
    check.Expect(absl::Now() - start < absl::Seconds(10), "Shutdown took too long");
    server->reset();
    holding.AnswerAll(absl::OkStatus());  // after the server is gone: harmless
    return check.Finish();
  }
  (*server)->Wait();  // until every worker said goodbye
  server->reset();
  if (test_case == "immediate") {
    check.Expect(add_one.calls() == 3, absl::StrCat(add_one.calls(), " calls, expected 3"));
    // Received straight into pooled memory, the reply overwrites the request there.
    check.Expect(add_one.aliased(), "no reply was written over its request");
  }
  if (test_case == "corrupt") check.Expect(add_one.calls() == 0, "the handler saw a damaged request");
  if (test_case == "sync") {
    check.Expect(sync.steps() == 3, absl::StrCat(sync.steps(), " steps, expected 3"));
    check.Expect(sync.max_held() == 3, absl::StrCat("held at most ", sync.max_held()));
  }
  return check.Finish();
}

// --- the worker ranks ------------------------------------------------------------------------

struct Worker {
  std::unique_ptr<Client> client;
  int index = 0;
  std::string ps;  // "PS host:port (MPI rank R): "

  // One exchange, waited for (bounded).
  absl::Status Exchange(int request, int reply, uint64_t tag = 7) {
    client->StartExchange(0, request, reply, tag);
    auto done = client->Next(absl::Now() + absl::Seconds(60));
    if (!done.ok()) return done.status();
    return done->status;
  }
};

int RunWorker(const std::string& test_case) {
  ClientOptions options;  // no --ps: the job's PS rank
  options.validate = true;
  options.connect_timeout = absl::Seconds(30);
  options.rpc_timeout = absl::Seconds(60);
  auto client = MakeClient("grpc+mpi", options);
  if (!client.ok()) {
    std::printf("worker ?: FAIL %s\n", Text(client.status()).c_str());
    return 1;
  }
  Worker w;
  w.client = std::move(*client);
  if (absl::Status s = w.client->Connect(); !s.ok()) {
    std::printf("worker ?: FAIL %s\n", Text(s).c_str());
    return 1;
  }
  w.index = w.client->Placement()->worker_index;
  w.ps = absl::StrCat("PS ", w.client->server_address(0), " (MPI rank ");
  Checker check(absl::StrCat("worker ", w.index));
  Payload request(TrainingSizes(true), 1), reply(TrainingSizes(true), 2);
  auto req = w.client->Register(request);
  auto rep = w.client->Register(reply);
  check.Expect(req.ok() && rep.ok(), "Register failed");
  if (!req.ok() || !rep.ok()) return check.Finish();

  if (test_case == "immediate") {
    for (int step = 0; step < 3; ++step) {
      FillFloats(request, static_cast<float>(step * 10));
      absl::Status s = w.Exchange(*req, *rep);
      check.Expect(s.ok(), Text(s));
      std::string diff = CompareFloats(request, reply, [](float x) { return x + 1; });
      check.Expect(diff.empty(), absl::StrCat("step ", step, ": ", diff));
    }
    auto info = w.client->GetInfo(0);
    check.Expect(info.ok() && info->rpcs_served == 3 && info->bytes_received == 3 * request.total_bytes(),
                 info.ok() ? absl::StrCat("PS counted ", info->rpcs_served, " RPCs, ",
                                          info->bytes_received, " bytes")
                           : Text(info.status()));
  } else if (test_case == "sync") {
    for (int step = 1; step <= 3; ++step) {
      FillFloats(request, static_cast<float>(step * (w.index + 1)));
      absl::Status s = w.Exchange(*req, *rep, step);
      check.Expect(s.ok(), Text(s));
      // The sum over the 3 workers of step * (w + 1) + index.
      std::string diff = CompareFloats(request, reply, [&](float x) {
        float index = x - static_cast<float>(step * (w.index + 1));
        return static_cast<float>(step * 6) + 3 * index;
      });
      check.Expect(diff.empty(), absl::StrCat("step ", step, ": ", diff));
    }
  } else if (test_case == "nohandler") {
    for (int i = 0; i < 2; ++i) {
      absl::Status s = w.Exchange(*req, *rep);
      check.Expect(s.code() == absl::StatusCode::kFailedPrecondition &&
                       s.message().find("does not serve exchanges") != std::string::npos &&
                       s.message().rfind(w.ps, 0) == 0,
                   Text(s));
      // The PS serves on.
      for (Op op : {Op::kEcho, Op::kPush}) {
        w.client->Start(op, 0, *req, 1);
        auto done = w.client->Next(absl::Now() + absl::Seconds(60));
        check.Expect(done.ok() && done->status.ok(),
                     done.ok() ? Text(done->status) : Text(done.status()));
      }
    }
  } else if (test_case == "error") {
    absl::Status s = w.Exchange(*req, *rep);
    check.Expect(s.code() == absl::StatusCode::kResourceExhausted && s.message().rfind(w.ps, 0) == 0 &&
                     absl::EndsWith(s.message(), "): optimizer state does not fit"),
                 Text(s));
  } else if (test_case == "invalid") {
    Payload other(std::vector<uint64_t>{16, 4096}, 3);
    auto o = w.client->Register(other);
    for (int bad : {*o, 99, -1}) {
      absl::Status s = w.Exchange(*req, bad);
      check.Expect(s.code() == absl::StatusCode::kInvalidArgument, Text(s));
    }
    w.client->Start(Op::kExchange, 0, *req, 1);
    auto done = w.client->Next(absl::Now() + absl::Seconds(10));
    check.Expect(done.ok() && done->status.code() == absl::StatusCode::kInvalidArgument,
                 done.ok() ? Text(done->status) : Text(done.status()));
    absl::Status s = w.Exchange(*req, *rep);  // and a good one still works
    check.Expect(s.ok(), Text(s));
  } else if (test_case == "corrupt") {
    absl::Status s = w.Exchange(*req, *rep);
    check.Expect(s.code() == absl::StatusCode::kDataLoss && s.message().find("checksum") != std::string::npos &&
                     s.message().rfind(w.ps, 0) == 0,
                 Text(s));
  } else if (test_case == "shutdown") {
    absl::Status s = w.Exchange(*req, *rep);
    check.Expect(s.code() == absl::StatusCode::kUnavailable &&
                     s.message().find("shut down") != std::string::npos && s.message().rfind(w.ps, 0) == 0,
                 Text(s));
  } else {
    check.Expect(false, "unknown case " + test_case);
  }
  int rc = check.Finish();
  w.client.reset();  // says goodbye to the PS, finalises MPI
  return rc;
}

}  // namespace
}  // namespace psbench::testing

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "ps") != 0 && std::strcmp(argv[1], "worker") != 0)) {
    std::fprintf(stderr, "usage: mpi_exchange_ranks ps|worker CASE (under mpirun)\n");
    return 2;
  }
  return std::strcmp(argv[1], "ps") == 0 ? psbench::testing::RunPs(argv[2])
                                         : psbench::testing::RunWorker(argv[2]);
}
