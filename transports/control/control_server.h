// The PS's gRPC server, which serves the control plane (PsControl: GetInfo, the start
// barriers, worker sessions and goodbyes) whatever carries the payloads, and hosts a data
// plane's own services: gRPC's (raw and serialized payload methods, on the same completion
// queues), the verbs connection setup, the MPI hello. A data plane serves only its own
// methods: a grpc+verbs or grpc+mpi PS does not answer gRPC payload calls.
#ifndef PSBENCH_TRANSPORTS_CONTROL_CONTROL_SERVER_H_
#define PSBENCH_TRANSPORTS_CONTROL_CONTROL_SERVER_H_

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "psbench.grpc.pb.h"
#include "transports/transport.h"

namespace psbench::control {

struct DataCounters {
  uint64_t rpcs = 0;   // payload operations served
  uint64_t bytes = 0;  // payload bytes received
  DataCounts moved;    // the plane's own tally (transports/data_counts.h)
};

// What a data plane adds to the server; GetInfo reports it.
struct DataPlane {
  std::string transport = "grpc";
  std::string plane = "grpc";  // ClientCounts::plane's name for it
  // What carries the bytes ("gRPC over TCP", "RDMA WRITE WITH IMMEDIATE on rxe0 ..."); asked
  // at each GetInfo, as grpc+mpi knows it only once its MPI job has started.
  std::function<std::string()> describe;
  std::function<DataCounters()> counters;
  std::vector<grpc::Service*> services;          // registered as they are (sync or async)
  grpc::AsyncGenericService* generic = nullptr;  // gRPC's payload methods, raw and serialized
  // The same methods on gRPC's callback API instead (gRPC's threads serve them).
  grpc::CallbackGenericService* callback_generic = nullptr;
  // Posts the data plane's async calls on each serving queue, once at start.
  std::function<void(grpc::ServerCompletionQueue*)> post;
  // First thing when the server stops, while the queues still take the calls' last events.
  std::function<void()> on_stop;
  // Set by ControlServer: random, told to workers in GetInfo (ServerInfo.instance).
  std::string instance;
};

class ControlPlane;

class ControlServer final : public Server {
 public:
  // Serves on options.threads completion-queue threads (busy-polling with busy_poll).
  ControlServer(const ServerOptions& options, DataPlane data_plane);
  ~ControlServer() override;

  absl::StatusOr<int> Start() override;
  void Wait() override;
  void Shutdown() override;

 private:
  void Serve(grpc::ServerCompletionQueue* q);
  void Stop();

  ServerOptions options_;
  DataPlane data_plane_;
  wire::PsControl::AsyncService control_service_;
  std::unique_ptr<ControlPlane> control_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool shutdown_requested_ = false;
  bool started_ = false;
  std::once_flag stop_once_;
  std::shared_mutex lifecycle_;
  bool stopping_ = false;
};

}  // namespace psbench::control

#endif  // PSBENCH_TRANSPORTS_CONTROL_CONTROL_SERVER_H_
