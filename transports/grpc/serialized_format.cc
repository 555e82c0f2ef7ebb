#include "transports/grpc/serialized_format.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "payloads/payload.h"
#include "payloads/size.h"
#include "transports/grpc/raw_format.h"

namespace psbench::grpc_transport {
namespace {

using google::protobuf::internal::WireFormatLite;

// The `buffers` elements of a serialized message, counted in its received slices: every
// field is skipped, not copied, so a message of a million empty buffers costs nothing here.
// Only PayloadMessage's own fields are accepted: protobuf would keep any other as an unknown
// field, uncounted, at the same cost per field as a buffer.
absl::StatusOr<uint64_t> CountBuffers(grpc::ByteBuffer* message) {
  grpc::ProtoBufferReader reader(message);
  if (!reader.status().ok()) return absl::InvalidArgumentError("the request could not be read");
  google::protobuf::io::CodedInputStream in(&reader);
  constexpr int kBuffers = wire::PayloadMessage::kBuffersFieldNumber;
  constexpr int kChecksums = wire::PayloadMessage::kChecksumsFieldNumber;
  constexpr uint32_t kBufferTag = WireFormatLite::MakeTag(kBuffers, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
  constexpr uint32_t kPackedChecksumsTag =
      WireFormatLite::MakeTag(kChecksums, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
  constexpr uint32_t kChecksumTag = WireFormatLite::MakeTag(kChecksums, WireFormatLite::WIRETYPE_FIXED64);
  uint64_t buffers = 0;
  while (const uint32_t tag = in.ReadTag()) {
    if (tag == kBufferTag) {
      ++buffers;
    } else if (tag != kPackedChecksumsTag && tag != kChecksumTag) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the request is not a PayloadMessage (field ", WireFormatLite::GetTagFieldNumber(tag),
          ", wire type ", WireFormatLite::GetTagWireType(tag), ")"));
    }
    if (!WireFormatLite::SkipField(&in, tag)) break;
  }
  // ReadTag gives 0 both at the end of the message and on a malformed tag.
  if (!in.ConsumedEntireMessage()) {
    return absl::InvalidArgumentError("the request is not a PayloadMessage (malformed protobuf)");
  }
  return buffers;
}

}  // namespace

namespace {

uint64_t BufferBytes(const std::vector<uint64_t>& sizes, size_t checksums) {
  using google::protobuf::io::CodedOutputStream;
  uint64_t bytes = 0;
  for (uint64_t len : sizes) bytes += 1 + CodedOutputStream::VarintSize64(len) + len;  // tag, length, bytes
  if (checksums > 0) {  // packed fixed64
    const uint64_t len = 8 * checksums;
    bytes += 1 + CodedOutputStream::VarintSize64(len) + len;
  }
  return bytes;
}

}  // namespace

uint64_t SerializedPayloadBytes(const Payload& p, const std::vector<uint64_t>* checksums) {
  return BufferBytes(p.sizes(), checksums != nullptr ? checksums->size() : 0);
}

uint64_t SerializedPayloadBytes(const std::vector<uint64_t>& sizes, bool validate) {
  return BufferBytes(sizes, validate ? sizes.size() : 0);
}

grpc::ByteBuffer SerializePayload(const Payload& p, const std::vector<uint64_t>* checksums) {
  // Register refuses what would not fit a gRPC message (under 2^31 bytes).
  const int total = static_cast<int>(SerializedPayloadBytes(p, checksums));
  if (total == 0) {  // gRPC's writer cannot hand out zero bytes
    grpc::Slice empty;
    return grpc::ByteBuffer(&empty, 1);
  }
  grpc::ByteBuffer out;
  grpc::ProtoBufferWriter writer(&out, grpc::kProtoBufferWriterMaxBufferLength, total);
  {
    google::protobuf::io::CodedOutputStream coded(&writer);
    for (size_t i = 0; i < p.num_buffers(); ++i) {
      const std::span<const std::byte> b = p.buffer(i);
      WireFormatLite::WriteTag(wire::PayloadMessage::kBuffersFieldNumber,
                               WireFormatLite::WIRETYPE_LENGTH_DELIMITED, &coded);
      coded.WriteVarint32(static_cast<uint32_t>(b.size()));
      coded.WriteRaw(b.data(), static_cast<int>(b.size()));
    }
    if (checksums != nullptr && !checksums->empty()) {
      WireFormatLite::WriteTag(wire::PayloadMessage::kChecksumsFieldNumber,
                               WireFormatLite::WIRETYPE_LENGTH_DELIMITED, &coded);
      coded.WriteVarint32(static_cast<uint32_t>(8 * checksums->size()));
      for (uint64_t c : *checksums) coded.WriteLittleEndian64(c);
    }
  }
  return out;
}

absl::Status CheckSerializedShape(uint64_t message_bytes, uint64_t buffers) {
  if (buffers > kMaxBuffers) {
    return absl::ResourceExhaustedError(absl::StrCat(
        buffers, " buffers in one message, over the ", kMaxBuffers, " a PS accepts"));
  }
  // No overflow: a gRPC message is under 2^31 bytes, and buffers at most kMaxBuffers here.
  const uint64_t parsed = 2 * message_bytes + kParsedBytesPerBuffer * buffers;
  if (parsed > kParsedWireMultiple * message_bytes + kParsedAllowance) {
    return absl::ResourceExhaustedError(absl::StrCat(
        buffers, " buffers in a ", message_bytes, "-byte serialized message would take a PS about ",
        absl::StrFormat("%.1f MiB", parsed / 1048576.0), " to parse, over ", kParsedWireMultiple,
        " times the message plus ",
        FormatSize(kParsedAllowance), "; send fewer, larger buffers, or --mode=non-serialized"));
  }
  return absl::OkStatus();
}

absl::Status ParseSerializedRequest(grpc::ByteBuffer* message, wire::PayloadMessage* m) {
  absl::StatusOr<uint64_t> buffers = CountBuffers(message);
  if (!buffers.ok()) return buffers.status();
  if (absl::Status s = CheckSerializedShape(message->Length(), *buffers); !s.ok()) return s;
  grpc::Status parsed = grpc::SerializationTraits<wire::PayloadMessage>::Deserialize(message, m);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the request is not a PayloadMessage (", parsed.error_message(), ")"));
  }
  return absl::OkStatus();
}

absl::Status VerifyPayloadMessage(const wire::PayloadMessage& m, std::vector<uint64_t>* computed,
                                  uint64_t* bytes) {
  *bytes = 0;
  computed->clear();
  std::vector<uint64_t> sizes;
  for (const std::string& b : m.buffers()) {
    *bytes += b.size();
    sizes.push_back(b.size());
  }
  if (m.checksums_size() == 0) return absl::OkStatus();
  if (m.checksums_size() != m.buffers_size()) {
    return absl::DataLossError("checksum count differs from buffer count");
  }
  for (const std::string& b : m.buffers()) {
    computed->push_back(Checksum(std::as_bytes(std::span(b.data(), b.size()))));
  }
  std::vector<uint64_t> sent(m.checksums().begin(), m.checksums().end());
  return CompareChecksums(sent, *computed, sizes);
}

void ExchangeBuffersFromMessage(wire::PayloadMessage& m, ExchangeBuffers* buffers) {
  buffers->validate = m.checksums_size() > 0;
  for (std::string& b : *m.mutable_buffers()) {
    buffers->sizes.push_back(b.size());
    buffers->request.emplace_back(reinterpret_cast<const std::byte*>(b.data()), b.size());
    buffers->reply.emplace_back(reinterpret_cast<std::byte*>(b.data()), b.size());
  }
}

}  // namespace psbench::grpc_transport
