#include "transports/data_meta.h"

#include <cstring>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace psbench {
namespace {

void Put(std::string* out, const void* p, size_t n) {
  out->append(static_cast<const char*>(p), n);
}

template <typename T>
bool Get(std::span<const std::byte>* in, T* v) {
  if (in->size() < sizeof(T)) return false;
  std::memcpy(v, in->data(), sizeof(T));
  *in = in->subspan(sizeof(T));
  return true;
}

}  // namespace

std::string EncodePayloadMeta(const std::vector<uint64_t>& sizes,
                              const std::vector<uint64_t>* checksums) {
  std::string out;
  uint32_t n = static_cast<uint32_t>(sizes.size()), zero = 0;
  Put(&out, &n, 4);
  Put(&out, &zero, 4);
  Put(&out, sizes.data(), 8 * sizes.size());
  if (checksums != nullptr) Put(&out, checksums->data(), 8 * checksums->size());
  return out;
}

absl::Status DecodePayloadMeta(std::span<const std::byte> bytes, bool validate,
                               uint64_t total_bytes, PayloadMeta* meta) {
  meta->sizes.clear();
  meta->checksums.clear();
  uint32_t n = 0, zero = 0;
  if (!Get(&bytes, &n) || !Get(&bytes, &zero) ||
      bytes.size() != (validate ? 16ull : 8ull) * n) {
    return absl::DataLossError("malformed payload metadata");
  }
  meta->sizes.resize(n);
  meta->checksums.resize(validate ? n : 0);
  if (n > 0) {  // memcpy wants real pointers, and an empty vector's may be null
    std::memcpy(meta->sizes.data(), bytes.data(), 8ull * n);
    if (validate) std::memcpy(meta->checksums.data(), bytes.data() + 8ull * n, 8ull * n);
  }
  // Summed without overflow: sizes that wrap around to the total must not pass.
  uint64_t sum = 0;
  for (uint64_t s : meta->sizes) {
    if (s > total_bytes - sum) {
      meta->sizes.clear();
      return absl::DataLossError(
          absl::StrCat("buffer sizes add up to more than the payload's ", total_bytes, " bytes"));
    }
    sum += s;
  }
  if (sum != total_bytes) {
    meta->sizes.clear();
    return absl::DataLossError(
        absl::StrCat("buffer sizes add up to ", sum, " bytes, the payload has ", total_bytes));
  }
  return absl::OkStatus();
}

std::string EncodeAckMeta(const AckMeta& ack) {
  std::string out;
  EncodeAckMeta(ack, &out);
  return out;
}

void EncodeAckMeta(const AckMeta& ack, std::string* out) {
  out->clear();
  // The status word: 0, or the PS's status code (DATA_LOSS when it gave none).
  const absl::StatusCode code = ack.code == absl::StatusCode::kOk ? absl::StatusCode::kDataLoss : ack.code;
  uint32_t status = ack.ok ? 0 : static_cast<uint32_t>(code), n = static_cast<uint32_t>(ack.checksums.size());
  Put(out, &ack.bytes_received, 8);
  Put(out, &status, 4);
  Put(out, &n, 4);
  Put(out, ack.checksums.data(), 8ull * n);
  *out += ack.error;
}

absl::StatusOr<AckMeta> DecodeAckMeta(std::span<const std::byte> bytes) {
  AckMeta ack;
  if (absl::Status s = DecodeAckMeta(bytes, &ack); !s.ok()) return s;
  return ack;
}

absl::Status DecodeAckMeta(std::span<const std::byte> bytes, AckMeta* ack) {
  uint32_t status = 0, n = 0;
  if (!Get(&bytes, &ack->bytes_received) || !Get(&bytes, &status) || !Get(&bytes, &n) ||
      bytes.size() < 8ull * n || status > static_cast<uint32_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::DataLossError("malformed acknowledgement");
  }
  ack->ok = status == 0;
  ack->code = static_cast<absl::StatusCode>(status);
  ack->checksums.resize(n);
  if (n > 0) {  // memcpy wants real pointers
    std::memcpy(ack->checksums.data(), bytes.data(), 8ull * n);
    bytes = bytes.subspan(8ull * n);
  }
  ack->error.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return absl::OkStatus();
}

// uint32 code, uint32 buffers, uint32 flags (1: checksums follow the sizes), uint32 error
// bytes, uint64 sizes[buffers], uint64 checksums[buffers] (flag 1), the error text.
void EncodeExchangeReplyMeta(const ExchangeReplyMeta& reply, std::string* out) {
  out->clear();
  const bool sums = !reply.checksums.empty();
  std::string_view error(reply.error);
  error = error.substr(0, kMaxExchangeErrorBytes);
  uint32_t code = static_cast<uint32_t>(reply.code), n = static_cast<uint32_t>(reply.sizes.size()),
           flags = sums ? 1 : 0, error_bytes = static_cast<uint32_t>(error.size());
  Put(out, &code, 4);
  Put(out, &n, 4);
  Put(out, &flags, 4);
  Put(out, &error_bytes, 4);
  Put(out, reply.sizes.data(), 8ull * n);
  if (sums) Put(out, reply.checksums.data(), 8ull * n);
  out->append(error);
}

absl::Status DecodeExchangeReplyMeta(std::span<const std::byte> bytes, ExchangeReplyMeta* reply) {
  uint32_t code = 0, n = 0, flags = 0, error_bytes = 0;
  if (!Get(&bytes, &code) || !Get(&bytes, &n) || !Get(&bytes, &flags) ||
      !Get(&bytes, &error_bytes) || code > static_cast<uint32_t>(absl::StatusCode::kUnauthenticated) ||
      flags > 1 || bytes.size() != (flags ? 16ull : 8ull) * n + error_bytes) {
    return absl::DataLossError("malformed exchange reply");
  }
  reply->code = static_cast<absl::StatusCode>(code);
  reply->sizes.resize(n);
  reply->checksums.resize(flags ? n : 0);
  if (n > 0) {  // an error reply has no sizes (and memcpy wants real pointers)
    std::memcpy(reply->sizes.data(), bytes.data(), 8ull * n);
    bytes = bytes.subspan(8ull * n);
    if (flags) {
      std::memcpy(reply->checksums.data(), bytes.data(), 8ull * n);
      bytes = bytes.subspan(8ull * n);
    }
  }
  reply->error.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return absl::OkStatus();
}

void BufferChecksums::Reset(const std::vector<uint64_t>* sizes) {
  sizes_ = sizes;
  buffer_ = 0;
  offset_ = 0;
  stream_.Reset();
  done_.clear();
  FinishEmpty();
}

void BufferChecksums::FinishEmpty() {
  while (buffer_ < sizes_->size() && (*sizes_)[buffer_] == offset_) {
    done_.push_back(stream_.Digest());
    stream_.Reset();
    ++buffer_;
    offset_ = 0;
  }
}

void BufferChecksums::Update(std::span<const std::byte> bytes) {
  while (!bytes.empty() && buffer_ < sizes_->size()) {
    uint64_t n = std::min<uint64_t>(bytes.size(), (*sizes_)[buffer_] - offset_);
    stream_.Update(bytes.first(n));
    offset_ += n;
    bytes = bytes.subspan(n);
    FinishEmpty();
  }
}

}  // namespace psbench
