// Payload metadata and acknowledgements (data_meta.h), what the verbs and MPI data planes
// carry beside the payload. Byte 0 picks the decoder of the rest:
//   0: PayloadMeta (the PS: byte 1 bit 0 = validate, then 8 bytes of the payload's total)
//   1: AckMeta (the worker)        2: ExchangeReplyMeta (the worker)
//   3: BufferChecksums over a payload arriving in pieces (the PS under --validate)
// What decodes re-encodes to the same bytes (up to fields the decoder ignores) and decodes
// again to the same values; PayloadMeta's sizes add up to the total, never by wrapping
// around; per-buffer checksums do not depend on how the bytes arrive.
#include <cstring>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "payloads/payload.h"
#include "tests/fuzz/fuzz_check.h"
#include "transports/data_meta.h"

namespace {

using namespace psbench;

std::span<const std::byte> Bytes(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

void PayloadMetaCase(std::span<const std::byte> in) {
  if (in.size() < 9) return;
  const bool validate = static_cast<uint8_t>(in[0]) & 1;
  uint64_t total;
  std::memcpy(&total, in.data() + 1, 8);
  in = in.subspan(9);
  PayloadMeta meta;
  meta.sizes = {1, 2, 3};  // storage is reused: stale values must not survive
  if (!DecodePayloadMeta(in, validate, total, &meta).ok()) {
    FUZZ_CHECK(meta.sizes.empty());
    return;
  }
  uint64_t sum = 0;
  for (uint64_t s : meta.sizes) {
    FUZZ_CHECK(s <= total - sum);
    sum += s;
  }
  FUZZ_CHECK(sum == total);
  FUZZ_CHECK(meta.checksums.size() == (validate ? meta.sizes.size() : 0));
  std::string encoded = EncodePayloadMeta(meta.sizes, validate ? &meta.checksums : nullptr);
  FUZZ_CHECK(encoded.size() == in.size());
  // Bytes 4..8 (a zero word) are not checked by the decoder.
  FUZZ_CHECK(std::memcmp(encoded.data(), in.data(), 4) == 0);
  FUZZ_CHECK(std::memcmp(encoded.data() + 8, in.data() + 8, in.size() - 8) == 0);
}

void Ack(std::span<const std::byte> in) {
  AckMeta ack;
  ack.checksums = {7, 8};
  ack.error = "stale";
  if (!DecodeAckMeta(in, &ack).ok()) return;
  const std::string encoded = EncodeAckMeta(ack);
  FUZZ_CHECK(encoded.size() == in.size());
  const absl::StatusOr<AckMeta> again = DecodeAckMeta(Bytes(encoded));
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->bytes_received == ack.bytes_received && again->ok == ack.ok &&
             again->code == ack.code && again->checksums == ack.checksums && again->error == ack.error);
  FUZZ_CHECK(ack.ok == (ack.code == absl::StatusCode::kOk));
  FUZZ_CHECK(EncodeAckMeta(*again) == encoded);
}

void ExchangeReply(std::span<const std::byte> in) {
  ExchangeReplyMeta reply;
  reply.sizes = {1};
  reply.checksums = {2};
  reply.error = "stale";
  if (!DecodeExchangeReplyMeta(in, &reply).ok()) return;
  FUZZ_CHECK(reply.checksums.empty() || reply.checksums.size() == reply.sizes.size());
  std::string encoded;
  EncodeExchangeReplyMeta(reply, &encoded);
  ExchangeReplyMeta again;
  FUZZ_CHECK(DecodeExchangeReplyMeta(Bytes(encoded), &again).ok());
  FUZZ_CHECK(again.code == reply.code && again.sizes == reply.sizes &&
             again.checksums == reply.checksums &&
             again.error == reply.error.substr(0, kMaxExchangeErrorBytes));
  FUZZ_CHECK(encoded.size() <= MaxExchangeReplyMetaBytes(reply.sizes.size()));
}

// Byte 0: buffers (up to 15); then one byte per size; then piece lengths cycle over the
// next bytes; the rest is the payload, cut to the sum of the sizes.
void Checksums(std::span<const std::byte> in) {
  if (in.empty()) return;
  const size_t n = static_cast<uint8_t>(in[0]) % 16;
  if (in.size() < 1 + n + 1) return;
  std::vector<uint64_t> sizes;
  for (size_t i = 0; i < n; ++i) sizes.push_back(static_cast<uint8_t>(in[1 + i]));
  const size_t cut = static_cast<uint8_t>(in[1 + n]) % 32 + 1;
  std::span<const std::byte> payload = in.subspan(2 + n);
  const uint64_t total = std::accumulate(sizes.begin(), sizes.end(), uint64_t{0});
  if (payload.size() < total) return;
  payload = payload.first(total);
  BufferChecksums sums;
  sums.Reset(&sizes);
  for (size_t at = 0; at < payload.size(); at += cut) {
    sums.Update(payload.subspan(at, std::min(cut, payload.size() - at)));
  }
  FUZZ_CHECK(sums.checksums().size() == sizes.size());
  uint64_t at = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    FUZZ_CHECK(sums.checksums()[i] == Checksum(payload.subspan(at, sizes[i])));
    at += sizes[i];
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      PayloadMetaCase(in);
      break;
    case 1:
      Ack(in);
      break;
    case 2:
      ExchangeReply(in);
      break;
    case 3:
      Checksums(in);
      break;
  }
  return 0;
}
