// Non-serialized gRPC messages (raw_format.h), byte 0 picking what decodes the rest and
// byte 1 how it is sliced:
//   0: an Echo/Push request as the PS decodes it (DecodeRawRequest)
//   1: an Exchange request as the PS decodes it for its handler (DecodeRawExchange)
//   2: a push acknowledgement as the worker decodes it (DecodeAck)
// Whatever is accepted re-encodes (EncodePayloadHeader, EncodeAck) to the bytes it came from,
// its sizes add up to the bytes that follow the header, checksums are the buffers', and the
// handler's spans hold exactly the request's bytes (and its reply spans are writable).
#include <cstring>
#include <string>
#include <string_view>

#include "payloads/payload.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_grpc.h"
#include "transports/exchange.h"
#include "transports/grpc/raw_format.h"

namespace {

using namespace psbench;
using namespace psbench::grpc_transport;

void Request(std::string_view message, uint8_t cuts) {
  grpc::ByteBuffer buffer = fuzz::Fragmented(message, cuts);
  SliceReader reader(buffer);
  std::vector<uint64_t> checksums;
  const absl::StatusOr<RawHeader> header = DecodeRawRequest(reader, &checksums);
  if (!header.ok()) {
    FUZZ_CHECK(header.status().code() == absl::StatusCode::kDataLoss);
    return;
  }
  for (uint64_t b : header->sizes) FUZZ_CHECK(b <= message.size());
  const bool validate = header->flags & kFlagValidate;
  const std::string encoded = EncodePayloadHeader(header->sizes, validate ? &header->checksums : nullptr);
  FUZZ_CHECK(encoded.size() <= message.size());
  // Flags other than kFlagValidate are ignored, and so is the reserved word.
  FUZZ_CHECK(std::memcmp(encoded.data(), message.data(), 4) == 0);
  FUZZ_CHECK(std::memcmp(encoded.data() + 8, message.data() + 8, 4) == 0);
  FUZZ_CHECK(encoded.compare(16, std::string::npos, message.substr(16, encoded.size() - 16)) == 0);
  FUZZ_CHECK(header->payload_bytes() == message.size() - encoded.size());
  if (validate) {
    FUZZ_CHECK(checksums == header->checksums);
    uint64_t at = encoded.size();
    for (size_t i = 0; i < header->sizes.size(); ++i) {
      FUZZ_CHECK(checksums[i] == Checksum(std::as_bytes(std::span(message.substr(at, header->sizes[i])))));
      at += header->sizes[i];
    }
  } else {
    FUZZ_CHECK(checksums.empty());
  }
}

void Exchange(std::string_view message, uint8_t cuts) {
  static std::shared_ptr<BlockPool> pool = BlockPool::Create();
  grpc::ByteBuffer buffer = fuzz::Fragmented(message, cuts);
  SliceReader reader(buffer);
  ExchangeBuffers buffers;
  const absl::StatusOr<uint64_t> bytes = DecodeRawExchange(reader, *pool, &buffers);
  if (!bytes.ok()) return;
  FUZZ_CHECK(buffers.request.size() == buffers.sizes.size());
  FUZZ_CHECK(buffers.reply.size() == buffers.sizes.size());
  FUZZ_CHECK(*bytes <= message.size());
  std::string joined;
  for (size_t i = 0; i < buffers.sizes.size(); ++i) {
    FUZZ_CHECK(buffers.sizes[i] <= message.size());
    FUZZ_CHECK(buffers.request[i].size() == buffers.sizes[i]);
    FUZZ_CHECK(buffers.reply[i].size() == buffers.sizes[i]);
    joined.append(reinterpret_cast<const char*>(buffers.request[i].data()), buffers.request[i].size());
  }
  FUZZ_CHECK(joined.size() == *bytes);
  FUZZ_CHECK(message.substr(message.size() - *bytes) == joined);
  // The handler reads every request buffer, then writes its reply.
  for (size_t i = 0; i < buffers.sizes.size(); ++i) {
    if (buffers.sizes[i] > 0) std::memset(buffers.reply[i].data(), 0xab, buffers.reply[i].size());
  }
}

void Ack(std::string_view message, uint8_t cuts) {
  grpc::ByteBuffer buffer = fuzz::Fragmented(message, cuts);
  const absl::StatusOr<RawAck> ack = DecodeAck(buffer);
  if (!ack.ok()) return;
  const grpc::Slice slice = EncodeAck(ack->bytes_received, ack->checksums);
  const std::string encoded(reinterpret_cast<const char*>(slice.begin()), slice.size());
  FUZZ_CHECK(encoded.size() == message.size());
  FUZZ_CHECK(std::memcmp(encoded.data(), message.data(), 4) == 0);
  // Flags and the reserved word are ignored.
  FUZZ_CHECK(std::memcmp(encoded.data() + 8, message.data() + 8, 4) == 0);
  FUZZ_CHECK(encoded.substr(16) == message.substr(16));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string_view message(reinterpret_cast<const char*>(data) + 2, size - 2);
  switch (data[0] % 3) {
    case 0:
      Request(message, data[1]);
      break;
    case 1:
      Exchange(message, data[1]);
      break;
    case 2:
      Ack(message, data[1]);
      break;
  }
  return 0;
}
