#include "transports/grpc/raw_format.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <limits>

#include "absl/strings/str_format.h"
#include "payloads/payload.h"
#include "payloads/size.h"

namespace psbench::grpc_transport {
namespace {

struct FixedHeader {
  uint32_t magic;
  uint32_t flags;
  uint32_t count;
  uint32_t reserved;
};
static_assert(sizeof(FixedHeader) == 16);  // PayloadHeaderBytes (raw_format.h) counts on it

void Append(std::string& out, const void* data, size_t n) {
  out.append(static_cast<const char*>(data), n);
}

}  // namespace

uint64_t RawHeader::payload_bytes() const {
  uint64_t total = 0;
  for (uint64_t s : sizes) total += s;
  return total;
}

std::string EncodePayloadHeader(const std::vector<uint64_t>& sizes,
                                const std::vector<uint64_t>* checksums) {
  FixedHeader fixed{kPayloadMagic, checksums ? kFlagValidate : 0,
                    static_cast<uint32_t>(sizes.size()), 0};
  std::string out;
  out.reserve(PayloadHeaderBytes(sizes.size(), checksums != nullptr));
  Append(out, &fixed, sizeof(fixed));
  Append(out, sizes.data(), sizes.size() * sizeof(uint64_t));
  if (checksums) Append(out, checksums->data(), checksums->size() * sizeof(uint64_t));
  return out;
}

grpc::Slice EncodeAck(uint64_t bytes_received, const std::vector<uint64_t>& checksums) {
  FixedHeader fixed{kAckMagic, 0, static_cast<uint32_t>(checksums.size()), 0};
  // Written straight into the slice gRPC sends: no string to build and copy per ack.
  const size_t checksum_bytes = checksums.size() * sizeof(uint64_t);
  grpc_slice slice = grpc_slice_malloc(sizeof(fixed) + sizeof(bytes_received) + checksum_bytes);
  uint8_t* out = GRPC_SLICE_START_PTR(slice);
  std::memcpy(out, &fixed, sizeof(fixed));
  std::memcpy(out + sizeof(fixed), &bytes_received, sizeof(bytes_received));
  if (checksum_bytes > 0) std::memcpy(out + sizeof(fixed) + sizeof(bytes_received), checksums.data(), checksum_bytes);
  return grpc::Slice(slice, grpc::Slice::STEAL_REF);
}

SliceReader::SliceReader(const grpc::ByteBuffer& buffer) {
  // Both take references to the slices; the payload itself is not copied.
  grpc::Slice one;
  if (buffer.TrySingleSlice(&one).ok()) {
    slices_.push_back(std::move(one));
  } else {
    std::vector<grpc::Slice> all;
    (void)buffer.Dump(&all);
    slices_.assign(std::make_move_iterator(all.begin()), std::make_move_iterator(all.end()));
  }
  for (const auto& s : slices_) remaining_ += s.size();
  // Skip empty slices so Consume never looks at one.
  slices_.erase(std::remove_if(slices_.begin(), slices_.end(), [](const grpc::Slice& s) { return s.size() == 0; }),
                slices_.end());
}

bool SliceReader::Read(void* dst, size_t n) {
  auto* out = static_cast<std::byte*>(dst);
  return Consume(n, [&out](const std::byte* p, size_t len) {
    std::memcpy(out, p, len);
    out += len;
  });
}

absl::StatusOr<RawAck> DecodeAck(const grpc::ByteBuffer& buffer) {
  auto malformed = [] { return absl::DataLossError("malformed acknowledgement from the PS"); };
  // An ack is small and nearly always one slice: read in place, without a SliceReader per
  // call; a fragmented one is joined into one slice first.
  grpc::Slice one;
  if (!buffer.TrySingleSlice(&one).ok() && !buffer.DumpToSingleSlice(&one).ok()) return malformed();
  const uint8_t* p = one.begin();
  const size_t n = one.size();
  FixedHeader fixed;
  if (n < sizeof(fixed) + sizeof(uint64_t)) return malformed();
  std::memcpy(&fixed, p, sizeof(fixed));
  if (fixed.magic != kAckMagic || fixed.count > kMaxBuffers ||
      n != sizeof(fixed) + sizeof(uint64_t) * (1 + uint64_t{fixed.count})) {
    return malformed();
  }
  RawAck ack;
  std::memcpy(&ack.bytes_received, p + sizeof(fixed), sizeof(uint64_t));
  ack.checksums.resize(fixed.count);
  if (fixed.count > 0) {
    std::memcpy(ack.checksums.data(), p + sizeof(fixed) + sizeof(uint64_t), fixed.count * sizeof(uint64_t));
  }
  return ack;
}

absl::StatusOr<RawHeader> ReadPayloadHeader(SliceReader& reader) {
  FixedHeader fixed;
  if (!reader.Read(&fixed, sizeof(fixed))) {
    return absl::DataLossError("payload shorter than its header");
  }
  if (fixed.magic != kPayloadMagic) {
    return absl::DataLossError(absl::StrFormat("bad payload magic 0x%08x", fixed.magic));
  }
  if (fixed.count > kMaxBuffers) {
    return absl::DataLossError(absl::StrFormat("payload claims %u buffers", fixed.count));
  }
  // Nothing is allocated for a header that the message is too short to hold.
  const uint64_t words = uint64_t{fixed.count} * ((fixed.flags & kFlagValidate) ? 2 : 1);
  if (reader.remaining() < words * sizeof(uint64_t)) {
    return absl::DataLossError("payload header truncated");
  }
  RawHeader header;
  header.flags = fixed.flags;
  header.sizes.resize(fixed.count);
  if (!reader.Read(header.sizes.data(), fixed.count * sizeof(uint64_t))) {
    return absl::DataLossError("payload header truncated");
  }
  if (fixed.flags & kFlagValidate) {
    header.checksums.resize(fixed.count);
    if (!reader.Read(header.checksums.data(), fixed.count * sizeof(uint64_t))) {
      return absl::DataLossError("payload header truncated");
    }
  }
  // The sizes must add up without wrapping around: a sum that wraps could match the bytes
  // that follow while one buffer claims nearly 2^64 of them.
  uint64_t total = 0;
  for (uint64_t size : header.sizes) {
    if (size > std::numeric_limits<uint64_t>::max() - total) {
      return absl::DataLossError("payload header's buffer sizes add up to more than 2^64 bytes");
    }
    total += size;
  }
  return header;
}

absl::Status ReadBuffers(SliceReader& reader, const RawHeader& header,
                         std::vector<uint64_t>* checksums) {
  uint64_t expected = header.payload_bytes();
  if (reader.remaining() != expected) {
    return absl::DataLossError(absl::StrFormat(
        "payload carries %u bytes after its header, the header announces %u",
        reader.remaining(), expected));
  }
  if (checksums == nullptr) return absl::OkStatus();
  checksums->clear();
  checksums->reserve(header.sizes.size());
  ChecksumStream stream;
  for (uint64_t size : header.sizes) {
    stream.Reset();
    reader.Consume(size, [&stream](const std::byte* p, size_t n) { stream.Update({p, n}); });
    checksums->push_back(stream.Digest());
  }
  return absl::OkStatus();
}

absl::Status CompareChecksums(const std::vector<uint64_t>& sent,
                              const std::vector<uint64_t>& received,
                              const std::vector<uint64_t>& sizes) {
  if (sent.size() != received.size()) {
    return absl::DataLossError(absl::StrFormat("%u buffers sent, %u checksummed on arrival",
                                               sent.size(), received.size()));
  }
  for (size_t i = 0; i < sent.size(); ++i) {
    if (sent[i] != received[i]) {
      return absl::DataLossError(absl::StrFormat(
          "buffer %u of %u (%s): checksum 0x%016x received, 0x%016x sent", i + 1, sent.size(),
          i < sizes.size() ? FormatSize(sizes[i]) : "?", received[i], sent[i]));
    }
  }
  return absl::OkStatus();
}

}  // namespace psbench::grpc_transport

namespace psbench::grpc_transport {

absl::StatusOr<RawHeader> DecodeRawRequest(SliceReader& reader, std::vector<uint64_t>* checksums) {
  checksums->clear();
  auto header = ReadPayloadHeader(reader);
  if (!header.ok()) return header.status();
  const bool validate = header->flags & kFlagValidate;
  if (absl::Status s = ReadBuffers(reader, *header, validate ? checksums : nullptr); !s.ok()) {
    return s;
  }
  if (validate) {
    if (absl::Status s = CompareChecksums(header->checksums, *checksums, header->sizes); !s.ok()) {
      return s;
    }
  }
  return header;
}

absl::StatusOr<uint64_t> DecodeRawExchange(SliceReader& reader, BlockPool& pool,
                                           ExchangeBuffers* buffers) {
  auto header = ReadPayloadHeader(reader);
  if (!header.ok()) return header.status();
  const uint64_t bytes = header->payload_bytes();
  if (absl::Status s = ReadBuffers(reader, *header, nullptr); !s.ok()) return s;  // sizes only
  buffers->sizes = std::move(header->sizes);
  std::vector<uint64_t> offsets;
  auto block = pool.Take(LayOutBuffers(buffers->sizes, &offsets));
  if (!block.ok()) return block.status();
  buffers->block = std::move(*block);
  buffers->PlaceReply(offsets);
  buffers->request.clear();
  std::vector<std::span<const std::byte>> pieces;
  for (size_t i = 0; i < buffers->sizes.size(); ++i) {
    pieces.clear();
    reader.Consume(buffers->sizes[i],
                   [&pieces](const std::byte* p, size_t n) { pieces.emplace_back(p, n); });
    // A buffer in one slice is lent in place, unless that slice may be an inlined one: its
    // bytes then live in the reader's own copy of the slice, which dies with the reader.
    if (pieces.empty() || (pieces.size() == 1 && pieces[0].size() > GRPC_SLICE_INLINED_SIZE)) {
      buffers->request.push_back(pieces.empty() ? std::span<const std::byte>() : pieces[0]);
      continue;
    }
    std::byte* out = buffers->reply[i].data();
    for (const auto& piece : pieces) {
      std::memcpy(out, piece.data(), piece.size());
      out += piece.size();
    }
    buffers->request.push_back(buffers->reply[i]);
  }
  if (header->flags & kFlagValidate) {
    buffers->validate = true;
    if (absl::Status s = VerifyRequest(*buffers, header->checksums); !s.ok()) return s;
  }
  return bytes;
}

}  // namespace psbench::grpc_transport
