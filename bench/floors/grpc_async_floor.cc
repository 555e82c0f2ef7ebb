// The minimal protobuf async gRPC floor (grpc_async_floor.h).
#include "grpc_async_floor.h"

#include <arpa/inet.h>
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
#include <type_traits>
#include <vector>

#include "baseline.grpc.pb.h"
#include "fmt/core.h"
#include "grpc_channel.h"

namespace psbench::floors {
namespace {

using psbench::floor::Ack;
using psbench::floor::Baseline;
using psbench::floor::Blob;

// ---- server ----------------------------------------------------------------

class AsyncServerCall {
 public:
  virtual ~AsyncServerCall() = default;
  virtual void Proceed(bool ok) = 0;
};

// One call of a method: requested, answered from its parsed request, finished.
template <typename Request, typename Reply, auto kRequestMethod>
class ProtoCall final : public AsyncServerCall {
 public:
  ProtoCall(Baseline::AsyncService* service, grpc::ServerCompletionQueue* cq, bool once)
      : service_(service), cq_(cq), once_(once), responder_(&ctx_) {
    (service_->*kRequestMethod)(&ctx_, &request_, &responder_, cq_, cq_, this);
  }

  void Proceed(bool ok) override {
    if (!ok || answered_) {  // shutting down, or finished
      delete this;
      return;
    }
    new ProtoCall(service_, cq_, once_);
    answered_ = true;
    if constexpr (std::is_same_v<Reply, Blob>) {
      responder_.Finish(request_, grpc::Status::OK, this);  // the echo: the message as parsed
    } else {
      // Bye: the exit goes to the signal thread (Shutdown here would wait on this call).
      if (std::is_same_v<Request, Ack> && once_) kill(getpid(), SIGUSR1);
      responder_.Finish(Ack(), grpc::Status::OK, this);
    }
  }

 private:
  Baseline::AsyncService* service_;
  grpc::ServerCompletionQueue* cq_;
  bool once_;
  grpc::ServerContext ctx_;
  Request request_;
  grpc::ServerAsyncResponseWriter<Reply> responder_;
  bool answered_ = false;
};
using EchoCall = ProtoCall<Blob, Blob, &Baseline::AsyncService::RequestEcho>;
using PushCall = ProtoCall<Blob, Ack, &Baseline::AsyncService::RequestPush>;
using ByeCall = ProtoCall<Ack, Ack, &Baseline::AsyncService::RequestBye>;

// ---- client ----------------------------------------------------------------

template <typename Reply>
struct ProtoClientCall {
  grpc::ClientContext ctx;
  Reply reply;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<Reply>> rpc;
};

// The next call to finish on `cq`; a failed one ends the program.
template <typename Reply>
std::unique_ptr<ProtoClientCall<Reply>> NextProto(grpc::CompletionQueue& cq, const char* method) {
  void* tag = nullptr;
  bool ok = false;
  if (!cq.Next(&tag, &ok)) fatal("completion queue shut down");
  std::unique_ptr<ProtoClientCall<Reply>> call(static_cast<ProtoClientCall<Reply>*>(tag));
  if (!ok || !call->status.ok()) {
    const bool unimplemented = call->status.error_code() == grpc::StatusCode::UNIMPLEMENTED;
    fatal(fmt::format("{}: gRPC status {} {}{}", method, int(call->status.error_code()),
                      call->status.error_message(),
                      unimplemented ? "; is the server a psbench-floor-grpc --api=async or unary?" : ""));
  }
  return call;
}

}  // namespace

int RunAsyncServer(int32_t port, bool once) {
  Baseline::AsyncService service;
  return ServeOnOneQueue(
      port, [&service](grpc::ServerBuilder& builder) { builder.RegisterService(&service); },
      [&service, once](grpc::ServerCompletionQueue* cq) {
        new EchoCall(&service, cq, once);
        new PushCall(&service, cq, once);
        new ByeCall(&service, cq, once);
      },
      [](void* tag, bool ok) { static_cast<AsyncServerCall*>(tag)->Proceed(ok); });
}

int RunAsyncClient(const ClientOptions& opts) {
  const std::string target = fmt::format("{}:{}", inet_ntoa(opts.server.sin_addr), ntohs(opts.server.sin_port));
  Results results("grpc-async-floor", "gRPC async protobuf floor", opts);
  pin_cpus(opts.cpu);
  std::unique_ptr<Baseline::Stub> stub = Baseline::NewStub(ConnectedChannel(target));
  grpc::CompletionQueue cq;

  results.print_header();
  for (const uint64_t size : opts.sizes) {
    const SizeRun run = plan_size(opts, size);
    // Built once per size, as a user would; each call still serializes it.
    Blob request;
    std::string* data = request.mutable_data();
    data->resize(size);
    fill_payload(data->data(), size);
    if (opts.pingpong) {
      std::vector<int64_t> rtt;
      rtt.reserve(static_cast<size_t>(run.iterations));
      std::unique_ptr<ProtoClientCall<Blob>> last;
      for (int64_t i = 0; i < run.warmup + run.iterations; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        auto* call = new ProtoClientCall<Blob>;
        call->rpc = stub->AsyncEcho(&call->ctx, request, &cq);
        call->rpc->Finish(&call->reply, &call->status, call);
        last = NextProto<Blob>(cq, "Echo");
        const auto t1 = std::chrono::steady_clock::now();
        if (last->reply.data().size() != size) {
          fatal(fmt::format("echo of {} bytes came back as {}", size, last->reply.data().size()));
        }
        if (i >= run.warmup) rtt.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
      }
      if (last->reply.data() != request.data()) fatal("echoed payload differs");
      results.add_latency(run, rtt);
    } else {
      auto start = [&] {
        auto* call = new ProtoClientCall<Ack>;
        call->rpc = stub->AsyncPush(&call->ctx, request, &cq);
        call->rpc->Finish(&call->reply, &call->status, call);
      };
      // Keep `window` calls in flight: start one more as each completes.
      auto batch = [&](int64_t count) {
        int64_t started = 0;
        for (; started < std::min<int64_t>(opts.window, count); ++started) start();
        for (int64_t done = 0; done < count; ++done) {
          NextProto<Ack>(cq, "Push");
          if (started < count) {
            start();
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
  // Best effort; only a --once server cares.
  auto* bye = new ProtoClientCall<Ack>;
  bye->rpc = stub->AsyncBye(&bye->ctx, Ack(), &cq);
  bye->rpc->Finish(&bye->reply, &bye->status, bye);
  void* tag = nullptr;
  bool ok = false;
  if (cq.Next(&tag, &ok)) delete static_cast<ProtoClientCall<Ack>*>(tag);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return 0;
}

}  // namespace psbench::floors
