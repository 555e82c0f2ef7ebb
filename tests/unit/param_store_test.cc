// The PS's parameter store, driven directly through its ExchangeHandler interface: init,
// synchronous steps held until the last worker, async steps, and requests it must refuse.
#include "ps/param_store.h"

#include <cstring>
#include <optional>
#include <vector>

#include "gtest/gtest.h"

namespace psbench {
namespace {

// One worker's exchange: a header and float tensors; the reply is separate memory.
struct Exchange {
  ExchangeHeader header;
  std::vector<std::vector<float>> tensors;
  std::vector<std::vector<float>> reply;
  std::optional<absl::Status> result;

  void Send(ParamStore& store) {
    header.num_tensors = static_cast<uint32_t>(tensors.size());
    std::vector<std::span<const std::byte>> request = {
        {reinterpret_cast<const std::byte*>(&header), sizeof(header)}};
    reply.assign(tensors.size(), {});
    reply_header_.fill(std::byte{0});
    std::vector<std::span<std::byte>> out = {{reply_header_.data(), reply_header_.size()}};
    for (size_t i = 0; i < tensors.size(); ++i) {
      request.push_back(std::as_bytes(std::span<const float>(tensors[i])));
      reply[i].assign(tensors[i].size(), -1.f);
      out.push_back(std::as_writable_bytes(std::span<float>(reply[i])));
    }
    store.OnExchange(request, out, [this](absl::Status s) { result = s; });
  }

 private:
  std::array<std::byte, sizeof(ExchangeHeader)> reply_header_;
};

Exchange Make(ExchangeHeader::Kind kind, uint32_t worker, uint32_t workers, uint64_t step,
              std::vector<std::vector<float>> tensors, bool sync = true) {
  Exchange e;
  e.header.kind = kind;
  e.header.worker = worker;
  e.header.num_workers = workers;
  e.header.step = step;
  e.header.flags = sync ? uint32_t{ExchangeHeader::kSync} : 0u;
  e.header.learning_rate = 0.5f;
  e.header.momentum = 0.f;
  e.header.run_id = 42;
  e.tensors = std::move(tensors);
  return e;
}

TEST(ParamStoreTest, SyncStepWaitsForEveryWorkerThenAppliesTheMean) {
  ParamStore store;
  Exchange init = Make(ExchangeHeader::kInit, 0, 2, 0, {{1.f, 2.f}, {3.f}});
  init.Send(store);
  ASSERT_TRUE(init.result && init.result->ok()) << *init.result;
  EXPECT_EQ(init.reply, init.tensors);

  Exchange a = Make(ExchangeHeader::kStep, 0, 2, 0, {{2.f, 0.f}, {4.f}});
  Exchange b = Make(ExchangeHeader::kStep, 1, 2, 0, {{0.f, 2.f}, {0.f}});
  a.Send(store);
  EXPECT_FALSE(a.result) << "answered before the step's last worker";
  b.Send(store);
  ASSERT_TRUE(a.result && b.result);
  EXPECT_TRUE(a.result->ok() && b.result->ok());
  // mean gradient {1, 1}, {2}; w -= 0.5 * g
  const std::vector<std::vector<float>> expected = {{0.5f, 1.5f}, {2.f}};
  EXPECT_EQ(a.reply, expected);
  EXPECT_EQ(b.reply, expected);
  EXPECT_EQ(store.updates_applied(), 1u);
}

TEST(ParamStoreTest, AsyncAppliesEachPushAtOnce) {
  ParamStore store;
  Exchange init = Make(ExchangeHeader::kInit, 0, 2, 0, {{1.f}}, /*sync=*/false);
  init.Send(store);
  Exchange a = Make(ExchangeHeader::kStep, 1, 2, 7, {{2.f}}, false);
  a.Send(store);
  ASSERT_TRUE(a.result && a.result->ok());
  EXPECT_EQ(a.reply[0][0], 0.f);
  EXPECT_EQ(store.updates_applied(), 1u);
}

TEST(ParamStoreTest, RefusesWhatDoesNotFitTheRun) {
  ParamStore store;
  Exchange none = Make(ExchangeHeader::kStep, 0, 2, 0, {{1.f}});
  none.Send(store);
  ASSERT_TRUE(none.result);
  EXPECT_EQ(none.result->code(), absl::StatusCode::kFailedPrecondition);

  Exchange init = Make(ExchangeHeader::kInit, 0, 2, 0, {{1.f, 2.f}});
  init.Send(store);
  struct Case {
    Exchange exchange;
    absl::StatusCode code;
  };
  std::vector<Case> cases;
  cases.push_back({Make(ExchangeHeader::kStep, 0, 2, 0, {{1.f}}), absl::StatusCode::kInvalidArgument});
  cases.push_back({Make(ExchangeHeader::kStep, 0, 2, 0, {{1.f, 2.f}, {3.f}}), absl::StatusCode::kInvalidArgument});
  cases.push_back({Make(ExchangeHeader::kStep, 5, 2, 0, {{1.f, 2.f}}), absl::StatusCode::kInvalidArgument});
  // More workers than the run has: would index past the run's arrivals.
  cases.push_back({Make(ExchangeHeader::kStep, 7, 9, 0, {{1.f, 2.f}}), absl::StatusCode::kFailedPrecondition});
  cases.push_back({Make(ExchangeHeader::kStep, 0, 2, 3, {{1.f, 2.f}}), absl::StatusCode::kFailedPrecondition});
  Exchange bad_magic = Make(ExchangeHeader::kStep, 0, 2, 0, {{1.f, 2.f}});
  bad_magic.header.magic = 0;
  cases.push_back({bad_magic, absl::StatusCode::kInvalidArgument});
  Exchange bad_kind = Make(ExchangeHeader::kStep, 0, 2, 0, {{1.f, 2.f}});
  bad_kind.header.kind = 9;
  cases.push_back({bad_kind, absl::StatusCode::kInvalidArgument});
  for (Case& c : cases) {
    c.exchange.Send(store);
    ASSERT_TRUE(c.exchange.result);
    EXPECT_EQ(c.exchange.result->code(), c.code) << *c.exchange.result;
  }
  // A worker cannot send a step twice.
  Exchange first = Make(ExchangeHeader::kStep, 0, 2, 0, {{1.f, 2.f}});
  first.Send(store);
  Exchange again = Make(ExchangeHeader::kStep, 0, 2, 0, {{1.f, 2.f}});
  again.Send(store);
  ASSERT_TRUE(again.result);
  EXPECT_EQ(again.result->code(), absl::StatusCode::kFailedPrecondition);
  // The store never applied anything that was refused.
  EXPECT_EQ(store.updates_applied(), 0u);
}

TEST(ParamStoreTest, ANewRunAbortsTheOldRunsHeldExchanges) {
  ParamStore store;
  Exchange init = Make(ExchangeHeader::kInit, 0, 2, 0, {{1.f}});
  init.Send(store);
  Exchange held = Make(ExchangeHeader::kStep, 0, 2, 0, {{1.f}});
  held.Send(store);
  EXPECT_FALSE(held.result);
  Exchange next = Make(ExchangeHeader::kInit, 0, 1, 0, {{5.f}});
  next.header.run_id = 43;
  next.Send(store);
  ASSERT_TRUE(held.result);
  EXPECT_EQ(held.result->code(), absl::StatusCode::kAborted);
  ASSERT_TRUE(next.result && next.result->ok());
  EXPECT_EQ(next.reply[0][0], 5.f);
}

TEST(ParamStoreTest, ShortHeaderIsRefused) {
  ParamStore store;
  std::byte tiny[8] = {};
  std::vector<std::span<const std::byte>> request = {{tiny, sizeof(tiny)}};
  std::vector<std::span<std::byte>> reply = {{tiny, sizeof(tiny)}};
  std::optional<absl::Status> result;
  store.OnExchange(request, reply, [&result](absl::Status s) { result = s; });
  ASSERT_TRUE(result);
  EXPECT_EQ(result->code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psbench
