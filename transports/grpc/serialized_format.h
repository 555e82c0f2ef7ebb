// The serialized wire format: a wire::PayloadMessage (psbench.proto) with one `bytes` element
// per buffer and, under --validate, the sender's checksum of each. What the PS checks in one.
#ifndef PSBENCH_TRANSPORTS_GRPC_SERIALIZED_FORMAT_H_
#define PSBENCH_TRANSPORTS_GRPC_SERIALIZED_FORMAT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "psbench.pb.h"
#include "transports/exchange.h"

namespace psbench::grpc_transport {

// What the PS checks in a serialized Echo, Push or Exchange request (gRPC has parsed the
// protobuf): with checksums, one per buffer, each matching its buffer (DATA_LOSS naming the
// first that differs); `computed` gets the PS's checksums then. Sets *bytes to the payload's.
absl::Status VerifyPayloadMessage(const wire::PayloadMessage& m, std::vector<uint64_t>* computed,
                                  uint64_t* bytes);

// An exchange's buffers as its handler sees them: each request buffer in place in the
// message's own string, which its reply then overwrites (`m` must outlive `buffers`).
void ExchangeBuffersFromMessage(wire::PayloadMessage& m, ExchangeBuffers* buffers);

}  // namespace psbench::grpc_transport

#endif  // PSBENCH_TRANSPORTS_GRPC_SERIALIZED_FORMAT_H_
