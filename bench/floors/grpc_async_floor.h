// psbench-floor-grpc --api=async: the minimal protobuf async echo, the strongest program on
// the API psbench's serialized mode uses. A server on the generated AsyncService that answers
// an echo with the message it parsed (serialized again on the way out, as any protobuf server
// does) and a push with an empty Ack, on one completion-queue thread; a client on the
// generated async stub and a completion queue, one call at a time (pingpong) or --window
// calls in flight (stream). The protobuf message is built once per size.
#ifndef PSBENCH_BENCH_FLOORS_GRPC_ASYNC_FLOOR_H_
#define PSBENCH_BENCH_FLOORS_GRPC_ASYNC_FLOOR_H_

#include <cstdint>

#include "floor_common.h"

namespace psbench::floors {

// Serves until SIGTERM/SIGINT, or (once) until a client says Bye. Returns the exit code.
int RunAsyncServer(int32_t port, bool once);
int RunAsyncClient(const ClientOptions& opts);

}  // namespace psbench::floors

#endif  // PSBENCH_BENCH_FLOORS_GRPC_ASYNC_FLOOR_H_
