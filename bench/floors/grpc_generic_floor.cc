// The async generic gRPC floor (grpc_generic_floor.h).
#include "grpc_generic_floor.h"

#include <arpa/inet.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fmt/core.h"
#include "grpc_channel.h"

namespace psbench::floors {
namespace {

constexpr char kEcho[] = "/psbench.floor.Generic/Echo";
constexpr char kPush[] = "/psbench.floor.Generic/Push";
constexpr char kBye[] = "/psbench.floor.Generic/Bye";

grpc::ByteBuffer Empty() {
  grpc::Slice nothing;
  return grpc::ByteBuffer(&nothing, 1);
}

// ---- server ----------------------------------------------------------------

// One call: requested, its one message read, answered, finished.
class Call {
 public:
  Call(grpc::AsyncGenericService* service, grpc::ServerCompletionQueue* cq, bool once)
      : service_(service), cq_(cq), once_(once), stream_(&ctx_) {
    service_->RequestCall(&ctx_, &stream_, cq_, cq_, this);
  }

  // One step of the call; the last deletes it.
  void Proceed(bool ok) {
    switch (state_) {
      case kRequested:
        if (!ok) break;  // shutting down
        new Call(service_, cq_, once_);
        state_ = kReading;
        stream_.Read(&message_, this);
        return;
      case kReading:
        if (!ok) break;  // the client left without sending
        state_ = kFinishing;
        if (ctx_.method() == kEcho) {
          stream_.WriteAndFinish(message_, grpc::WriteOptions(), grpc::Status::OK, this);  // as received
        } else if (ctx_.method() == kPush || ctx_.method() == kBye) {
          // Bye: the exit goes to the signal thread (Shutdown here would wait on this call).
          if (ctx_.method() == kBye && once_) kill(getpid(), SIGUSR1);
          message_ = Empty();
          stream_.WriteAndFinish(message_, grpc::WriteOptions(), grpc::Status::OK, this);
        } else {
          stream_.Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "unknown method " + ctx_.method()), this);
        }
        return;
      case kFinishing:
        break;
    }
    delete this;
  }

 private:
  enum State { kRequested, kReading, kFinishing };
  grpc::AsyncGenericService* service_;
  grpc::ServerCompletionQueue* cq_;
  bool once_;
  grpc::GenericServerContext ctx_;
  grpc::GenericServerAsyncReaderWriter stream_;
  grpc::ByteBuffer message_;
  State state_ = kRequested;
};

// ---- client ----------------------------------------------------------------

struct ClientCall {
  const char* method = nullptr;
  grpc::ClientContext ctx;
  grpc::ByteBuffer reply;
  grpc::Status status;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> rpc;
};

class GenericClient {
 public:
  GenericClient(std::shared_ptr<grpc::Channel> channel) : stub_(channel) {}
  ~GenericClient() {
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) delete static_cast<ClientCall*>(tag);
  }

  void Start(const char* method, const grpc::ByteBuffer& message) {
    auto* call = new ClientCall;
    call->method = method;
    call->rpc = stub_.PrepareUnaryCall(&call->ctx, method, message, &cq_);
    call->rpc->StartCall();
    call->rpc->Finish(&call->reply, &call->status, call);
  }

  // The next call to finish; a failed one ends the program unless `may_fail`.
  std::unique_ptr<ClientCall> Next(bool may_fail = false) {
    void* tag = nullptr;
    bool ok = false;
    if (!cq_.Next(&tag, &ok)) fatal("completion queue shut down");
    std::unique_ptr<ClientCall> call(static_cast<ClientCall*>(tag));
    if (!may_fail && (!ok || !call->status.ok())) {
      const bool unimplemented = call->status.error_code() == grpc::StatusCode::UNIMPLEMENTED;
      fatal(fmt::format("{}: gRPC status {}{} {}{}", call->method, int(call->status.error_code()),
                        unimplemented ? " (UNIMPLEMENTED)" : "", call->status.error_message(),
                        unimplemented ? "; is the server a psbench-floor-grpc --api=generic?" : ""));
    }
    return call;
  }

 private:
  grpc::GenericStub stub_;
  grpc::CompletionQueue cq_;
};

}  // namespace

int RunGenericServer(int32_t port, bool once) {
  grpc::AsyncGenericService service;
  return ServeOnOneQueue(
      port, [&service](grpc::ServerBuilder& builder) { builder.RegisterAsyncGenericService(&service); },
      [&service, once](grpc::ServerCompletionQueue* cq) { new Call(&service, cq, once); },
      [](void* tag, bool ok) { static_cast<Call*>(tag)->Proceed(ok); });
}

int RunGenericClient(const ClientOptions& opts) {
  const std::string target = fmt::format("{}:{}", inet_ntoa(opts.server.sin_addr), ntohs(opts.server.sin_port));
  Results results("grpc-generic-floor", "gRPC async generic floor", opts);
  pin_cpus(opts.cpu);
  GenericClient client(ConnectedChannel(target));

  results.print_header();
  for (const uint64_t size : opts.sizes) {
    const SizeRun run = plan_size(opts, size);
    // One slice, built once per size: gRPC sends it by reference, as psbench sends payloads.
    grpc::Slice slice(size);
    fill_payload(reinterpret_cast<char*>(const_cast<uint8_t*>(slice.begin())), size);
    const grpc::ByteBuffer message(&slice, 1);
    if (opts.pingpong) {
      std::vector<int64_t> rtt;
      rtt.reserve(static_cast<size_t>(run.iterations));
      std::unique_ptr<ClientCall> last;
      for (int64_t i = 0; i < run.warmup + run.iterations; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        client.Start(kEcho, message);
        last = client.Next();
        const auto t1 = std::chrono::steady_clock::now();
        if (last->reply.Length() != size) fatal(fmt::format("echo of {} bytes came back as {}", size, last->reply.Length()));
        if (i >= run.warmup) rtt.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
      }
      grpc::Slice back;
      if (!last->reply.DumpToSingleSlice(&back).ok() ||
          !std::equal(back.begin(), back.end(), slice.begin(), slice.end())) {
        fatal("echoed payload differs");
      }
      results.add_latency(run, rtt);
    } else {
      // Keep `window` calls in flight: start one more as each completes.
      auto batch = [&](int64_t count) {
        int64_t started = 0;
        for (; started < std::min<int64_t>(opts.window, count); ++started) client.Start(kPush, message);
        for (int64_t done = 0; done < count; ++done) {
          client.Next();
          if (started < count) {
            client.Start(kPush, message);
            ++started;
          }
        }
      };
      batch(run.warmup);
      const auto t0 = std::chrono::steady_clock::now();
      batch(run.iterations);
      results.add_throughput(run, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  client.Start(kBye, Empty());  // best effort; only a --once server cares
  client.Next(/*may_fail=*/true);
  return 0;
}

}  // namespace psbench::floors
