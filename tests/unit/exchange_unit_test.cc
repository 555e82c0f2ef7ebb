// The kExchange plumbing every transport shares: buffer layout, pooled memory, copying a
// reply that arrives in pieces, and the hub through which a handler's late answers reach (or,
// once the server closed it, no longer reach) the transport.
#include "transports/exchange.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>

namespace psbench {
namespace {

TEST(ExchangeTest, BuffersAreLaidOutLikeAPayload) {
  std::vector<uint64_t> sizes = {3, 100, 4096, 5, 10000};
  std::vector<uint64_t> offsets;
  uint64_t extent = LayOutBuffers(sizes, &offsets);
  Payload p(sizes, 1);
  ASSERT_EQ(offsets.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(offsets[i], static_cast<uint64_t>(p.buffer(i).data() - p.arena().data())) << i;
  }
  EXPECT_EQ(extent, offsets.back() + sizes.back());
}

TEST(ExchangeTest, PoolReusesBlocksOfTheSameSize) {
  auto pool = BlockPool::Create();
  std::byte* first;
  {
    auto block = pool->Take(100000);
    ASSERT_TRUE(block.ok());
    EXPECT_GE((*block)->size(), 100000u);
    first = (*block)->data();
  }
  auto again = pool->Take(100000);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->data(), first);
  auto tiny = pool->Take(10);  // far smaller: not served by a cached large block
  ASSERT_TRUE(tiny.ok());
  EXPECT_NE((*tiny)->data(), first);
  // A block outlives the pool's last other owner.
  std::shared_ptr<BlockPool::Block> kept = std::move(*tiny);
  pool.reset();
  std::memset(kept->data(), 1, 10);
}

TEST(ExchangeTest, ScatterWriterCrossesBufferBoundaries) {
  std::string a(5, '.'), b, c(7, '.');
  std::vector<std::span<std::byte>> out = {
      {reinterpret_cast<std::byte*>(a.data()), a.size()}, {}, {reinterpret_cast<std::byte*>(c.data()), c.size()}};
  ScatterWriter w;
  w.Reset(out);
  std::string data = "abcdefghijkl";
  auto bytes = [&](size_t from, size_t n) {
    return std::span<const std::byte>(reinterpret_cast<const std::byte*>(data.data()) + from, n);
  };
  EXPECT_TRUE(w.Write(bytes(0, 3)));
  EXPECT_TRUE(w.Write(bytes(3, 6)));
  EXPECT_TRUE(w.Write(bytes(9, 3)));
  EXPECT_EQ(a + c, data);
  EXPECT_FALSE(w.Write(bytes(0, 1)));  // past the end: refused
  EXPECT_EQ(w.written(), 12u);
}

TEST(ExchangeTest, PayloadChecksAreInvalidArgumentAndDataLoss) {
  Payload a(std::vector<uint64_t>{4, 8}, 1), b(std::vector<uint64_t>{4, 8}, 2),
      c(std::vector<uint64_t>{8, 4}, 3);
  EXPECT_TRUE(CheckExchangePayloads(&a, &b).ok());
  EXPECT_EQ(CheckExchangePayloads(&a, &c).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckExchangePayloads(nullptr, &b).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckReplySizes({4, 8}, {4, 8}).code(), absl::StatusCode::kOk);
  EXPECT_EQ(CheckReplySizes({4}, {4, 8}).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(CheckReplySizes({4, 9}, {4, 8}).code(), absl::StatusCode::kDataLoss);
  std::vector<uint64_t> fresh;
  a.mutable_buffer(0)[0] ^= std::byte{1};
  a.ComputeChecksums(&fresh);
  EXPECT_NE(fresh[0], a.checksum(0));  // of the bytes now, not at construction
  EXPECT_EQ(fresh[1], a.checksum(1));
}

// Answers later from another thread; remembers the done of the last exchange.
class LaterHandler : public ExchangeHandler {
 public:
  void OnExchange(std::span<const std::span<const std::byte>>, std::span<const std::span<std::byte>> reply,
                  absl::AnyInvocable<void(absl::Status) &&> done) override {
    std::memset(reply[0].data(), 7, reply[0].size());
    done_ = std::move(done);
  }
  absl::AnyInvocable<void(absl::Status) &&> done_;
};

std::shared_ptr<ExchangeBuffers> OneBuffer(bool validate) {
  auto b = std::make_shared<ExchangeBuffers>();
  auto memory = std::make_shared<std::string>(64, '\0');
  b->keep = memory;
  b->sizes = {64};
  b->request.emplace_back(reinterpret_cast<const std::byte*>(memory->data()), 64);
  b->reply.emplace_back(reinterpret_cast<std::byte*>(memory->data()), 64);
  b->validate = validate;
  return b;
}

TEST(ExchangeTest, HubDeliversLateAnswersOnceAndChecksumsThem) {
  LaterHandler handler;
  auto hub = ExchangeHub::Create(&handler);
  auto buffers = OneBuffer(/*validate=*/true);
  int delivered = 0;
  absl::Status got;
  ASSERT_TRUE(hub->Run(buffers, [&](const absl::Status& s, bool answered) {
    ++delivered;
    got = s;
    EXPECT_TRUE(answered);
  }));
  EXPECT_EQ(hub->held(), 1u);
  std::thread([&] { std::move(handler.done_)(absl::OkStatus()); }).join();
  EXPECT_EQ(delivered, 1);
  EXPECT_TRUE(got.ok());
  EXPECT_EQ(hub->held(), 0u);
  ASSERT_EQ(buffers->reply_checksums.size(), 1u);
  EXPECT_EQ(buffers->reply_checksums[0], Checksum(buffers->reply[0]));
}

TEST(ExchangeTest, ClosedHubCancelsHeldExchangesAndIgnoresLaterAnswers) {
  LaterHandler handler;
  auto hub = ExchangeHub::Create(&handler);
  auto buffers = OneBuffer(false);
  std::vector<std::pair<absl::StatusCode, bool>> deliveries;
  ASSERT_TRUE(hub->Run(buffers, [&](const absl::Status& s, bool answered) {
    deliveries.push_back({s.code(), answered});
  }));
  buffers.reset();  // the handler's done still holds the memory
  hub->Close(ExchangeCancelledError());
  ASSERT_EQ(deliveries.size(), 1u);
  EXPECT_EQ(deliveries[0].first, absl::StatusCode::kUnavailable);
  EXPECT_FALSE(deliveries[0].second);
  EXPECT_FALSE(hub->Run(OneBuffer(false), [&](const absl::Status&, bool) { ADD_FAILURE(); }));
  hub.reset();
  std::move(handler.done_)(absl::OkStatus());  // after the server let go: does nothing
  EXPECT_EQ(deliveries.size(), 1u);
}

TEST(ExchangeTest, DroppedDoneAnswersInternal) {
  LaterHandler handler;
  auto hub = ExchangeHub::Create(&handler);
  absl::Status got;
  ASSERT_TRUE(hub->Run(OneBuffer(false), [&](const absl::Status& s, bool) { got = s; }));
  handler.done_ = nullptr;  // forgotten
  EXPECT_EQ(got.code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace psbench
