// What grpc+mpi sends over MPI, on psbench's own communicator.
//
//   worker -> PS, tag kControlTag: RequestHeader, then the payload metadata (data_meta.h:
//                                  buffer sizes, and checksums under --validate)
//   worker -> PS, tag data_tag:    the payload, one message per buffer in order (empty ones
//                                  too), each straight from the buffer's own memory
//   PS -> worker, tag data_tag:    the acknowledgement (data_meta.h AckMeta); for an echo,
//                                  then the payload again, one message per buffer
//   PS -> worker, tag data_tag:    for an exchange, the reply metadata (data_meta.h
//                                  ExchangeReplyMeta: the verdict, the reply's sizes and,
//                                  under --validate, the PS's checksums), then the reply, one
//                                  message per buffer of the request (all empty unless the
//                                  verdict is OK), which the worker receives straight into its
//                                  reply payload's buffers
//
// One message per buffer, not one over an MPI datatype spanning them: a contiguous message
// goes with a single copy (CMA between ranks of one node, RDMA between nodes), while a
// datatype over scattered buffers is packed through MPI's pipeline of small fragments, which
// stalls whenever the peer is not running (a 531 MB VGG-11 payload of 22 buffers took three
// times as long that way as one 512 MiB buffer).
//   worker -> PS, tag kControlTag: a RequestHeader of kind kGoodbye when the worker is done;
//                                  a PS leaves once every worker rank has said goodbye
//
// Eager: an echo or push whose whole request (header, metadata and payload) fits in
// kEagerMessageBytes travels as one message, the kControlTag one, its payload after the
// metadata (flag kEager); the PS answers an eager echo with one message too, on the data tag:
// the acknowledgement's length (4 bytes, little-endian), the acknowledgement, then the payload
// if it came through whole. Small requests then cost one message each way instead of two or
// more, as MPI's own eager protocol does under them.
//
// The PS keeps one receive posted for kControlTag messages, of kMaxControlBytes, so that each
// of its polls is one MPI_Testsome over everything it waits for (probing for a header of
// unknown length instead cost a matching attempt, and a lock, on every poll). A request whose
// header and metadata would not fit (thousands of buffers) sends the RequestHeader alone,
// flag kMetaFollows and the metadata's length in `meta_bytes`, and the metadata as the first
// message on its data tag, ahead of the payload.
//
// Each request of a worker to a PS has its own data tag, so requests in flight at the same
// time never match each other's messages; MPI orders messages of one tag between two ranks,
// which keeps an echo's acknowledgement ahead of its data.
#ifndef PSBENCH_TRANSPORTS_MPI_MPI_WIRE_H_
#define PSBENCH_TRANSPORTS_MPI_MPI_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

namespace psbench::mpi {

inline constexpr int kControlTag = 1;
inline constexpr int kFirstDataTag = 16;

enum RequestKind : uint8_t {
  kEcho = 1,
  kPush = 2,
  kGoodbye = 3,
  kExchange = 4,  // the PS's exchange handler answers with buffers of the same sizes
};

enum RequestFlags : uint8_t {
  kValidate = 1,
  kEager = 2,
  kMetaFollows = 4,
};

// Open MPI's shared-memory transport sends messages of up to 4 KiB at once (btl_vader's eager
// limit); a little is left for its own headers.
inline constexpr size_t kEagerMessageBytes = 4032;

// The largest kControlTag message: the PS's posted receive for headers.
inline constexpr size_t kMaxControlBytes = 64 << 10;
// The most metadata a kMetaFollows request may announce (16 bytes per buffer, with checksums,
// for a million buffers).
inline constexpr uint64_t kMaxMetaFollowsBytes = 16 << 20;

struct RequestHeader {
  uint32_t magic = kMagic;
  uint8_t kind = kPush;
  uint8_t flags = 0;
  uint16_t reserved = 0;
  int32_t data_tag = 0;
  uint32_t meta_bytes = 0;  // kMetaFollows: the metadata's length, sent on the data tag
  uint64_t total_bytes = 0;

  static constexpr uint32_t kMagic = 0x4d425350;  // "PSBM"
};
static_assert(sizeof(RequestHeader) == 24);

// A payload's bytes, counted in an int by both ends.
inline constexpr uint64_t kMaxMessageBytes = 0x7fffffff;

// Reads the RequestHeader at the start of a kControlTag message as the PS does. Returns
// null when it is well formed, else why not (the PS then stops: the job is broken). A
// goodbye needs nothing more; any other kind must be a request with a data tag in
// [kFirstDataTag, kFirstDataTag + data_tag_span) and at most kMaxMessageBytes. The payload
// metadata (data_meta.h PayloadMeta) follows the header in the same message, unless
// kMetaFollows says that it comes on the data tag.
inline const char* ParseRequestHeader(std::span<const std::byte> message, int data_tag_span,
                                      RequestHeader* h) {
  if (message.size() < sizeof *h) return "a request header too short";
  std::memcpy(h, message.data(), sizeof *h);
  if (h->magic != RequestHeader::kMagic) return "a request header of another protocol";
  if (h->kind == kGoodbye) return nullptr;
  if ((h->kind != kEcho && h->kind != kPush && h->kind != kExchange) ||
      h->total_bytes > kMaxMessageBytes || h->data_tag < kFirstDataTag ||
      h->data_tag - kFirstDataTag >= data_tag_span) {
    return "a malformed request header";
  }
  if ((h->flags & kEager) && ((h->kind != kEcho && h->kind != kPush) || message.size() > kEagerMessageBytes ||
                              message.size() < sizeof *h + h->total_bytes)) {
    return "a malformed eager request";
  }
  if ((h->flags & kMetaFollows) &&
      ((h->flags & kEager) || message.size() != sizeof *h || h->meta_bytes == 0 ||
       h->meta_bytes > kMaxMetaFollowsBytes)) {
    return "a malformed request with its metadata following";
  }
  return nullptr;
}

// A worker's header (RequestHeader and metadata) over kMaxControlBytes: moves the metadata
// out into *meta, to follow on the data tag, and says so in the header. False when there is
// more metadata than a PS takes (kMaxMetaFollowsBytes).
inline bool MoveMetaOut(std::string* header, std::string* meta) {
  RequestHeader h;
  std::memcpy(&h, header->data(), sizeof h);
  const size_t n = header->size() - sizeof h;
  if (n > kMaxMetaFollowsBytes) return false;
  meta->assign(*header, sizeof h, n);
  h.flags |= kMetaFollows;
  h.meta_bytes = static_cast<uint32_t>(n);
  header->assign(reinterpret_cast<const char*>(&h), sizeof h);
  return true;
}

// An eager echo's answer: the acknowledgement's length, the acknowledgement, the payload.
inline void EncodeEagerReply(const std::string& ack, std::span<const std::byte> payload, std::string* out) {
  const uint32_t n = static_cast<uint32_t>(ack.size());
  out->resize(4 + ack.size() + payload.size());
  for (int i = 0; i < 4; ++i) (*out)[i] = static_cast<char>(n >> (8 * i));
  std::memcpy(out->data() + 4, ack.data(), ack.size());
  if (!payload.empty()) std::memcpy(out->data() + 4 + ack.size(), payload.data(), payload.size());
}

// Splits one; false when the message is too short for the length it gives.
inline bool SplitEagerReply(std::span<const std::byte> message, std::span<const std::byte>* ack,
                            std::span<const std::byte>* payload) {
  if (message.size() < 4) return false;
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(message[i]) << (8 * i);
  if (n > message.size() - 4) return false;
  *ack = message.subspan(4, n);
  *payload = message.subspan(4 + n);
  return true;
}

// The largest acknowledgement error text a PS sends; longer ones are cut.
inline constexpr size_t kMaxAckErrorBytes = 200;

}  // namespace psbench::mpi

#endif  // PSBENCH_TRANSPORTS_MPI_MPI_WIRE_H_
