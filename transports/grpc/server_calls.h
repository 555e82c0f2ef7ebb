// What the gRPC data plane's calls share on the PS: its counters and the exchanges it serves.
#ifndef PSBENCH_TRANSPORTS_GRPC_SERVER_CALLS_H_
#define PSBENCH_TRANSPORTS_GRPC_SERVER_CALLS_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "psbench.grpc.pb.h"
#include "transports/control/call_data.h"
#include "transports/control/channel.h"
#include "transports/control/tsan_handoff.h"
#include "transports/data_counts.h"
#include "transports/exchange.h"
#include "transports/transport.h"

namespace psbench::grpc_transport {

using control::CallData;
using control::StartFromAnotherThread;
using control::ToGrpc;

struct Counters {
  std::atomic<uint64_t> rpcs{0};  // payload bytes received: moved's payload_bytes_received
  int64_t corrupt_every = 0;
  std::atomic<int64_t> received{0};
  // The data plane's messages as gRPC handed them over and took them (all serving threads).
  DataTally moved{DataTally::kManyWriters};
  // True when this payload is one the fault injector should damage.
  bool ShouldCorrupt() {
    return corrupt_every > 0 && (received.fetch_add(1) + 1) % corrupt_every == 0;
  }
};

// What serves kExchange: the handler (through the hub, which the server closes when it
// stops) and pooled memory for requests that arrive fragmented and for replies.
struct Exchanges {
  std::shared_ptr<ExchangeHub> hub;
  std::shared_ptr<BlockPool> pool;
};

}  // namespace psbench::grpc_transport

#endif  // PSBENCH_TRANSPORTS_GRPC_SERVER_CALLS_H_
