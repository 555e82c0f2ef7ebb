// What the gRPC floors share: the channel they dial with, how a server starts, and the
// one-queue server loop of the async ones (--api=generic and --api=async).
#ifndef PSBENCH_BENCH_FLOORS_GRPC_CHANNEL_H_
#define PSBENCH_BENCH_FLOORS_GRPC_CHANNEL_H_

#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace psbench::floors {

// A channel to `target` without message size limits, already connected: connecting up front
// keeps connection setup out of the warmup and turns a refused connection into a usage error
// (exit 2) rather than a failed first call.
std::shared_ptr<grpc::Channel> ConnectedChannel(const std::string& target);

// A started floor server on 127.0.0.1:port, without message limits, its port announced.
// The stop signals (SIGTERM, SIGINT, and SIGUSR1: a --once server's Bye) were blocked before
// gRPC started threads, which inherit the mask, so that only a sigwait on `stop` sees them.
struct FloorServer {
  sigset_t stop;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<grpc::ServerCompletionQueue> cq;  // with_queue only
};
FloorServer StartFloorServer(int32_t port, const std::function<void(grpc::ServerBuilder&)>& add_service,
                             bool with_queue);

// An async floor server on 127.0.0.1:port with one completion queue, driven by the calling
// thread until SIGTERM, SIGINT or SIGUSR1 (a --once server's Bye): `add_service` registers
// its service, `post` posts its first calls, `proceed(tag, ok)` takes each event. Returns
// the exit code.
int ServeOnOneQueue(int32_t port, const std::function<void(grpc::ServerBuilder&)>& add_service,
                    const std::function<void(grpc::ServerCompletionQueue*)>& post,
                    const std::function<void(void*, bool)>& proceed);

}  // namespace psbench::floors

#endif  // PSBENCH_BENCH_FLOORS_GRPC_CHANNEL_H_
