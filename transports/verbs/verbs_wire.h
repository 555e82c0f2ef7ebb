// The grpc+verbs data plane, all RDMA WRITE WITH IMMEDIATE on an RC queue pair.
//
// Each side owns a receive region of `slots` slots of `slot_bytes`, registered once and told
// to the peer at setup; a connection uses min(both sides' slots) of them, as a ring. A chunk
// is one slot's worth: a 64-byte ChunkHeader, then (first chunk only) metadata, then payload
// bytes gathered straight from the payload's own buffers (one SGE each, no copy). It is
// written into the next slot of the ring and the immediate names the slot. Credits are
// cumulative counts of slots the receiver has freed (in ring order). They ride in the
// header of every chunk going the other way; only when none is going and half the ring is
// waiting does the receiver send them alone, as a zero-byte write whose immediate has
// kCreditBit set and the count's low 31 bits. A payload that does not fit one slot goes in
// several chunks; chunks of one connection arrive in order.
//
// Worker -> PS: kPush / kEcho / kExchange chunks; metadata = PayloadMeta.
// PS -> worker: kEchoReply chunks (the PS writes back from its own slot, no copy), one kAck
//               whose metadata is AckMeta, or kExchangeReply chunks whose metadata is
//               ExchangeReplyMeta (data_meta.h) and whose data, only when its verdict is OK,
//               is the reply: written back from the slot the request arrived in when it
//               fitted one, else from registered pooled memory the PS gathered it into. The
//               worker copies it into its reply payload. An exchange's handler may hold it,
//               so its reply may overtake replies to later requests: the worker matches
//               replies by request_id (chunks of one message still arrive together, in order).
#ifndef PSBENCH_TRANSPORTS_VERBS_VERBS_WIRE_H_
#define PSBENCH_TRANSPORTS_VERBS_VERBS_WIRE_H_

#include <cstdint>

namespace psbench::verbs {

inline constexpr uint32_t kChunkMagic = 0x56425350;  // "PSBV"
inline constexpr uint32_t kCreditBit = 0x80000000u;
inline constexpr uint32_t kSlotMask = 0xffffu;

enum ChunkKind : uint8_t {
  kPush = 1,
  kEcho = 2,
  kEchoReply = 3,
  kAck = 4,
  kExchange = 5,
  kExchangeReply = 6,
};

enum ChunkFlags : uint8_t {
  kFirst = 1,
  kLast = 2,
  kValidate = 4,    // PayloadMeta carries checksums; the PS checks them
  kPsMismatch = 8,  // echo reply: the PS found a checksum mismatch (aux = buffer index)
};

struct ChunkHeader {
  uint32_t magic;
  uint8_t kind;
  uint8_t flags;
  uint16_t reserved;
  uint32_t request_id;
  uint32_t meta_bytes;   // metadata after the header (first chunk only)
  uint64_t data_bytes;   // payload bytes in this chunk, after the metadata
  uint64_t offset;       // where they start in the payload
  uint64_t total_bytes;  // the whole payload
  uint64_t aux;
  uint64_t credits;  // slots of the sender's ring the sender has freed, cumulative
  uint64_t pad;
};
static_assert(sizeof(ChunkHeader) == 64);
inline constexpr uint64_t kHeaderBytes = sizeof(ChunkHeader);

// What a receiver checks in a chunk's header (a copy: the peer may write the slot at any
// time) before it touches the chunk, for slots of `slot_bytes`: a known kind, metadata and
// data within the slot, and data within the payload it announces.
inline bool ChunkHeaderValid(const ChunkHeader& h, uint64_t slot_bytes) {
  if (slot_bytes < kHeaderBytes) return false;
  const uint64_t room = slot_bytes - kHeaderBytes;
  return h.magic == kChunkMagic && h.kind >= kPush && h.kind <= kExchangeReply &&
         h.meta_bytes <= room && h.data_bytes <= room - h.meta_bytes &&
         h.offset <= h.total_bytes && h.data_bytes <= h.total_bytes - h.offset;
}

// The cumulative count of freed slots that a credit-only immediate carries as its low 31
// bits, given the count already known (the count never runs more than a ring ahead).
inline uint64_t CreditsFromImm(uint64_t known, uint32_t imm) {
  return known + ((imm - static_cast<uint32_t>(known)) & ~kCreditBit);
}

// PayloadMeta: uint32 buffers, uint32 zero, uint64 sizes[buffers], then with kValidate
// uint64 checksums[buffers] (XXH3-64).
// AckMeta: uint64 bytes_received, uint32 status (0 ok, 1 data loss), uint32 checksums count,
// uint64 checksums[count], then the error text (status != 0), not terminated.

}  // namespace psbench::verbs

#endif  // PSBENCH_TRANSPORTS_VERBS_VERBS_WIRE_H_
