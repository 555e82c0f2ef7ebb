// The serialized wire format: a wire::PayloadMessage (psbench.proto) with one `bytes` element
// per buffer and, under --validate, the sender's checksum of each. What the PS checks in one.
#ifndef PSBENCH_TRANSPORTS_GRPC_SERIALIZED_FORMAT_H_
#define PSBENCH_TRANSPORTS_GRPC_SERIALIZED_FORMAT_H_

#include <grpcpp/support/byte_buffer.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "payloads/payload.h"
#include "psbench.pb.h"
#include "transports/exchange.h"

namespace psbench::grpc_transport {

inline constexpr char kSerializedEchoMethod[] = "/psbench.wire.PsData/Echo";
inline constexpr char kSerializedPushMethod[] = "/psbench.wire.PsData/Push";
inline constexpr char kSerializedExchangeMethod[] = "/psbench.wire.PsData/Exchange";

// What a parsed PayloadMessage costs per buffer beyond the buffer's bytes: a std::string in a
// 48-byte allocation, its pointer, the pointer array's growth (measured: 2^20 buffers of 8
// bytes, 10 MiB on the wire, raised a PS's peak memory by 82 MiB). An empty buffer is 2 bytes
// on the wire.
inline constexpr uint64_t kParsedBytesPerBuffer = 72;
// A PS keeps what one serialized request costs it (the bytes received, their parsed copy and
// kParsedBytesPerBuffer per buffer) within this many times its wire size plus
// kParsedAllowance; with kMaxBuffers (raw_format.h) over all.
inline constexpr uint64_t kParsedWireMultiple = 8;
inline constexpr uint64_t kParsedAllowance = 256 * 1024;

// The bytes of `p` serialized as a PayloadMessage, with checksums when `checksums` is given.
uint64_t SerializedPayloadBytes(const Payload& p, const std::vector<uint64_t>* checksums);
// The same for buffers of `sizes`, with one checksum each under `validate`.
uint64_t SerializedPayloadBytes(const std::vector<uint64_t>& sizes, bool validate);

// `p` as a serialized PayloadMessage, byte for byte what protobuf makes of a message holding
// its buffers (and `checksums`), written by protobuf's coded stream straight from the
// payload's buffers into gRPC's slices: one copy, as serializing a message of tensors costs,
// without first building that message (another copy).
grpc::ByteBuffer SerializePayload(const Payload& p, const std::vector<uint64_t>* checksums);

// OK when a PS accepts a serialized message of `buffers` buffers in `message_bytes` bytes
// (the bounds above), else RESOURCE_EXHAUSTED saying why. A worker checks its payloads with
// it before sending; the PS checks every request before parsing it.
absl::Status CheckSerializedShape(uint64_t message_bytes, uint64_t buffers);

// Parses a received serialized request into `m` once CheckSerializedShape accepts it, the
// buffers counted in the received bytes first (nothing allocated for them). Releases
// `message`'s bytes. RESOURCE_EXHAUSTED for a shape refused, INVALID_ARGUMENT for bytes that
// are not a PayloadMessage.
absl::Status ParseSerializedRequest(grpc::ByteBuffer* message, wire::PayloadMessage* m);

// What the PS checks in a serialized Echo, Push or Exchange request (after parsing it):
// with checksums, one per buffer, each matching its buffer (DATA_LOSS naming the first that
// differs); `computed` gets the PS's checksums then. Sets *bytes to the payload's.
absl::Status VerifyPayloadMessage(const wire::PayloadMessage& m, std::vector<uint64_t>* computed,
                                  uint64_t* bytes);

// An exchange's buffers as its handler sees them: each request buffer in place in the
// message's own string, which its reply then overwrites (`m` must outlive `buffers`).
void ExchangeBuffersFromMessage(wire::PayloadMessage& m, ExchangeBuffers* buffers);

}  // namespace psbench::grpc_transport

#endif  // PSBENCH_TRANSPORTS_GRPC_SERIALIZED_FORMAT_H_
