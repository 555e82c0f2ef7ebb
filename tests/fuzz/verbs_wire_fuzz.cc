// grpc+verbs chunks (verbs_wire.h) as a receiver finds them in one of its RDMA slots. Bytes
// 0..1 pick the slot size (64 B .. 64 KiB + 63), byte 2 the credits the receiver knows of;
// the rest is the slot's contents (the slot is exactly that big, so ASan sees any read past
// it). A chunk whose header ChunkHeaderValid accepts has its metadata and data inside the
// slot; its metadata decodes as the receiver of that kind decodes it (PayloadMeta for a
// request's first chunk, AckMeta, ExchangeReplyMeta); a credit-only immediate never moves
// the freed-slot count back or by a ring's worth of 2^31.
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "payloads/payload.h"
#include "tests/fuzz/fuzz_check.h"
#include "transports/data_meta.h"
#include "transports/verbs/verbs_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psbench;
  using namespace psbench::verbs;
  if (size < 3) return 0;
  const uint64_t slot_bytes = (uint64_t{data[0]} | uint64_t{data[1]} << 8) + 1;
  const uint64_t known = data[2];
  std::vector<std::byte> slot(slot_bytes);
  std::memcpy(slot.data(), data + 3, std::min<size_t>(size - 3, slot_bytes));

  ChunkHeader h;
  if (slot_bytes < kHeaderBytes) {
    FUZZ_CHECK(!ChunkHeaderValid(ChunkHeader{}, slot_bytes));
    return 0;
  }
  std::memcpy(&h, slot.data(), kHeaderBytes);  // the receiver's checked copy
  // Credits: the immediate of a credit-only write (taken from the header's pad here).
  const uint32_t imm = static_cast<uint32_t>(h.pad) | kCreditBit;
  const uint64_t freed = CreditsFromImm(known, imm);
  FUZZ_CHECK(freed >= known && freed - known < (uint64_t{1} << 31));
  FUZZ_CHECK(((freed ^ imm) & ~kCreditBit) == 0);  // the low 31 bits are the immediate's

  if (!ChunkHeaderValid(h, slot_bytes)) return 0;
  FUZZ_CHECK(kHeaderBytes + h.meta_bytes + h.data_bytes <= slot_bytes);
  FUZZ_CHECK(h.offset + h.data_bytes <= h.total_bytes);
  const std::span<const std::byte> meta(slot.data() + kHeaderBytes, h.meta_bytes);
  const std::span<const std::byte> chunk_data(slot.data() + kHeaderBytes + h.meta_bytes, h.data_bytes);
  (void)Checksum(meta);
  (void)Checksum(chunk_data);
  switch (h.kind) {
    case kPush:
    case kEcho:
    case kExchange: {
      if (!(h.flags & kFirst)) break;
      PayloadMeta m;
      if (DecodePayloadMeta(meta, h.flags & kValidate, h.total_bytes, &m).ok()) {
        BufferChecksums sums;
        sums.Reset(&m.sizes);
        sums.Update(chunk_data);
        FUZZ_CHECK(sums.checksums().size() <= m.sizes.size());
        if (h.data_bytes == h.total_bytes) FUZZ_CHECK(sums.checksums().size() == m.sizes.size());
      }
      break;
    }
    case kAck: {
      AckMeta ack;
      (void)DecodeAckMeta(meta, &ack);
      break;
    }
    case kExchangeReply: {
      ExchangeReplyMeta reply;
      if (DecodeExchangeReplyMeta(meta, &reply).ok()) {
        FUZZ_CHECK(meta.size() >= 16 + 8 * reply.sizes.size());
      }
      break;
    }
    default:
      break;
  }
  return 0;
}
