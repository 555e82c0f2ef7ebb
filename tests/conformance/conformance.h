// The transport conformance suite: what every transport promises at the seam
// (transports/transport.h), written once as cases and run by two drivers.
//
// - In one process (in_process.cc): PS and workers are threads of the test, each worker with
//   a client of its own: the loopback transport and grpc in both wire modes (conformance_test),
//   grpc+verbs in both polling modes (verbs_transport_test, on an RDMA device).
// - As ranks of one real mpirun (mpi_ranks.cc, driven by mpi_conformance_test): grpc+mpi, whose
//   PS and workers are processes of one MPI job; every rank runs the case's part for its role.
//
// A case is therefore split along the processes it would have: what each worker does with its
// one client, what a PS does while they run, and what the PS checks of its handler after every
// worker left. GoogleTest assertions work on either side, on any thread.
#ifndef PSBENCH_TESTS_CONFORMANCE_CONFORMANCE_H_
#define PSBENCH_TESTS_CONFORMANCE_CONFORMANCE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tests/integration/exchange_handlers.h"
#include "transports/transport.h"

namespace psbench::testing::conformance {

// The workers of the synchronous-step case, which its handler waits for.
inline constexpr int kSyncWorkers = 3;

// Every handler a case's PS may serve exchanges with; one set per PS process, shared by the
// PS of one process.
struct Handlers {
  AddOneHandler add_one;
  SyncStepHandler sync{kSyncWorkers};
  HoldingHandler holding;
  FailingHandler failing{absl::ResourceExhaustedError("optimizer state does not fit")};
  FailingHandler dropping{absl::UnknownError("unused"), /*drop=*/true};
};
enum class Handler { kNone, kAddOne, kSync, kHolding, kFailing, kDropping };
ExchangeHandler* Pick(Handlers& handlers, Handler which);

// One worker of a case: its index and its client, one per process where a worker is a
// process of its own (grpc+mpi).
class Worker {
 public:
  virtual ~Worker() = default;
  int index() const { return index_; }
  int workers() const { return workers_; }
  // This worker's client, connected (once; later calls return the same client); nullptr after
  // a failed assertion. `validate` as --validate.
  virtual Client* Connect(bool validate) = 0;
  // How this transport's errors name PS `i`: "PS <address>", which grpc+mpi follows with the
  // PS's MPI rank. Valid after Connect.
  std::string Ps(size_t i) const;

  // In-process targets only (Case::in_process_only): a second client, not connected, as
  // another worker process would make; the worker's own client leaving; PS `i` stopping.
  virtual std::unique_ptr<Client> MakeAnother(bool validate) = 0;
  virtual void Disconnect() = 0;
  virtual void StopServer(size_t i) = 0;

 protected:
  Worker(int index, int workers) : index_(index), workers_(workers) {}
  Client* client_ = nullptr;  // set by Connect

 private:
  int index_;
  int workers_;
};

// A PS process of a case, while its workers run.
class PsSide {
 public:
  virtual ~PsSide() = default;
  Handlers& handlers() { return *handlers_; }
  // Stops this process's PS and waits until it stopped.
  virtual void Stop() = 0;

 protected:
  explicit PsSide(Handlers* handlers) : handlers_(handlers) {}

 private:
  Handlers* handlers_;
};

struct Case {
  std::string name;  // the GoogleTest name
  int servers = 1;   // PS, each serving with the same settings
  int workers = 1;
  Handler handler = Handler::kNone;
  int64_t corrupt_every = 0;  // ServerOptions::corrupt_every
  int max_connections = 1024;
  uint64_t max_message_bytes = uint64_t{1} << 30;  // ServerOptions::max_message_bytes
  // Why the case cannot run where PS and workers are ranks of one MPI job; empty when it can.
  std::string in_process_only = {};
  std::function<void(Worker&)> worker = {};  // each worker, on a thread or in a process of its own
  std::function<void(PsSide&)> during = {};  // optional: each PS while the workers run
  std::function<void(Handlers&)> after = {}; // optional: once every worker left and the PS stopped
};

// The options a case's PS serves with, on 127.0.0.1, a free port and two threads.
ServerOptions PsOptions(const Case& c, Handlers& handlers);

const std::vector<Case>& Cases();
const Case* FindCase(const std::string& name);

}  // namespace psbench::testing::conformance

#endif  // PSBENCH_TESTS_CONFORMANCE_CONFORMANCE_H_
