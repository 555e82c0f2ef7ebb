// psbench-floor-grpc --api=generic: the strongest program on gRPC's own API that moves bytes as
// psbench's non-serialized mode does. A server on grpc::AsyncGenericService that answers an
// echo with the very ByteBuffer it received and a push with an empty message, on one
// completion-queue thread; a client on grpc::GenericStub sending one ByteBuffer of one slice,
// one call at a time (pingpong) or --window calls in flight (stream). No protobuf, no copy
// psbench's floors do not need.
#ifndef PSBENCH_BENCH_FLOORS_GRPC_GENERIC_FLOOR_H_
#define PSBENCH_BENCH_FLOORS_GRPC_GENERIC_FLOOR_H_

#include <cstdint>

#include "floor_common.h"

namespace psbench::floors {

// Serves until SIGTERM/SIGINT, or (once) until a client says Bye. Returns the exit code.
int RunGenericServer(int32_t port, bool once);
int RunGenericClient(const ClientOptions& opts);

}  // namespace psbench::floors

#endif  // PSBENCH_BENCH_FLOORS_GRPC_GENERIC_FLOOR_H_
