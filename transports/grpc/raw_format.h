// The non-serialized wire format: a gRPC message that is a raw byte buffer made of a small
// header slice followed by one slice per payload buffer, referenced, not copied. The header
// carries the buffer sizes (so the receiver can find buffer boundaries, which gRPC's framing
// does not preserve) and, with --validate, the sender's checksum of every buffer.
#ifndef PSBENCH_TRANSPORTS_GRPC_RAW_FORMAT_H_
#define PSBENCH_TRANSPORTS_GRPC_RAW_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transports/exchange.h"

namespace psbench::grpc_transport {

inline constexpr char kRawEchoMethod[] = "/psbench.Raw/Echo";
inline constexpr char kRawPushMethod[] = "/psbench.Raw/Push";
// Request and reply are both payloads (header, then the buffers); the reply header's
// checksums, under --validate, are the PS's, taken after its exchange handler wrote them.
inline constexpr char kRawExchangeMethod[] = "/psbench.Raw/Exchange";

inline constexpr uint32_t kPayloadMagic = 0x31425350;  // "PSB1"
inline constexpr uint32_t kAckMagic = 0x31415350;      // "PSA1"
inline constexpr uint32_t kFlagValidate = 1;
// A bound on buffers per payload keeps a corrupt header from asking for absurd allocations.
inline constexpr uint32_t kMaxBuffers = 1u << 20;

// The bytes EncodePayloadHeader makes for `buffers` buffers (with their checksums under
// `validate`).
inline uint64_t PayloadHeaderBytes(uint64_t buffers, bool validate) { return 16 + 8 * buffers * (validate ? 2 : 1); }

struct RawHeader {
  uint32_t flags = 0;
  std::vector<uint64_t> sizes;
  std::vector<uint64_t> checksums;  // empty unless kFlagValidate
  uint64_t payload_bytes() const;
};

// Header bytes for a payload: 16 fixed bytes, the sizes, then the checksums if validating.
std::string EncodePayloadHeader(const std::vector<uint64_t>& sizes,
                                const std::vector<uint64_t>* checksums);

// Ack of a push: 16 fixed bytes, bytes received, then the PS's checksum of every buffer.
grpc::Slice EncodeAck(uint64_t bytes_received, const std::vector<uint64_t>& checksums);
struct RawAck {
  uint64_t bytes_received = 0;
  std::vector<uint64_t> checksums;
};
absl::StatusOr<RawAck> DecodeAck(const grpc::ByteBuffer& buffer);

// Sequential reader over the slices of a received byte buffer (no copy of the payload).
class SliceReader {
 public:
  explicit SliceReader(const grpc::ByteBuffer& buffer);
  // Spans it hands out may point into its own slices (an inlined slice keeps its bytes in
  // itself): it stays where it is.
  SliceReader(const SliceReader&) = delete;
  SliceReader& operator=(const SliceReader&) = delete;
  size_t remaining() const { return remaining_; }
  // Copies the next n bytes (for headers). False if fewer remain.
  bool Read(void* dst, size_t n);
  // Feeds the next n bytes, possibly fragmented, to fn(const std::byte*, size_t).
  template <typename Fn>
  bool Consume(size_t n, Fn&& fn);

 private:
  // Most messages a call reads (an ack, a small request) are one slice: held here, without a
  // vector's allocation per call.
  absl::InlinedVector<grpc::Slice, 2> slices_;
  size_t slice_ = 0;
  size_t offset_ = 0;
  size_t remaining_ = 0;
};

// Parses and sanity-checks a payload header.
absl::StatusOr<RawHeader> ReadPayloadHeader(SliceReader& reader);

// Walks the buffers that follow a header. Fails with DATA_LOSS if bytes are missing or extra.
// With `checksums` non-null, fills in the checksum of every buffer as received.
absl::Status ReadBuffers(SliceReader& reader, const RawHeader& header,
                         std::vector<uint64_t>* checksums);

// DATA_LOSS naming the first buffer whose checksum differs, e.g.
// "buffer 3 of 10 (1MiB): checksum 0x.. received, 0x.. sent".
absl::Status CompareChecksums(const std::vector<uint64_t>& sent,
                              const std::vector<uint64_t>& received,
                              const std::vector<uint64_t>& sizes);

// What the PS decodes from a non-serialized Echo or Push request: the header, checked
// against the bytes after it, and under kFlagValidate every buffer's checksum as received
// (into `checksums`, else left empty), compared with the sender's.
absl::StatusOr<RawHeader> DecodeRawRequest(SliceReader& reader, std::vector<uint64_t>* checksums);

// What the PS decodes from a non-serialized Exchange request, into `buffers` as its handler
// sees them: each request buffer is a span into the slice it arrived in when it lies in one,
// else a copy in a block from `pool` that also holds the reply buffers (a request buffer
// copied there is overwritten in place by its reply). Under kFlagValidate the request is
// checked against the sender's checksums. Returns the payload's bytes.
absl::StatusOr<uint64_t> DecodeRawExchange(SliceReader& reader, BlockPool& pool,
                                           ExchangeBuffers* buffers);

template <typename Fn>
bool SliceReader::Consume(size_t n, Fn&& fn) {
  if (n > remaining_) return false;
  remaining_ -= n;
  while (n > 0) {
    const grpc::Slice& s = slices_[slice_];
    size_t take = std::min(n, s.size() - offset_);
    fn(reinterpret_cast<const std::byte*>(s.begin()) + offset_, take);
    offset_ += take;
    n -= take;
    if (offset_ == s.size()) {
      ++slice_;
      offset_ = 0;
    }
  }
  return true;
}

}  // namespace psbench::grpc_transport

#endif  // PSBENCH_TRANSPORTS_GRPC_RAW_FORMAT_H_
