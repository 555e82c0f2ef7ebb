// Payload metadata (buffer sizes, checksums) and acknowledgements, for data planes that carry
// payload bytes outside gRPC (verbs, MPI), and per-buffer checksums of a payload that arrives
// in pieces whose boundaries do not follow the buffers'.
#ifndef PSBENCH_TRANSPORTS_DATA_META_H_
#define PSBENCH_TRANSPORTS_DATA_META_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "payloads/payload.h"

namespace psbench {

struct PayloadMeta {
  std::vector<uint64_t> sizes;
  std::vector<uint64_t> checksums;  // empty without validation
};
std::string EncodePayloadMeta(const std::vector<uint64_t>& sizes,
                              const std::vector<uint64_t>* checksums);
// Decodes into *meta, reusing its storage (the PS decodes one per request).
absl::Status DecodePayloadMeta(std::span<const std::byte> bytes, bool validate,
                               uint64_t total_bytes, PayloadMeta* meta);

struct AckMeta {
  uint64_t bytes_received = 0;
  bool ok = true;
  // Why not, when not ok: the PS's status code (DATA_LOSS for damage, RESOURCE_EXHAUSTED for a
  // request over its --max-message-size, ...), and its words.
  absl::StatusCode code = absl::StatusCode::kOk;
  std::vector<uint64_t> checksums;
  std::string error;
};
std::string EncodeAckMeta(const AckMeta& ack);
// The same into *out, reusing its storage.
void EncodeAckMeta(const AckMeta& ack, std::string* out);
absl::StatusOr<AckMeta> DecodeAckMeta(std::span<const std::byte> bytes);
// The same into *ack, reusing its storage.
absl::Status DecodeAckMeta(std::span<const std::byte> bytes, AckMeta* ack);

// The PS's answer to a kExchange: its verdict, and when OK the reply's buffer sizes (the
// worker checks them against the request's) and, under --validate, the PS's checksum of each
// reply buffer, taken after its handler wrote them.
struct ExchangeReplyMeta {
  absl::StatusCode code = absl::StatusCode::kOk;
  std::vector<uint64_t> sizes;
  std::vector<uint64_t> checksums;  // empty without validation
  std::string error;                // code != kOk
};
// The largest error text an exchange reply carries; longer ones are cut.
inline constexpr size_t kMaxExchangeErrorBytes = 200;
// Encoded size bound for `buffers` buffers, for receivers sizing their buffer.
inline uint64_t MaxExchangeReplyMetaBytes(uint64_t buffers) {
  return 16 + 16 * buffers + kMaxExchangeErrorBytes;
}
void EncodeExchangeReplyMeta(const ExchangeReplyMeta& reply, std::string* out);
absl::Status DecodeExchangeReplyMeta(std::span<const std::byte> bytes, ExchangeReplyMeta* reply);

// Feeds a payload's bytes in order, in pieces of any size; yields one checksum per buffer.
class BufferChecksums {
 public:
  void Reset(const std::vector<uint64_t>* sizes);
  void Update(std::span<const std::byte> bytes);
  const std::vector<uint64_t>& checksums() const { return done_; }

 private:
  void FinishEmpty();
  const std::vector<uint64_t>* sizes_ = nullptr;
  size_t buffer_ = 0;
  uint64_t offset_ = 0;
  ChecksumStream stream_;
  std::vector<uint64_t> done_;
};

}  // namespace psbench

#endif  // PSBENCH_TRANSPORTS_DATA_META_H_
