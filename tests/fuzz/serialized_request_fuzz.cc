// Serialized gRPC requests (psbench.proto PayloadMessage), byte 0 picking how the rest is
// sliced: parsed as the PS parses them (ParseSerializedRequest: counted, bounded, then
// deserialized), which must agree with gRPC's own deserialization (SerializationTraits) on
// every message it accepts and on why it refuses the others; then checked as the PS checks
// an Echo, Push or Exchange (VerifyPayloadMessage) and laid out for the exchange handler
// (ExchangeBuffersFromMessage). The PS's checksums of an accepted message are the sender's;
// the handler's spans are the message's buffers, writable; the message serializes back to
// bytes that parse to the same message.
#include <grpcpp/impl/codegen/proto_utils.h>

#include <algorithm>

#include <cstring>
#include <string>
#include <string_view>

#include "psbench.pb.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_grpc.h"
#include "transports/exchange.h"
#include "transports/grpc/serialized_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psbench;
  using namespace psbench::grpc_transport;
  if (size < 1) return 0;
  const std::string_view message(reinterpret_cast<const char*>(data) + 1, size - 1);
  grpc::ByteBuffer buffer = fuzz::Fragmented(message, data[0]);
  grpc::ByteBuffer copy = fuzz::Fragmented(message, data[0]);
  wire::PayloadMessage m, reference;
  const absl::Status parsed = ParseSerializedRequest(&buffer, &m);
  const bool reference_ok =
      grpc::SerializationTraits<wire::PayloadMessage>::Deserialize(&copy, &reference).ok();
  // The PS takes PayloadMessage's own fields only; protobuf keeps any other as unknown.
  const bool foreign_fields =
      reference_ok && !reference.GetReflection()->GetUnknownFields(reference).empty();
  if (parsed.code() == absl::StatusCode::kInvalidArgument) {
    FUZZ_CHECK(!reference_ok || foreign_fields);
    return 0;
  }
  if (parsed.code() == absl::StatusCode::kResourceExhausted) {
    // Counted before parsing: refused for its shape whether it would parse or not.
    FUZZ_CHECK(!reference_ok || !CheckSerializedShape(message.size(), reference.buffers_size()).ok());
    return 0;
  }
  FUZZ_CHECK(parsed.ok() && reference_ok && !foreign_fields);
  FUZZ_CHECK(CheckSerializedShape(message.size(), m.buffers_size()).ok());
  FUZZ_CHECK(m.SerializeAsString() == reference.SerializeAsString());
  std::vector<uint64_t> computed;
  uint64_t bytes = 0;
  const absl::Status verified = VerifyPayloadMessage(m, &computed, &bytes);
  uint64_t sum = 0;
  for (const std::string& b : m.buffers()) sum += b.size();
  FUZZ_CHECK(bytes == sum);
  if (!verified.ok()) {
    FUZZ_CHECK(verified.code() == absl::StatusCode::kDataLoss);
    return 0;
  }
  if (m.checksums_size() > 0) {
    FUZZ_CHECK(std::equal(computed.begin(), computed.end(), m.checksums().begin(), m.checksums().end()));
  } else {
    FUZZ_CHECK(computed.empty());
  }
  const std::string serialized = m.SerializeAsString();
  wire::PayloadMessage again;
  FUZZ_CHECK(again.ParseFromString(serialized));
  FUZZ_CHECK(again.SerializeAsString() == serialized);

  ExchangeBuffers buffers;
  ExchangeBuffersFromMessage(m, &buffers);
  FUZZ_CHECK(buffers.validate == (m.checksums_size() > 0));
  FUZZ_CHECK(static_cast<int>(buffers.sizes.size()) == m.buffers_size());
  for (int i = 0; i < m.buffers_size(); ++i) {
    FUZZ_CHECK(buffers.request[i].size() == m.buffers(i).size());
    FUZZ_CHECK(std::string_view(reinterpret_cast<const char*>(buffers.request[i].data()),
                                buffers.request[i].size()) == m.buffers(i));
    if (!buffers.reply[i].empty()) std::memset(buffers.reply[i].data(), 0xab, buffers.reply[i].size());
  }
  return 0;
}
