// psbench-floor-grpc: the gRPC floors psbench is compared against, three APIs.
//
// --api=generic (grpc_generic_floor.h): the strongest program on gRPC's own API that moves
// bytes as psbench's non-serialized mode does (async generic calls of one ByteBuffer).
//
// --api=async (grpc_async_floor.h): the minimal protobuf async echo, the strongest program on
// the API psbench's serialized mode uses.
//
// --api=unary (this file): "the simplest possible gRPC unary echo a user would write", with
// protobuf. Synchronous server, synchronous stub with one ClientContext per call for
// pingpong, and for stream the plain async stub + CompletionQueue keeping --window Push calls
// in flight. No tuning beyond lifting the message size limits.
//
// floor_common.h holds only the flag handling and result output shared with the TCP floor.
//
//   psbench-floor-grpc [--api=generic|async|unary] --server --port=0 [--once] [--cpu=0]
//   psbench-floor-grpc [--api=generic|async|unary] --connect=127.0.0.1:P --test=pingpong|stream
//                      --size=N | --sizes=MIN:MAX [--iterations=N] [--warmup=N]
//                      [--window=16] [--json=FILE] [--cpu=1]

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/flag.h"
#include "baseline.grpc.pb.h"
#include "baseline.pb.h"
#include "floor_common.h"
#include "fmt/core.h"
#include "grpc_channel.h"
#include "grpc_async_floor.h"
#include "grpc_generic_floor.h"

ABSL_FLAG(std::string, api, "unary",
          "Server and client alike: unary (protobuf, synchronous echo), async (protobuf, async "
          "echo on completion queues, as psbench's serialized mode) or generic (async generic "
          "calls of one ByteBuffer, as psbench's non-serialized mode).");
ABSL_FLAG(bool, server, false, "Run as the server (Echo for pingpong, Push for stream).");
ABSL_FLAG(int32_t, port, 0, "Server: port on 127.0.0.1 (0 = any free port; always printed).");
ABSL_FLAG(bool, once, false, "Server: exit after the first client says Bye.");
ABSL_FLAG(std::string, connect, "", "Client: server address HOST:PORT (loopback only).");
ABSL_FLAG(std::string, test, "pingpong", "Client: pingpong or stream.");
ABSL_FLAG(std::string, size, "", "Client: message size in bytes; K/M/G suffixes are binary.");
ABSL_FLAG(std::string, sizes, "", "Client: MIN:MAX doubling sweep (instead of --size).");
ABSL_FLAG(int64_t, iterations, 0,
          "Client: measured calls per size (0 = pingpong 10000 up to 64K else 1000; "
          "stream 2000 below 1M else 500).");
ABSL_FLAG(int64_t, warmup, -1, "Client: untimed calls per size first (-1 = 10% of iterations).");
ABSL_FLAG(int32_t, window, 16, "Client, stream: most Push calls in flight.");
ABSL_FLAG(std::string, json, "", "Client: append one JSON Lines record per size to FILE.");
ABSL_FLAG(std::string, cpu, "", "Pin the process to these CPUs: 0, 0,1 or 0-1.");

namespace floors = psbench::floors;

namespace {

using psbench::floor::Ack;
using psbench::floor::Baseline;
using psbench::floor::Blob;

using floors::fatal;
using floors::usage_error;

constexpr std::string_view kProg = "psbench-floor-grpc";

// ---- server ----------------------------------------------------------------

class BaselineService final : public Baseline::Service {
 public:
  explicit BaselineService(bool once) : once_(once) {}

  grpc::Status Echo(grpc::ServerContext*, const Blob* request, Blob* response) override {
    response->set_data(request->data());
    return grpc::Status::OK;
  }
  grpc::Status Push(grpc::ServerContext*, const Blob*, Ack*) override { return grpc::Status::OK; }
  grpc::Status Bye(grpc::ServerContext*, const Ack*, Ack*) override {
    // Shutdown() from inside a handler would wait on this very call, so hand
    // the exit to main's sigwait instead.
    if (once_) kill(getpid(), SIGUSR1);
    return grpc::Status::OK;
  }

 private:
  bool once_;
};

int run_server() {
  const int32_t port = floors::server_port_from_flags();
  floors::pin_cpus(absl::GetFlag(FLAGS_cpu));

  BaselineService service(absl::GetFlag(FLAGS_once));
  floors::FloorServer s = floors::StartFloorServer(
      port, [&service](grpc::ServerBuilder& builder) { builder.RegisterService(&service); }, /*with_queue=*/false);
  int sig = 0;
  sigwait(&s.stop, &sig);  // gRPC's threads have the stop signals blocked
  s.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  s.server->Wait();
  return 0;
}

// ---- client ----------------------------------------------------------------

int run_client() {
  const floors::ClientOptions opts = floors::client_options_from_flags();
  const std::string target = fmt::format("{}:{}", inet_ntoa(opts.server.sin_addr), ntohs(opts.server.sin_port));
  floors::Results results("grpc-unary-baseline", "gRPC unary baseline", opts);
  floors::pin_cpus(opts.cpu);

  std::unique_ptr<Baseline::Stub> stub = Baseline::NewStub(floors::ConnectedChannel(target));
  grpc::CompletionQueue cq;

  results.print_header();
  for (const uint64_t size : opts.sizes) {
    const floors::SizeRun run = floors::plan_size(opts, size);
    // Built once per size, as a user would; each call still serializes it.
    Blob request;
    std::string payload(size, '\0');
    floors::fill_payload(payload.data(), size);
    request.set_data(payload);

    if (opts.pingpong) {
      std::vector<int64_t> rtt;
      rtt.reserve(static_cast<size_t>(run.iterations));
      Blob last;
      for (int64_t i = 0; i < run.warmup + run.iterations; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        grpc::ClientContext ctx;
        Blob response;
        const grpc::Status status = stub->Echo(&ctx, request, &response);
        const auto t1 = std::chrono::steady_clock::now();
        if (!status.ok()) fatal(fmt::format("Echo failed: {} ({})", status.error_message(), int(status.error_code())));
        if (response.data().size() != size)
          fatal(fmt::format("echo of {} bytes came back as {}", size, response.data().size()));
        if (i >= run.warmup) rtt.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
        if (i + 1 == run.warmup + run.iterations) last = std::move(response);
      }
      if (last.data() != payload) fatal("echoed payload differs");
      results.add_latency(run, rtt);
    } else {
      struct PushCall {
        grpc::ClientContext ctx;
        Ack ack;
        grpc::Status status;
        std::unique_ptr<grpc::ClientAsyncResponseReader<Ack>> rpc;
      };
      auto start = [&] {
        auto* call = new PushCall;
        call->rpc = stub->AsyncPush(&call->ctx, request, &cq);
        call->rpc->Finish(&call->ack, &call->status, call);
      };
      // Keep `window` calls in flight: start one more as each completes.
      auto batch = [&](int64_t count) {
        int64_t started = 0;
        for (; started < std::min<int64_t>(opts.window, count); ++started) start();
        for (int64_t done = 0; done < count; ++done) {
          void* tag = nullptr;
          bool ok = false;
          if (!cq.Next(&tag, &ok)) fatal("completion queue shut down");
          std::unique_ptr<PushCall> call(static_cast<PushCall*>(tag));
          if (!ok || !call->status.ok())
            fatal(fmt::format("Push failed: {} ({})", call->status.error_message(), int(call->status.error_code())));
          if (started < count) {
            start();
            ++started;
          }
        }
      };
      batch(run.warmup);
      const auto t0 = std::chrono::steady_clock::now();
      batch(run.iterations);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      results.add_throughput(run, secs);
    }
  }

  grpc::ClientContext bye_ctx;  // best effort; only a --once server cares
  Ack bye;
  stub->Bye(&bye_ctx, Ack(), &bye);
  cq.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq.Next(&tag, &ok)) {
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const floors::Program program{
      .name = kProg,
      .source_file = "grpc_unary_baseline.cc",
      .usage =
          "gRPC floors (--api=unary|async|generic). Server: --server [--port=P] [--once] [--cpu=L]. Client: "
          "--connect=127.0.0.1:P --test=pingpong|stream --size=N|--sizes=MIN:MAX [--iterations=N] "
          "[--warmup=N] [--window=W] [--json=FILE] [--cpu=L]",
  };
  const floors::Role role = floors::parse_command_line(argc, argv, program);
  const std::string api = absl::GetFlag(FLAGS_api);
  if (api != "unary" && api != "async" && api != "generic") {
    usage_error("--api=" + api + ": expected unary, async or generic");
  }
  if (api != "unary") {
    const bool generic = api == "generic";
    if (role == floors::Role::kServer) {
      const int32_t port = floors::server_port_from_flags();
      floors::pin_cpus(absl::GetFlag(FLAGS_cpu));
      return generic ? floors::RunGenericServer(port, absl::GetFlag(FLAGS_once))
                     : floors::RunAsyncServer(port, absl::GetFlag(FLAGS_once));
    }
    const floors::ClientOptions opts = floors::client_options_from_flags();
    return generic ? floors::RunGenericClient(opts) : floors::RunAsyncClient(opts);
  }
  if (role == floors::Role::kServer) return run_server();
  return run_client();
}
