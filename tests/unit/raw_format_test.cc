#include "transports/grpc/raw_format.h"

#include <gtest/gtest.h>

#include "payloads/payload.h"

namespace psbench::grpc_transport {
namespace {

// A byte buffer cut into slices at awkward places, as the network delivers it.
grpc::ByteBuffer Fragmented(const std::string& bytes, size_t piece) {
  std::vector<grpc::Slice> slices;
  for (size_t i = 0; i < bytes.size(); i += piece) {
    slices.emplace_back(bytes.substr(i, piece));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Message(const Payload& p, bool validate) {
  std::string m = EncodePayloadHeader(p.sizes(), validate ? &p.checksums() : nullptr);
  for (size_t i = 0; i < p.num_buffers(); ++i) {
    auto b = p.buffer(i);
    m.append(reinterpret_cast<const char*>(b.data()), b.size());
  }
  return m;
}

TEST(RawFormatTest, HeaderAndBuffersSurviveAnyFragmentation) {
  std::vector<uint64_t> sizes = {10, 10240, 3, 70000};
  Payload p(sizes, 42);
  std::string m = Message(p, /*validate=*/true);
  for (size_t piece : {1, 7, 16, 4096, 1 << 20}) {
    grpc::ByteBuffer buffer = Fragmented(m, piece);
    SliceReader reader(buffer);
    auto header = ReadPayloadHeader(reader);
    ASSERT_TRUE(header.ok()) << header.status();
    EXPECT_EQ(header->sizes, sizes);
    EXPECT_EQ(header->checksums, p.checksums());
    std::vector<uint64_t> got;
    ASSERT_TRUE(ReadBuffers(reader, *header, &got).ok());
    EXPECT_EQ(got, p.checksums()) << "piece " << piece;
    EXPECT_TRUE(CompareChecksums(header->checksums, got, sizes).ok());
  }
}

TEST(RawFormatTest, MissingOrExtraBytesAreDataLoss) {
  Payload p(std::vector<uint64_t>{100, 200}, 1);
  std::string m = Message(p, false);
  for (std::string bad : {m.substr(0, m.size() - 1), m + "x"}) {
    grpc::ByteBuffer buffer = Fragmented(bad, 64);
    SliceReader reader(buffer);
    auto header = ReadPayloadHeader(reader);
    ASSERT_TRUE(header.ok());
    absl::Status s = ReadBuffers(reader, *header, nullptr);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  }
}

TEST(RawFormatTest, GarbageHeaderIsRejected) {
  for (std::string bad : {std::string(""), std::string(8, 'x'), std::string(64, '\xff')}) {
    grpc::ByteBuffer buffer = Fragmented(bad.empty() ? std::string(1, '\0') : bad, 5);
    SliceReader reader(buffer);
    EXPECT_FALSE(ReadPayloadHeader(reader).ok());
  }
}

// Found writing tests/fuzz/raw_request_fuzz: sizes that wrap around 2^64 to the bytes that
// follow passed ReadBuffers, and the PS's exchange path then laid out (LayOutBuffers, wrapping
// too) and handed its handler a buffer of nearly 2^64 bytes.
TEST(RawFormatTest, SizesThatWrapAroundAreRejected) {
  std::string m = EncodePayloadHeader({~uint64_t{0} - 4095, 4096}, nullptr);
  for (const std::string& bad : {m, m + std::string(4096, 'x')}) {
    grpc::ByteBuffer buffer = Fragmented(bad, 7);
    SliceReader reader(buffer);
    auto header = ReadPayloadHeader(reader);
    ASSERT_FALSE(header.ok());
    EXPECT_EQ(header.status().code(), absl::StatusCode::kDataLoss);
  }
  grpc::ByteBuffer buffer = Fragmented(m, 16);
  SliceReader reader(buffer);
  auto pool = BlockPool::Create();
  ExchangeBuffers buffers;
  EXPECT_EQ(DecodeRawExchange(reader, *pool, &buffers).status().code(), absl::StatusCode::kDataLoss);
}

TEST(RawFormatTest, DecodeRawRequestChecksAndExchangeGathersFragments) {
  Payload p(std::vector<uint64_t>{10, 0, 300}, 3);
  std::string m = Message(p, /*validate=*/true);
  for (size_t piece : {1, 5, 4096}) {
    grpc::ByteBuffer buffer = Fragmented(m, piece);
    SliceReader reader(buffer);
    std::vector<uint64_t> checksums;
    auto header = DecodeRawRequest(reader, &checksums);
    ASSERT_TRUE(header.ok()) << header.status();
    EXPECT_EQ(checksums, p.checksums());
    grpc::ByteBuffer again = Fragmented(m, piece);
    SliceReader exchange_reader(again);
    auto pool = BlockPool::Create();
    ExchangeBuffers buffers;
    auto bytes = DecodeRawExchange(exchange_reader, *pool, &buffers);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_EQ(*bytes, 310u);
    ASSERT_EQ(buffers.request.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      ASSERT_EQ(buffers.request[i].size(), p.buffer(i).size());
      EXPECT_TRUE(std::equal(buffers.request[i].begin(), buffers.request[i].end(), p.buffer(i).begin()));
    }
  }
  m[m.size() - 1] ^= 1;  // the last buffer's checksum no longer matches
  grpc::ByteBuffer buffer = Fragmented(m, 64);
  SliceReader reader(buffer);
  std::vector<uint64_t> checksums;
  EXPECT_EQ(DecodeRawRequest(reader, &checksums).status().code(), absl::StatusCode::kDataLoss);
}

TEST(RawFormatTest, ChecksumMismatchNamesTheBuffer) {
  absl::Status s = CompareChecksums({1, 2, 3}, {1, 9, 3}, {10, 1048576, 10});
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("buffer 2 of 3 (1MiB)"), absl::string_view::npos) << s;
}

std::string AckBytes(uint64_t bytes_received, const std::vector<uint64_t>& checksums) {
  grpc::Slice ack = EncodeAck(bytes_received, checksums);
  return std::string(reinterpret_cast<const char*>(ack.begin()), ack.size());
}

TEST(RawFormatTest, AckRoundTrip) {
  std::string ack = AckBytes(12345, {7, 8, 9});
  auto decoded = DecodeAck(Fragmented(ack, 3));
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->bytes_received, 12345u);
  EXPECT_EQ(decoded->checksums, (std::vector<uint64_t>{7, 8, 9}));
  EXPECT_FALSE(DecodeAck(Fragmented(ack.substr(0, 20), 3)).ok());
}

// An ack in one slice (as gRPC nearly always hands it over) is read in place; in one slice or
// fragmented, every cut, an extra byte and a wrong magic or count are refused alike.
TEST(RawFormatTest, AckInOneSliceOrFragmentedIsCheckedAlike) {
  for (const std::vector<uint64_t>& checksums : {std::vector<uint64_t>{}, std::vector<uint64_t>{7, 8, 9}}) {
    const std::string ack = AckBytes(4096, checksums);
    for (size_t piece : {ack.size(), size_t{5}}) {
      SCOPED_TRACE(piece);
      auto whole = DecodeAck(Fragmented(ack, piece));
      ASSERT_TRUE(whole.ok()) << whole.status();
      EXPECT_EQ(whole->bytes_received, 4096u);
      EXPECT_EQ(whole->checksums, checksums);
      for (size_t cut = 1; cut < ack.size(); ++cut) {
        EXPECT_EQ(DecodeAck(Fragmented(ack.substr(0, cut), piece)).status().code(), absl::StatusCode::kDataLoss)
            << cut;
      }
      EXPECT_FALSE(DecodeAck(Fragmented(ack + '\0', piece == ack.size() ? piece + 1 : piece)).ok());
      std::string bad_magic = ack;
      bad_magic[0] ^= 1;
      EXPECT_FALSE(DecodeAck(Fragmented(bad_magic, piece)).ok());
      std::string more = ack;
      more[8] += 1;  // the count claims one more checksum than the ack holds
      EXPECT_FALSE(DecodeAck(Fragmented(more, piece)).ok());
    }
  }
}

}  // namespace
}  // namespace psbench::grpc_transport
