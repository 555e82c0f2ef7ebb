#include "payloads/payload.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "payloads/spec.h"

namespace psbench {
namespace {

using ::testing::ElementsAre;

std::span<const std::byte> Bytes(std::string_view text) {
  return std::as_bytes(std::span<const char>(text.data(), text.size()));
}

bool SameBytes(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

// ---- checksums -------------------------------------------------------------------------------

TEST(ChecksumTest, KnownXxh3Values) {
  // Reference values of XXH3_64bits with seed 0.
  EXPECT_EQ(Checksum({}), 0x2D06800538D394C2ULL);
  EXPECT_NE(Checksum(Bytes("a")), Checksum(Bytes("b")));
  EXPECT_EQ(Checksum(Bytes("psbench")), Checksum(Bytes("psbench")));
}

TEST(ChecksumTest, StreamMatchesOneShotOverFragments) {
  const std::vector<uint64_t> sizes = {0,   1,    15,   16,   17,    128,   129,    240,
                                       241, 1023, 1024, 4096, 10000, 65537, 1 << 20};
  Payload payload(sizes, 42);
  ChecksumStream stream;
  for (size_t i = 0; i < payload.num_buffers(); ++i) {
    const std::span<const std::byte> buf = payload.buffer(i);
    EXPECT_EQ(Checksum(buf), payload.checksum(i)) << sizes[i];
    // Fragment lengths 1, 7, 64, 1000, 4096 and an irregular pattern.
    for (size_t step : {size_t{1}, size_t{7}, size_t{64}, size_t{1000}, size_t{4096}, size_t{0}}) {
      if (step == 1 && buf.size() > 70000) continue;  // keep the test fast
      stream.Reset();
      size_t offset = 0, k = 0;
      while (offset < buf.size()) {
        const size_t len = step != 0 ? step : 1 + (k++ * 37) % 300;
        const size_t n = std::min(len, buf.size() - offset);
        stream.Update(buf.subspan(offset, n));
        offset += n;
      }
      EXPECT_EQ(stream.Digest(), payload.checksum(i)) << "size " << sizes[i] << " step " << step;
    }
  }
}

TEST(ChecksumTest, StreamDigestIsRepeatableAndResets) {
  ChecksumStream stream;
  EXPECT_EQ(stream.Digest(), Checksum({}));
  stream.Update(Bytes("hello "));
  stream.Update({});
  stream.Update(Bytes("world"));
  EXPECT_EQ(stream.Digest(), Checksum(Bytes("hello world")));
  EXPECT_EQ(stream.Digest(), Checksum(Bytes("hello world")));  // Digest does not consume
  stream.Update(Bytes("!"));
  EXPECT_EQ(stream.Digest(), Checksum(Bytes("hello world!")));
  stream.Reset();
  EXPECT_EQ(stream.Digest(), Checksum({}));
  stream.Update(Bytes("abc"));
  EXPECT_EQ(stream.Digest(), Checksum(Bytes("abc")));
}

// ---- payload ---------------------------------------------------------------------------------

TEST(PayloadTest, LayoutAndAlignment) {
  const std::vector<uint64_t> sizes = {10, 10240, 1048576, 10, 4095, 4096, 1, 100, 5000, 63, 64};
  Payload payload(sizes, kDefaultSeed);
  ASSERT_EQ(payload.num_buffers(), sizes.size());
  EXPECT_EQ(payload.sizes(), sizes);
  EXPECT_EQ(payload.total_bytes(), std::accumulate(sizes.begin(), sizes.end(), uint64_t{0}));
  ASSERT_EQ(payload.iov().size(), sizes.size());
  ASSERT_EQ(payload.checksums().size(), sizes.size());
  const auto arena = payload.arena();
  const auto arena_begin = reinterpret_cast<uintptr_t>(arena.data());
  const auto arena_end = arena_begin + arena.size();
  EXPECT_EQ(arena_begin % 4096, 0u);
  uintptr_t previous_end = arena_begin;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const iovec& v = payload.iov()[i];
    const auto addr = reinterpret_cast<uintptr_t>(v.iov_base);
    EXPECT_EQ(v.iov_len, sizes[i]);
    EXPECT_EQ(addr % 64, 0u) << i;
    if (sizes[i] >= 4096) {
      EXPECT_EQ(addr % 4096, 0u) << i;
    }
    // In order, without overlap, inside the arena.
    EXPECT_GE(addr, previous_end) << i;
    EXPECT_LE(addr + sizes[i], arena_end) << i;
    previous_end = addr + sizes[i];
    EXPECT_EQ(payload.buffer(i).data(), static_cast<const std::byte*>(v.iov_base));
    EXPECT_EQ(payload.buffer(i).size(), sizes[i]);
    EXPECT_EQ(payload.checksum(i), Checksum(payload.buffer(i)));
  }
  EXPECT_EQ(PayloadArenaBytes(sizes), arena.size()) << "what a budget counts is what is allocated";
}

// A payload takes at least a page, and from 2 MiB up whole huge pages.
TEST(PayloadTest, ArenaBytesAreWhatIsAllocated) {
  for (const std::vector<uint64_t>& sizes : std::vector<std::vector<uint64_t>>{
           {1}, {64, 1}, {4096}, {4097}, {2 << 20}, {(2 << 20) + 1}, {1, 4096, 3}}) {
    Payload payload(sizes, kDefaultSeed);
    EXPECT_EQ(PayloadArenaBytes(sizes), payload.arena().size()) << sizes[0];
  }
  EXPECT_EQ(PayloadArenaBytes(std::vector<uint64_t>{1}), 4096u);
  EXPECT_EQ(PayloadArenaBytes(std::vector<uint64_t>{(2 << 20) + 1}), 4u << 20);
}

TEST(PayloadTest, SameSeedSameBytes) {
  const std::vector<uint64_t> sizes = {10, 10240, 1048576, 3};
  Payload a(sizes, 7), b(sizes, 7);
  EXPECT_EQ(a.checksums(), b.checksums());
  for (size_t i = 0; i < sizes.size(); ++i) EXPECT_TRUE(SameBytes(a.buffer(i), b.buffer(i))) << i;
}

TEST(PayloadTest, DifferentSeedsDifferentBytes) {
  const std::vector<uint64_t> sizes = {8, 100, 10240, 1048576};
  Payload a(sizes, 1), b(sizes, 2);
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_FALSE(SameBytes(a.buffer(i), b.buffer(i))) << i;
    EXPECT_NE(a.checksum(i), b.checksum(i)) << i;
  }
}

TEST(PayloadTest, BuffersOfOnePayloadDiffer) {
  // Same-sized buffers must not be copies of each other (a transport that sent buffer 0 twice
  // would otherwise pass validation).
  const std::vector<uint64_t> sizes(8, 4096);
  Payload payload(sizes, kDefaultSeed);
  std::set<uint64_t> checksums(payload.checksums().begin(), payload.checksums().end());
  EXPECT_EQ(checksums.size(), sizes.size());
}

TEST(PayloadTest, BytesLookRandom) {
  Payload payload(std::vector<uint64_t>{1 << 20}, kDefaultSeed);
  std::vector<size_t> histogram(256);
  for (std::byte b : payload.buffer(0)) ++histogram[static_cast<uint8_t>(b)];
  const double expected = (1 << 20) / 256.0;
  for (size_t count : histogram) EXPECT_NEAR(count, expected, expected * 0.2);
}

TEST(PayloadTest, MutableBufferChangesChecksum) {
  Payload payload(std::vector<uint64_t>{100, 200}, 3);
  const uint64_t before = payload.checksum(1);
  payload.mutable_buffer(1)[17] ^= std::byte{1};
  EXPECT_NE(Checksum(payload.buffer(1)), before);
  EXPECT_EQ(payload.checksum(1), before);  // the stored checksum is the original's
}

// A view is some of a payload's buffers, in its own order, over the same memory.
TEST(PayloadTest, ViewSharesTheBuffersItNames) {
  const std::vector<uint64_t> sizes = {8, 4096, 0, 100};
  Payload base(sizes, 3);
  const std::vector<size_t> pick = {3, 1};
  auto view = Payload::View(base, pick);
  ASSERT_EQ(view->num_buffers(), 2u);
  EXPECT_EQ(view->sizes(), (std::vector<uint64_t>{100, 4096}));
  EXPECT_EQ(view->total_bytes(), 4196u);
  EXPECT_EQ(view->buffer(0).data(), base.buffer(3).data());
  EXPECT_EQ(view->buffer(1).data(), base.buffer(1).data());
  EXPECT_EQ(view->checksum(0), base.checksum(3));
  EXPECT_EQ(view->arena().data(), base.arena().data());
  EXPECT_EQ(view->arena().size(), base.arena().size());
  view->mutable_buffer(1)[7] = std::byte{0x42};
  EXPECT_EQ(base.buffer(1)[7], std::byte{0x42});
  view.reset();  // frees nothing of base's
  EXPECT_EQ(base.buffer(1)[7], std::byte{0x42});
}

TEST(PayloadTest, NoBuffers) {
  Payload payload(std::span<const uint64_t>{}, 1);
  EXPECT_EQ(payload.num_buffers(), 0u);
  EXPECT_EQ(payload.total_bytes(), 0u);
  EXPECT_TRUE(payload.iov().empty());
  EXPECT_TRUE(payload.checksums().empty());
  EXPECT_EQ(payload.arena().size(), 0u);
}

TEST(PayloadTest, ZeroSizedBuffers) {
  Payload only_empty(std::vector<uint64_t>{0, 0}, 1);
  EXPECT_EQ(only_empty.num_buffers(), 2u);
  EXPECT_EQ(only_empty.checksum(0), Checksum({}));
  EXPECT_EQ(only_empty.buffer(1).size(), 0u);

  Payload mixed(std::vector<uint64_t>{0, 10, 0, 5000, 0}, 1);
  EXPECT_EQ(mixed.total_bytes(), 5010u);
  EXPECT_EQ(mixed.checksum(2), Checksum({}));
  EXPECT_EQ(mixed.checksum(3), Checksum(mixed.buffer(3)));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(mixed.buffer(3).data()) % 4096, 0u);
}

TEST(PayloadTest, FromPlan) {
  PayloadSpec spec;
  spec.scheme = Scheme::kSkew;
  const PayloadPlan plan = ResolvePlan(spec).value();
  const std::vector<uint64_t> sizes = plan.Sizes(0);
  Payload payload(sizes, spec.seed);
  EXPECT_EQ(payload.total_bytes(), plan.Bytes(0));
  EXPECT_EQ(payload.num_buffers(), 10u);
}

TEST(PayloadTest, FillsQuickly) {
  // Not a benchmark: catches a byte-at-a-time or otherwise pathological fill (1 GiB takes about
  // 0.3 s on a small VM). Generous bound for slow, shared CI machines and debug builds.
  const auto start = std::chrono::steady_clock::now();
  Payload payload(std::vector<uint64_t>(16, 16 << 20), 5);  // 256 MiB in 16 MiB buffers
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(payload.total_bytes(), uint64_t{256} << 20);
  EXPECT_LT(seconds, 5.0);
  RecordProperty("fill_and_checksum_256MiB_ms", static_cast<int>(seconds * 1000));
}

}  // namespace
}  // namespace psbench
