// Payload metadata and acknowledgements as grpc+verbs and grpc+mpi carry them: what a PS
// decodes from a worker it must not trust blindly.
#include "transports/data_meta.h"

#include <gtest/gtest.h>

#include "transports/mpi/mpi_wire.h"

#include <cstring>
#include <limits>

namespace psbench {
namespace {

std::span<const std::byte> Bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

TEST(DataMetaTest, PayloadMetaRoundTrip) {
  std::vector<uint64_t> sizes = {10, 0, 4096}, checksums = {1, 2, 3};
  PayloadMeta meta;
  ASSERT_TRUE(DecodePayloadMeta(Bytes(EncodePayloadMeta(sizes, &checksums)), true, 4106, &meta).ok());
  EXPECT_EQ(meta.sizes, sizes);
  EXPECT_EQ(meta.checksums, checksums);
  ASSERT_TRUE(DecodePayloadMeta(Bytes(EncodePayloadMeta(sizes, nullptr)), false, 4106, &meta).ok());
  EXPECT_EQ(meta.sizes, sizes);
  EXPECT_TRUE(meta.checksums.empty());
}

// Found by tests/fuzz/data_meta_fuzz (UBSan): an empty payload's metadata and an ack without
// checksums were copied with memcpy into an empty vector's null pointer.
TEST(DataMetaTest, EmptyPayloadAndAckDecode) {
  PayloadMeta meta;
  std::vector<uint64_t> none;
  ASSERT_TRUE(DecodePayloadMeta(Bytes(EncodePayloadMeta(none, &none)), true, 0, &meta).ok());
  EXPECT_TRUE(meta.sizes.empty());
  EXPECT_TRUE(meta.checksums.empty());
  AckMeta ack;
  ack.bytes_received = 5;
  auto back = DecodeAckMeta(Bytes(EncodeAckMeta(ack)));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->bytes_received, 5u);
  EXPECT_TRUE(back->checksums.empty());
}

TEST(DataMetaTest, SizesMustAddUpToThePayload) {
  PayloadMeta meta;
  absl::Status s = DecodePayloadMeta(Bytes(EncodePayloadMeta({10, 20}, nullptr)), false, 31, &meta);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("add up to 30 bytes, the payload has 31"), std::string::npos) << s;
  EXPECT_TRUE(meta.sizes.empty());
}

TEST(DataMetaTest, SizesThatWrapAroundAreRejected) {
  // 2^64 - 1 + 11 wraps to 10: a sum check alone would pass it, and a reader would then
  // index far past the payload.
  const uint64_t huge = std::numeric_limits<uint64_t>::max();
  PayloadMeta meta;
  absl::Status s = DecodePayloadMeta(Bytes(EncodePayloadMeta({huge, 11}, nullptr)), false, 10, &meta);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_TRUE(meta.sizes.empty());
}

TEST(DataMetaTest, TruncatedOrPaddedMetadataIsMalformed) {
  std::string good = EncodePayloadMeta({8, 8}, nullptr);
  PayloadMeta meta;
  for (const std::string& bad : {good.substr(0, good.size() - 1), good + "x", std::string("abc")}) {
    EXPECT_EQ(DecodePayloadMeta(Bytes(bad), false, 16, &meta).code(), absl::StatusCode::kDataLoss);
  }
  // Checksums announced (validate) but absent.
  EXPECT_EQ(DecodePayloadMeta(Bytes(good), true, 16, &meta).code(), absl::StatusCode::kDataLoss);
}

TEST(DataMetaTest, AckRoundTripReusesStorage) {
  AckMeta ack{.bytes_received = 123, .ok = false, .code = absl::StatusCode::kResourceExhausted,
              .checksums = {7, 8}, .error = "over the PS's --max-message-size"};
  std::string wire;
  EncodeAckMeta(ack, &wire);
  EXPECT_EQ(wire, EncodeAckMeta(ack));
  AckMeta decoded;
  decoded.error = "stale text from an earlier ack";
  ASSERT_TRUE(DecodeAckMeta(Bytes(wire), &decoded).ok());
  EXPECT_EQ(decoded.bytes_received, 123u);
  EXPECT_FALSE(decoded.ok);
  EXPECT_EQ(decoded.checksums, ack.checksums);
  EXPECT_EQ(decoded.code, absl::StatusCode::kResourceExhausted) << "the PS's own code travels";
  EXPECT_EQ(decoded.error, "over the PS's --max-message-size");
  EXPECT_EQ(DecodeAckMeta(Bytes(wire.substr(0, 10))).status().code(), absl::StatusCode::kDataLoss);
  // A refusal without a code is data loss; a status word that is no code is malformed.
  AckMeta refused;
  refused.ok = false;
  refused.error = "damaged";
  auto lost = DecodeAckMeta(Bytes(EncodeAckMeta(refused)));
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_EQ(lost->code, absl::StatusCode::kDataLoss);
  std::string bad = wire;
  bad[8] = 17;
  EXPECT_EQ(DecodeAckMeta(Bytes(bad)).status().code(), absl::StatusCode::kDataLoss);
}

TEST(DataMetaTest, ExchangeReplyMetaRoundTrip) {
  ExchangeReplyMeta ok{absl::StatusCode::kOk, {16, 0, 4096}, {7, 8, 9}, ""};
  std::string wire;
  EncodeExchangeReplyMeta(ok, &wire);
  EXPECT_LE(wire.size(), MaxExchangeReplyMetaBytes(3));
  ExchangeReplyMeta decoded;
  ASSERT_TRUE(DecodeExchangeReplyMeta(Bytes(wire), &decoded).ok());
  EXPECT_EQ(decoded.code, absl::StatusCode::kOk);
  EXPECT_EQ(decoded.sizes, ok.sizes);
  EXPECT_EQ(decoded.checksums, ok.checksums);

  // An error carries its code and text, cut to the bound receivers size their buffers for.
  ExchangeReplyMeta failed{absl::StatusCode::kFailedPrecondition, {}, {}, std::string(500, 'x')};
  EncodeExchangeReplyMeta(failed, &wire);
  EXPECT_LE(wire.size(), MaxExchangeReplyMetaBytes(0));
  ASSERT_TRUE(DecodeExchangeReplyMeta(Bytes(wire), &decoded).ok());
  EXPECT_EQ(decoded.code, absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(decoded.error, std::string(kMaxExchangeErrorBytes, 'x'));
  EXPECT_TRUE(decoded.sizes.empty() && decoded.checksums.empty());
}

TEST(DataMetaTest, MalformedExchangeReplyMetaIsDataLoss) {
  ExchangeReplyMeta ok{absl::StatusCode::kOk, {16, 32}, {}, ""};
  std::string wire;
  EncodeExchangeReplyMeta(ok, &wire);
  ExchangeReplyMeta decoded;
  EXPECT_EQ(DecodeExchangeReplyMeta(Bytes(wire.substr(0, wire.size() - 1)), &decoded).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeExchangeReplyMeta(Bytes(wire + "x"), &decoded).code(),
            absl::StatusCode::kDataLoss);  // the error text's length is stated
  std::string bad_code = wire;
  bad_code[0] = 99;  // not a status code
  EXPECT_EQ(DecodeExchangeReplyMeta(Bytes(bad_code), &decoded).code(), absl::StatusCode::kDataLoss);
  std::string huge = wire;
  std::memset(huge.data() + 4, 0xff, 4);  // 2^32 - 1 buffers in a few bytes
  EXPECT_EQ(DecodeExchangeReplyMeta(Bytes(huge), &decoded).code(), absl::StatusCode::kDataLoss);
}

TEST(DataMetaTest, BufferChecksumsAcrossArbitraryPieces) {
  std::vector<uint64_t> sizes = {5, 0, 7};
  std::string data = "abcdefghijkl";
  BufferChecksums sums;
  sums.Reset(&sizes);
  sums.Update(Bytes(data.substr(0, 3)));
  sums.Update(Bytes(data.substr(3, 4)));
  sums.Update(Bytes(data.substr(7)));
  ASSERT_EQ(sums.checksums().size(), 3u);
  EXPECT_EQ(sums.checksums()[0], Checksum(Bytes(data.substr(0, 5))));
  EXPECT_EQ(sums.checksums()[1], Checksum({}));
  EXPECT_EQ(sums.checksums()[2], Checksum(Bytes(data.substr(5))));
}

// grpc+mpi: metadata too long for the PS's posted header receive leaves the header and
// follows on the data tag; the PS reads such a header alone, and no other shape of it.
TEST(DataMetaTest, MpiMetadataThatDoesNotFitFollowsTheHeader) {
  using namespace mpi;
  std::vector<uint64_t> sizes(6000, 4), checksums(6000, 9);
  RequestHeader h;
  h.kind = kEcho;
  h.flags = kValidate;
  h.data_tag = kFirstDataTag;
  h.total_bytes = 24000;
  std::string header(reinterpret_cast<const char*>(&h), sizeof h);
  const std::string encoded = EncodePayloadMeta(sizes, &checksums);
  header += encoded;
  ASSERT_GT(header.size(), kMaxControlBytes);
  std::string meta;
  ASSERT_TRUE(MoveMetaOut(&header, &meta));
  EXPECT_EQ(meta, encoded);
  RequestHeader parsed;
  ASSERT_EQ(ParseRequestHeader(Bytes(header), 1, &parsed), nullptr);
  EXPECT_EQ(parsed.flags, kValidate | kMetaFollows);
  EXPECT_EQ(parsed.meta_bytes, encoded.size());
  PayloadMeta decoded;
  ASSERT_TRUE(DecodePayloadMeta(Bytes(meta), true, 24000, &decoded).ok());
  EXPECT_EQ(decoded.sizes, sizes);

  auto with = [&](auto change) {
    RequestHeader bad = parsed;
    std::string extra;
    change(bad, extra);
    return std::string(reinterpret_cast<const char*>(&bad), sizeof bad) + extra;
  };
  const std::string malformed[] = {
      with([](RequestHeader& b, std::string&) {
        b.flags |= kEager;  // an eager request of no bytes passes the eager checks
        b.total_bytes = 0;
      }),
      with([](RequestHeader&, std::string& e) { e = "x"; }),
      with([](RequestHeader& b, std::string&) { b.meta_bytes = 0; }),
      with([](RequestHeader& b, std::string&) { b.meta_bytes = kMaxMetaFollowsBytes + 1; }),
  };
  for (const std::string& m : malformed) {
    EXPECT_STREQ(ParseRequestHeader(Bytes(m), 1, &parsed), "a malformed request with its metadata following");
  }
}

}  // namespace
}  // namespace psbench
