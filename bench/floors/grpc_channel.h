// The channel both gRPC floors (--api=unary and --api=generic) dial their server with.
#ifndef PSBENCH_BENCH_FLOORS_GRPC_CHANNEL_H_
#define PSBENCH_BENCH_FLOORS_GRPC_CHANNEL_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

namespace psbench::floors {

// A channel to `target` without message size limits, already connected: connecting up front
// keeps connection setup out of the warmup and turns a refused connection into a usage error
// (exit 2) rather than a failed first call.
std::shared_ptr<grpc::Channel> ConnectedChannel(const std::string& target);

}  // namespace psbench::floors

#endif  // PSBENCH_BENCH_FLOORS_GRPC_CHANNEL_H_
