// grpc+mpi control messages (mpi_wire.h) as the PS receives them on kControlTag: byte 0
// picks the data tag span of the job (1..256 tags); the rest is the message, a RequestHeader
// (ParseRequestHeader) and the payload metadata after it (DecodePayloadMeta). An accepted
// request is a known kind with a data tag inside the span and at most kMaxMessageBytes, its
// buffer sizes add up to its total, and they lay out (LayOutBuffers) within the bounds the
// PS allocates for. An eager request (an echo or push) carries its payload at the end, after
// the metadata. A kMetaFollows request is the header alone, announcing at most
// kMaxMetaFollowsBytes of metadata. The same bytes are also split as a worker splits an eager echo's answer
// (SplitEagerReply): the parts it returns lie within the message.
#include <cstring>
#include <span>
#include <vector>

#include "tests/fuzz/fuzz_check.h"
#include "transports/data_meta.h"
#include "transports/exchange.h"
#include "transports/mpi/mpi_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psbench;
  using namespace psbench::mpi;
  if (size < 1) return 0;
  const int span = data[0] + 1;
  // A heap copy exactly the message's size, as MPI_Mrecv leaves it.
  const std::vector<std::byte> message(reinterpret_cast<const std::byte*>(data) + 1,
                                       reinterpret_cast<const std::byte*>(data) + size);
  std::span<const std::byte> ack, payload;
  if (SplitEagerReply(message, &ack, &payload)) {
    FUZZ_CHECK(4 + ack.size() + payload.size() == message.size());
    FUZZ_CHECK(ack.data() == message.data() + 4);
  }
  RequestHeader h;
  if (const char* error = ParseRequestHeader(message, span, &h)) {
    FUZZ_CHECK(*error != '\0');
    return 0;
  }
  FUZZ_CHECK(h.magic == RequestHeader::kMagic);
  if (h.kind == kGoodbye) return 0;
  FUZZ_CHECK(h.kind == kEcho || h.kind == kPush || h.kind == kExchange);
  FUZZ_CHECK(h.data_tag >= kFirstDataTag && h.data_tag < kFirstDataTag + span);
  FUZZ_CHECK(h.total_bytes <= kMaxMessageBytes);
  if (h.flags & kMetaFollows) {  // the header alone; its metadata comes on the data tag
    FUZZ_CHECK(!(h.flags & kEager) && message.size() == sizeof h);
    FUZZ_CHECK(h.meta_bytes > 0 && h.meta_bytes <= kMaxMetaFollowsBytes);
    return 0;
  }
  PayloadMeta meta;
  std::span<const std::byte> rest = std::span(message).subspan(sizeof h);
  if (h.flags & kEager) {
    FUZZ_CHECK(h.kind == kEcho || h.kind == kPush);
    FUZZ_CHECK(rest.size() >= h.total_bytes && message.size() <= kEagerMessageBytes);
    rest = rest.first(rest.size() - h.total_bytes);  // the payload, as the PS copies it out
  }
  if (!DecodePayloadMeta(rest, h.flags & kValidate, h.total_bytes, &meta).ok()) return 0;
  uint64_t sum = 0;
  for (uint64_t s : meta.sizes) sum += s;
  FUZZ_CHECK(sum == h.total_bytes);
  std::vector<uint64_t> offsets;
  const uint64_t laid_out = LayOutBuffers(meta.sizes, &offsets);
  FUZZ_CHECK(laid_out >= h.total_bytes);
  FUZZ_CHECK(offsets.size() == meta.sizes.size());
  for (size_t i = 0; i < offsets.size(); ++i) FUZZ_CHECK(offsets[i] + meta.sizes[i] <= laid_out);
  return 0;
}
