// The PS's parameter store, driven directly through its ExchangeHandler interface: init,
// synchronous steps held until the last worker, async steps, and requests it must refuse.
#include "ps/param_store.h"

#include <array>
#include <cstring>
#include <optional>
#include <vector>

#include "gtest/gtest.h"

namespace psbench {
namespace {

// One worker's exchange: a header and float tensors; the reply is separate memory.
struct Exchange {
  ExchangeHeader header;
  std::vector<uint32_t> part;  // non-empty: a part of the shard (kSubset), these tensors
  std::vector<std::vector<float>> tensors;
  std::vector<std::vector<float>> reply;
  std::optional<absl::Status> result;

  void Send(ParamStore& store) {
    header.num_tensors = static_cast<uint32_t>(tensors.size());
    if (!part.empty()) header.flags |= ExchangeHeader::kSubset;
    std::vector<std::span<const std::byte>> request = {
        {reinterpret_cast<const std::byte*>(&header), sizeof(header)}};
    reply.assign(tensors.size(), {});
    reply_header_.fill(std::byte{0});
    std::vector<std::span<std::byte>> out = {{reply_header_.data(), reply_header_.size()}};
    if (!part.empty()) {
      request.push_back(std::as_bytes(std::span<const uint32_t>(part)));
      reply_list_.assign(part.size(), 0);
      out.push_back(std::as_writable_bytes(std::span<uint32_t>(reply_list_)));
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
      request.push_back(std::as_bytes(std::span<const float>(tensors[i])));
      reply[i].assign(tensors[i].size(), -1.f);
      out.push_back(std::as_writable_bytes(std::span<float>(reply[i])));
    }
    store.OnExchange(request, out, [this](absl::Status s) { result = s; });
  }

 private:
  std::array<std::byte, sizeof(ExchangeHeader)> reply_header_;
  std::vector<uint32_t> reply_list_;
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

// A part of the shard (kSubset).
Exchange MakePart(uint32_t worker, uint32_t workers, uint64_t step, std::vector<uint32_t> part,
                  std::vector<std::vector<float>> tensors, bool sync = true) {
  Exchange e = Make(ExchangeHeader::kStep, worker, workers, step, std::move(tensors), sync);
  e.part = std::move(part);
  return e;
}

// A step in two parts, {0, 2} and {1}, each gathered over both workers on its own and answered
// once both workers' are in; the step counts once both parts are applied.
TEST(ParamStoreTest, SyncPartsAreGatheredEachOnTheirOwn) {
  ParamStore store;
  Exchange init = Make(ExchangeHeader::kInit, 0, 2, 0, {{1.f, 2.f}, {3.f}, {5.f}});
  init.Send(store);
  ASSERT_TRUE(init.result && init.result->ok()) << *init.result;
  Exchange a0 = MakePart(0, 2, 0, {0, 2}, {{2.f, 0.f}, {2.f}});
  Exchange b1 = MakePart(1, 2, 0, {1}, {{4.f}});
  Exchange a1 = MakePart(1, 2, 0, {0, 2}, {{0.f, 2.f}, {0.f}});
  Exchange b0 = MakePart(0, 2, 0, {1}, {{0.f}});
  a0.Send(store);
  b1.Send(store);
  EXPECT_FALSE(a0.result || b1.result) << "answered before the part's last worker";
  a1.Send(store);
  ASSERT_TRUE(a0.result && a1.result);
  EXPECT_TRUE(a0.result->ok() && a1.result->ok()) << *a0.result << " " << *a1.result;
  EXPECT_FALSE(b1.result) << "the other part is still gathering";
  // mean gradients {1, 1} and {1}; w -= 0.5 g
  const std::vector<std::vector<float>> a_expected = {{0.5f, 1.5f}, {4.5f}};
  EXPECT_EQ(a0.reply, a_expected);
  EXPECT_EQ(a1.reply, a_expected);
  EXPECT_EQ(store.updates_applied(), 0u) << "a step counts once all its parts are applied";
  b0.Send(store);
  ASSERT_TRUE(b0.result && b1.result);
  EXPECT_TRUE(b0.result->ok() && b1.result->ok());
  EXPECT_EQ(b0.reply, (std::vector<std::vector<float>>{{2.f}}));  // 3 - 0.5 * 2
  EXPECT_EQ(b1.reply, b0.reply);
  EXPECT_EQ(store.updates_applied(), 1u);
  auto report = store.Report();
  ASSERT_TRUE(report);
  for (const auto& w : report->workers) EXPECT_EQ(w.steps.ToString(), "0");

}

TEST(ParamStoreTest, AsyncPartsApplyAtOnceAndCountTheStepWhenTheShardIsCovered) {
  ParamStore store;
  Exchange init = Make(ExchangeHeader::kInit, 0, 2, 0, {{1.f}, {3.f}}, /*sync=*/false);
  init.Send(store);
  Exchange a = MakePart(1, 2, 0, {1}, {{2.f}}, false);
  a.Send(store);
  ASSERT_TRUE(a.result && a.result->ok()) << *a.result;
  EXPECT_EQ(a.reply[0][0], 2.f);
  EXPECT_EQ(store.updates_applied(), 0u);
  Exchange b = MakePart(1, 2, 0, {0}, {{2.f}}, false);
  b.Send(store);
  ASSERT_TRUE(b.result && b.result->ok()) << *b.result;
  EXPECT_EQ(b.reply[0][0], 0.f);
  EXPECT_EQ(store.updates_applied(), 1u);
  EXPECT_EQ(store.Report()->workers[1].steps.ToString(), "0");
}

// Steps whose parts never all come are not kept without end: 64 a worker at most.
TEST(ParamStoreTest, AsyncStepsLeftIncompleteAreBounded) {
  ParamStore store;
  Exchange init = Make(ExchangeHeader::kInit, 0, 2, 0, {{1.f}, {3.f}}, /*sync=*/false);
  init.Send(store);
  for (uint64_t step = 0; step < 64; ++step) {
    Exchange part = MakePart(1, 2, step, {1}, {{2.f}}, false);
    part.Send(store);
    ASSERT_TRUE(part.result && part.result->ok()) << step << ": " << *part.result;
  }
  Exchange over = MakePart(1, 2, 64, {1}, {{2.f}}, false);
  over.Send(store);
  ASSERT_TRUE(over.result);
  EXPECT_EQ(over.result->message(), "worker 1 has 64 steps with parts still to come; step 64 is one too many");
  // A step already begun is finished; the other worker has room of its own.
  Exchange rest = MakePart(1, 2, 0, {0}, {{2.f}}, false);
  rest.Send(store);
  ASSERT_TRUE(rest.result && rest.result->ok()) << *rest.result;
  Exchange other = MakePart(0, 2, 64, {1}, {{2.f}}, false);
  other.Send(store);
  ASSERT_TRUE(other.result && other.result->ok()) << *other.result;
  Exchange now = MakePart(1, 2, 64, {1}, {{2.f}}, false);
  now.Send(store);
  ASSERT_TRUE(now.result && now.result->ok()) << *now.result;
}

// Parts of two steps may interleave (a worker starts step 1's first part before step 0's
// last came back): each step counts once its own parts cover the shard; a tensor sent twice
// in one step is refused.
TEST(ParamStoreTest, AsyncPartsOfInterleavedStepsCountEachStepOnce) {
  ParamStore store;
  Exchange init = Make(ExchangeHeader::kInit, 0, 1, 0, {{1.f}, {3.f}}, /*sync=*/false);
  init.Send(store);
  for (auto [step, tensor] : std::vector<std::pair<uint64_t, uint32_t>>{{0, 0}, {1, 0}, {0, 1}}) {
    Exchange e = MakePart(0, 1, step, {tensor}, {{1.f}}, false);
    e.Send(store);
    ASSERT_TRUE(e.result && e.result->ok()) << *e.result;
  }
  auto report = store.Report();
  EXPECT_EQ(report->updates, 1u);
  EXPECT_EQ(report->workers[0].steps.ToString(), "0") << "step 1 has half its parts in";
  Exchange again = MakePart(0, 1, 1, {0}, {{1.f}}, false);
  again.Send(store);
  ASSERT_TRUE(again.result);
  EXPECT_EQ(again.result->code(), absl::StatusCode::kFailedPrecondition) << *again.result;
  Exchange rest = MakePart(0, 1, 1, {1}, {{1.f}}, false);
  rest.Send(store);
  ASSERT_TRUE(rest.result && rest.result->ok()) << *rest.result;
  report = store.Report();
  EXPECT_EQ(report->updates, 2u);
  EXPECT_EQ(report->workers[0].steps.ToString(), "0-1");
  EXPECT_TRUE(report->workers[0].duplicates.empty());
}

// The first step splits the shard; a later step split otherwise, or a part of a step already
// applied, is refused (and leaves the parts being gathered alone).
TEST(ParamStoreTest, SyncLaterStepsMustSplitAsTheFirst) {
  ParamStore store;
  Exchange init = Make(ExchangeHeader::kInit, 0, 1, 0, {{1.f}, {3.f}, {5.f}});
  init.Send(store);
  for (std::vector<uint32_t> part : {std::vector<uint32_t>{0, 1}, {2}}) {
    Exchange e = MakePart(0, 1, 0, part, std::vector<std::vector<float>>(part.size(), {1.f}));
    e.Send(store);
    ASSERT_TRUE(e.result && e.result->ok()) << *e.result;
  }
  EXPECT_EQ(store.updates_applied(), 1u);
  auto refused = [&store](Exchange e, const std::string& words) {
    e.Send(store);
    ASSERT_TRUE(e.result) << words << ": held";
    EXPECT_EQ(e.result->code(), absl::StatusCode::kFailedPrecondition) << *e.result;
    EXPECT_NE(e.result->message().find(words), std::string::npos) << *e.result;
  };
  refused(MakePart(0, 1, 1, {1, 2}, {{1.f}, {1.f}}), "otherwise than the run's first step");
  refused(MakePart(0, 1, 1, {0}, {{1.f}}), "otherwise than the run's first step");
  refused(Make(ExchangeHeader::kStep, 0, 1, 1, {{1.f}, {1.f}, {1.f}}), "otherwise than the run's first step");
  refused(MakePart(0, 1, 0, {2}, {{1.f}}), "the PS is gathering step 1");
  Exchange ok = MakePart(0, 1, 1, {2}, {{1.f}});
  ok.Send(store);
  ASSERT_TRUE(ok.result && ok.result->ok()) << *ok.result;
}

TEST(ParamStoreTest, PartsThatDoNotFitTheShardAreRefused) {
  ParamStore store;
  Exchange init = Make(ExchangeHeader::kInit, 0, 2, 0, {{1.f, 2.f}, {3.f}, {5.f}});
  init.Send(store);
  auto refused = [&store](Exchange e, absl::StatusCode code, const std::string& words) {
    e.Send(store);
    ASSERT_TRUE(e.result) << words << ": held";
    EXPECT_EQ(e.result->code(), code) << *e.result;
    EXPECT_NE(e.result->message().find(words), std::string::npos) << *e.result;
  };
  refused(MakePart(0, 2, 0, {2, 0}, {{1.f}, {1.f, 1.f}}), absl::StatusCode::kInvalidArgument, "must ascend");
  refused(MakePart(0, 2, 0, {3}, {{1.f}}), absl::StatusCode::kInvalidArgument, "must ascend");
  refused(MakePart(0, 2, 0, {1}, {{1.f, 1.f}}), absl::StatusCode::kInvalidArgument, "tensor 1 has 8 bytes");
  Exchange init_part = MakePart(0, 2, 0, {1}, {{1.f}});
  init_part.header.kind = ExchangeHeader::kInit;
  refused(init_part, absl::StatusCode::kInvalidArgument, "initial values go whole");
  // Worker 0 claims tensors 0 and 1 for step 0; tensor 1 again in another part is refused,
  // and so is worker 1 splitting the part from tensor 0 otherwise.
  Exchange first = MakePart(0, 2, 0, {0, 1}, {{1.f, 1.f}, {1.f}});
  first.Send(store);
  EXPECT_FALSE(first.result);
  refused(MakePart(0, 2, 0, {1, 2}, {{1.f}, {1.f}}), absl::StatusCode::kFailedPrecondition, "in two parts");
  refused(MakePart(1, 2, 0, {0}, {{1.f, 1.f}}), absl::StatusCode::kFailedPrecondition, "otherwise");
  refused(MakePart(0, 2, 0, {0, 1}, {{1.f, 1.f}, {1.f}}), absl::StatusCode::kFailedPrecondition, "twice");
  EXPECT_FALSE(first.result) << "refusals leave the held part alone";
  // Worker 1's part completes it (and nothing is left held for the store's destructor to
  // answer into an exchange gone out of scope).
  Exchange second = MakePart(1, 2, 0, {0, 1}, {{1.f, 1.f}, {1.f}});
  second.Send(store);
  ASSERT_TRUE(first.result && second.result);
  EXPECT_TRUE(first.result->ok() && second.result->ok()) << *first.result;
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
  // Worker 1 completes the step `first` is held in. Otherwise the store, destroyed after the
  // exchanges, would answer `first` after it was gone (LeakSanitizer found the Status it wrote).
  Exchange other = Make(ExchangeHeader::kStep, 1, 2, 0, {{1.f, 2.f}});
  other.Send(store);
  ASSERT_TRUE(first.result);
  EXPECT_TRUE(first.result->ok()) << *first.result;
  EXPECT_EQ(store.updates_applied(), 1u);
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
  // The old run's next step is told what happened, not that it never sent its values.
  Exchange late = Make(ExchangeHeader::kStep, 1, 2, 0, {{1.f}});
  late.Send(store);
  ASSERT_TRUE(late.result);
  EXPECT_EQ(late.result->code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(late.result->message(),
            "the PS now serves another run (000000000000002b, 1 worker), whose workers sent their initial values "
            "after this run's: two jobs on one PS, or a --run-id reused?");
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

// Found by tests/fuzz/param_store_fuzz: an init claiming billions of workers made the PS
// allocate per-worker state for every one of them (hundreds of GiB) before anything else.
TEST(ParamStoreTest, AbsurdWorkerCountIsRefused) {
  ParamStore store;
  Exchange e = Make(ExchangeHeader::kInit, 0, 0xffffffffu, 0, {{1.f, 2.f}});
  e.Send(store);
  ASSERT_TRUE(e.result);
  EXPECT_EQ(e.result->code(), absl::StatusCode::kInvalidArgument) << *e.result;
  Exchange ok = Make(ExchangeHeader::kInit, 0, ExchangeHeader::kMaxWorkers, 0, {{1.f, 2.f}});
  ok.Send(store);
  ASSERT_TRUE(ok.result);
  EXPECT_TRUE(ok.result->ok()) << *ok.result;
}

// What a header may ask of the PS is bounded, and what it does not know it refuses: an init
// of 2^20 - 1 empty tensors (8 MiB on the wire) cost a PS 127 MB of per-tensor state, and a
// newer client's flag bit was silently ignored.
TEST(ParamStoreTest, TooManyTensorsAndUnknownFlagsAreRefused) {
  ParamStore store;
  Exchange many = Make(ExchangeHeader::kInit, 0, 1, 0, std::vector<std::vector<float>>(ExchangeHeader::kMaxTensors + 1));
  many.Send(store);
  ASSERT_TRUE(many.result);
  EXPECT_EQ(many.result->code(), absl::StatusCode::kInvalidArgument) << *many.result;
  EXPECT_EQ(many.result->message(), "131073 tensors, over the 131072 a PS holds");
  Exchange flagged = Make(ExchangeHeader::kInit, 0, 1, 0, {{1.f}});
  flagged.header.flags |= 0x100;
  flagged.Send(store);
  ASSERT_TRUE(flagged.result);
  EXPECT_EQ(flagged.result->message(), "unknown header flags 0x101");
  Exchange most = Make(ExchangeHeader::kInit, 0, 1, 0, std::vector<std::vector<float>>(ExchangeHeader::kMaxTensors));
  most.Send(store);
  ASSERT_TRUE(most.result);
  EXPECT_TRUE(most.result->ok()) << *most.result;
}

// Found by tests/fuzz/param_store_fuzz (UBSan): a step with more tensors than the run's
// shard compared each tensor's size with a run tensor past the end of the shard before the
// tensor count was checked.
TEST(ParamStoreTest, MoreTensorsThanTheRunIsRefusedBeforeReadingPastIt) {
  ParamStore store;
  Exchange init = Make(ExchangeHeader::kInit, 0, 1, 0, {});
  init.Send(store);
  ASSERT_TRUE(init.result && init.result->ok());
  Exchange step = Make(ExchangeHeader::kStep, 0, 1, 0, {{1.f}, {2.f}, {3.f}});
  step.Send(store);
  ASSERT_TRUE(step.result);
  EXPECT_EQ(step.result->code(), absl::StatusCode::kInvalidArgument) << *step.result;
  EXPECT_NE(step.result->message().find("3 tensors"), absl::string_view::npos) << *step.result;
}

// --- Accounting: which updates of which worker were applied -----------------------------

TEST(StepSetTest, RangesMergeAndDuplicatesAreRefused) {
  StepSet s;
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.ToString(), "");
  for (uint64_t step : {0, 1, 2, 5, 7, 6, 4}) EXPECT_TRUE(s.Add(step)) << step;
  EXPECT_EQ(s.ToString(), "0-2,4-7");
  EXPECT_EQ(s.size(), 7u);
  EXPECT_FALSE(s.Add(5));
  EXPECT_FALSE(s.Add(0));
  EXPECT_TRUE(s.Add(3));
  EXPECT_EQ(s.ToString(), "0-7");
  EXPECT_EQ(s.ranges().size(), 1u);
  EXPECT_TRUE(s.Add(10));
  EXPECT_TRUE(s.Contains(10));
  EXPECT_FALSE(s.Contains(9));
  EXPECT_FALSE(s.Contains(11));
  EXPECT_EQ(s.ToString(), "0-7,10");
  auto parsed = StepSet::Parse("0-7,10");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, s);
  EXPECT_EQ(parsed->size(), 9u);
  for (const char* bad : {"x", "3-1", "0-4,4", "5,2", "0-2,3", "-1", "1-"}) {
    EXPECT_FALSE(StepSet::Parse(bad).ok()) << bad;
  }
}

TEST(ParamStoreAccountingTest, NoReportBeforeTheFirstRun) {
  ParamStore store;
  EXPECT_FALSE(store.Report());
}

TEST(ParamStoreAccountingTest, SyncCountsEveryWorkersStepOnceTheStepIsApplied) {
  ParamStore store;
  Exchange init = Make(ExchangeHeader::kInit, 0, 2, 0, {{10.f, 20.f}});
  init.Send(store);
  ASSERT_TRUE(init.result && init.result->ok());
  for (uint64_t step = 0; step < 3; ++step) {
    Exchange a = Make(ExchangeHeader::kStep, 0, 2, step, {{2.f, 4.f}});
    Exchange b = Make(ExchangeHeader::kStep, 1, 2, step, {{4.f, 2.f}});
    a.Send(store);
    auto held = store.Report();
    ASSERT_TRUE(held);
    EXPECT_EQ(held->updates, step) << "a held step counts only once applied";
    EXPECT_EQ(held->workers[0].applied, step);
    b.Send(store);
    ASSERT_TRUE(a.result && b.result && a.result->ok() && b.result->ok());
  }
  auto r = store.Report();
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->sync);
  EXPECT_EQ(r->run_id, 42u);
  EXPECT_EQ(r->updates, 3u);
  ASSERT_EQ(r->workers.size(), 2u);
  for (const auto& w : r->workers) {
    EXPECT_EQ(w.applied, 3u);
    EXPECT_EQ(w.steps.ToString(), "0-2");
    EXPECT_TRUE(w.duplicates.empty());
  }
  // lr 0.5, mean gradient {3, 3} per step: 10 - 4.5, 20 - 4.5.
  Exchange read = Make(ExchangeHeader::kInit, 0, 2, 0, {{0.f, 0.f}});
  read.Send(store);
  EXPECT_EQ(read.reply, (std::vector<std::vector<float>>{{5.5f, 15.5f}}));
}

TEST(ParamStoreAccountingTest, AsyncCountsEachPushAndDuplicates) {
  ParamStore store;
  Exchange init = Make(ExchangeHeader::kInit, 0, 3, 0, {{0.f}}, /*sync=*/false);
  init.Send(store);
  struct Push {
    uint32_t worker;
    uint64_t step;
  };
  for (Push p : {Push{0, 0}, Push{1, 0}, Push{0, 1}, Push{0, 3}, Push{1, 0}, Push{0, 2}}) {
    Exchange e = Make(ExchangeHeader::kStep, p.worker, 3, p.step, {{1.f}}, false);
    e.Send(store);
    ASSERT_TRUE(e.result && e.result->ok()) << *e.result;
  }
  auto r = store.Report();
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->sync);
  EXPECT_EQ(r->updates, 6u);
  EXPECT_EQ(r->workers[0].applied, 4u);
  EXPECT_EQ(r->workers[0].steps.ToString(), "0-3");
  EXPECT_EQ(r->workers[1].applied, 2u);
  EXPECT_EQ(r->workers[1].steps.ToString(), "0");
  EXPECT_EQ(r->workers[1].duplicates, std::vector<uint64_t>{0});
  EXPECT_EQ(r->workers[2].applied, 0u);
  // Round trip through the JSON the PS reports in GetInfo and at exit.
  auto back = UpdateReport::FromJson(nlohmann::json::parse(r->ToJson().dump()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->updates, 6u);
  EXPECT_EQ(back->run_id, 42u);
  EXPECT_EQ(back->workers[0].steps, r->workers[0].steps);
  EXPECT_EQ(back->workers[1].duplicates, r->workers[1].duplicates);
  EXPECT_EQ(back->workers[2].applied, 0u);
}

TEST(ParamStoreAccountingTest, RefusedExchangesAreNotCountedAndANewRunStartsAfresh) {
  ParamStore store;
  Exchange init = Make(ExchangeHeader::kInit, 0, 2, 0, {{1.f}}, false);
  init.Send(store);
  Exchange wrong_size = Make(ExchangeHeader::kStep, 0, 2, 0, {{1.f, 2.f}}, false);
  wrong_size.Send(store);
  ASSERT_TRUE(wrong_size.result && !wrong_size.result->ok());
  Exchange ok = Make(ExchangeHeader::kStep, 1, 2, 4, {{1.f}}, false);
  ok.Send(store);
  EXPECT_EQ(store.Report()->updates, 1u);
  EXPECT_EQ(store.Report()->workers[0].applied, 0u);
  EXPECT_EQ(store.Report()->workers[1].steps.ToString(), "4");
  Exchange next = Make(ExchangeHeader::kInit, 0, 1, 0, {{1.f}});
  next.header.run_id = 7;
  next.Send(store);
  auto r = store.Report();
  EXPECT_EQ(r->run_id, 7u);
  EXPECT_EQ(r->updates, 0u);
  ASSERT_EQ(r->workers.size(), 1u);
  EXPECT_EQ(r->workers[0].applied, 0u);
}

TEST(ParamStoreAccountingTest, RepliesCarryTheUpdatesAppliedWhenAnswered) {
  ParamStore store;
  ExchangeHeader got;
  auto send = [&store, &got](ExchangeHeader h, std::vector<float> tensor) {
    h.num_tensors = 1;
    ExchangeHeader reply_header{};
    std::vector<float> reply(tensor.size());
    std::vector<std::span<const std::byte>> request = {
        {reinterpret_cast<const std::byte*>(&h), sizeof(h)}, std::as_bytes(std::span<const float>(tensor))};
    std::vector<std::span<std::byte>> out = {
        {reinterpret_cast<std::byte*>(&reply_header), sizeof(reply_header)},
        std::as_writable_bytes(std::span<float>(reply))};
    store.OnExchange(request, out, [](absl::Status) {});
    got = reply_header;
  };
  Exchange e = Make(ExchangeHeader::kInit, 0, 1, 0, {}, false);
  send(e.header, {1.f});
  EXPECT_EQ(got.updates_applied, 0u);
  EXPECT_EQ(got.magic, ExchangeHeader::kMagic);
  e.header.kind = ExchangeHeader::kStep;
  send(e.header, {1.f});
  EXPECT_EQ(got.updates_applied, 1u);
  send(e.header, {1.f});
  EXPECT_EQ(got.updates_applied, 2u);
  e.header.kind = ExchangeHeader::kInit;
  send(e.header, {0.f});
  EXPECT_EQ(got.updates_applied, 2u);
}

TEST(ParamStoreAccountingTest, SyncMeanOfSevenWorkersIsExact) {
  // A sum that is a multiple of W divides exactly; multiplying by an inexact 1/7 does not
  // give the integer back (21 x fl(1/7) != 3 in float32).
  ParamStore store;
  const uint32_t workers = 7;
  Exchange init = Make(ExchangeHeader::kInit, 0, workers, 0, {{10.f, 1000.f}});
  init.header.learning_rate = 1.f;
  init.Send(store);
  std::vector<Exchange> steps;
  for (uint32_t w = 0; w < workers; ++w) {
    steps.push_back(Make(ExchangeHeader::kStep, w, workers, 0, {{3.f, w == 0 ? 70.f : 0.f}}));
    steps.back().header.learning_rate = 1.f;
  }
  for (auto& e : steps) e.Send(store);
  ASSERT_TRUE(steps[0].result && steps[0].result->ok());
  EXPECT_EQ(steps[0].reply, (std::vector<std::vector<float>>{{7.f, 990.f}}));
}

// The reference the PS must match bit for bit: PyTorch's SGD, element by element, in float.
struct ReferenceSgd {
  std::vector<float> w, v;
  float lr, mu;
  void Step(const std::vector<float>& g, float divisor) {
    for (size_t i = 0; i < w.size(); ++i) {
      float step = g[i] / divisor;
      if (mu != 0.f) step = v[i] = mu * v[i] + step;
      w[i] -= lr * step;
    }
  }
};

std::vector<float> Ramp(size_t n, float scale, float offset) {
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = offset + scale * static_cast<float>((i * 7919) % 101);
  return out;
}

// Long enough for the vectorised pass's body and its tail, in both kernels (with and without
// momentum), async and sync with a divisor that is not a power of two.
TEST(ParamStoreKernelTest, MatchesReferenceSgdWithAndWithoutMomentum) {
  for (float mu : {0.f, 0.9f}) {
    for (uint32_t workers : {1u, 3u}) {
      for (bool sync : {false, true}) {
        SCOPED_TRACE(testing::Message() << "momentum " << mu << ", " << workers << " workers, "
                                        << (sync ? "sync" : "async"));
        const size_t n = 67;
        ParamStore store;
        Exchange init = Make(ExchangeHeader::kInit, 0, workers, 0, {Ramp(n, 0.25f, -3.f)}, sync);
        init.header.momentum = mu;
        init.Send(store);
        ASSERT_TRUE(init.result && init.result->ok());
        ReferenceSgd ref{Ramp(n, 0.25f, -3.f), std::vector<float>(n, 0.f), 0.5f, mu};
        for (uint64_t step = 0; step < 3; ++step) {
          std::vector<Exchange> pushes;
          std::vector<float> sum(n, 0.f);
          for (uint32_t w = 0; w < workers; ++w) {
            pushes.push_back(Make(ExchangeHeader::kStep, w, workers, step,
                                  {Ramp(n, 0.01f * static_cast<float>(w + 1), static_cast<float>(step))}, sync));
            pushes.back().header.momentum = mu;
            for (size_t i = 0; i < n; ++i) sum[i] += pushes.back().tensors[0][i];
            if (!sync) {
              pushes.back().Send(store);
              ref.Step(pushes.back().tensors[0], 1.f);
              ASSERT_TRUE(pushes.back().result && pushes.back().result->ok());
              EXPECT_EQ(pushes.back().reply[0], ref.w);
            }
          }
          if (!sync) continue;
          for (auto& e : pushes) e.Send(store);
          ref.Step(sum, static_cast<float>(workers));
          for (auto& e : pushes) {
            ASSERT_TRUE(e.result && e.result->ok());
            EXPECT_EQ(e.reply[0], ref.w) << "every worker of the step gets the same parameters";
          }
        }
      }
    }
  }
}

// Transports may answer in the request's own memory (grpc+mpi does): the new parameters then
// overwrite the gradient each element was computed from. And a reply a transport hands over
// misaligned for floats gets the same bytes.
TEST(ParamStoreKernelTest, ReplyInTheRequestsMemoryOrMisalignedIsTheSame) {
  const size_t n = 45;
  ParamStore store;
  Exchange init = Make(ExchangeHeader::kInit, 0, 1, 0, {Ramp(n, 1.f, 0.f)}, /*sync=*/false);
  init.Send(store);
  ReferenceSgd ref{Ramp(n, 1.f, 0.f), {}, 0.5f, 0.f};

  ExchangeHeader h = init.header;
  h.kind = ExchangeHeader::kStep;
  std::vector<float> g = Ramp(n, 0.5f, 1.f);
  ref.Step(g, 1.f);
  std::vector<std::span<const std::byte>> request = {{reinterpret_cast<const std::byte*>(&h), sizeof(h)},
                                                     std::as_bytes(std::span<const float>(g))};
  std::vector<std::span<std::byte>> in_place = {{reinterpret_cast<std::byte*>(&h), sizeof(h)},
                                                std::as_writable_bytes(std::span<float>(g))};
  std::optional<absl::Status> result;
  store.OnExchange(request, in_place, [&](absl::Status s) { result = s; });
  ASSERT_TRUE(result && result->ok());
  EXPECT_EQ(g, ref.w);

  std::vector<float> g2 = Ramp(n, 0.25f, 2.f);
  ref.Step(g2, 1.f);
  h.step = 1;
  std::vector<std::byte> odd(n * sizeof(float) + 1);
  ExchangeHeader reply_header;
  request[1] = std::as_bytes(std::span<const float>(g2));
  std::vector<std::span<std::byte>> misaligned = {{reinterpret_cast<std::byte*>(&reply_header), sizeof(reply_header)},
                                                  {odd.data() + 1, n * sizeof(float)}};
  result.reset();
  store.OnExchange(request, misaligned, [&](absl::Status s) { result = s; });
  ASSERT_TRUE(result && result->ok());
  std::vector<float> got(n);
  std::memcpy(got.data(), odd.data() + 1, n * sizeof(float));
  EXPECT_EQ(got, ref.w);
}

}  // namespace
}  // namespace psbench

namespace psbench {
namespace {

TEST(TestFaultTest, ParsesTheThreeKindsAndRefusesTheRest) {
  auto f = ParseTestFault("wrong-tensor:1:3:2");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->kind, TestFault::kWrongTensor);
  EXPECT_EQ(f->worker, 1u);
  EXPECT_EQ(f->step, 3u);
  EXPECT_EQ(f->tensor, 2u);
  EXPECT_EQ(f->ToString(), "wrong-tensor:1:3:2");
  EXPECT_EQ(ParseTestFault("drop:0:0:0")->kind, TestFault::kDrop);
  EXPECT_EQ(ParseTestFault("duplicate:0:9:1")->kind, TestFault::kDuplicate);
  for (const char* bad : {"", "drop", "drop:1:2", "drop:1:2:3:4", "lose:1:2:3", "drop:-1:2:3", "drop:a:2:3"})
    EXPECT_FALSE(ParseTestFault(bad).ok()) << bad;
}

// Worker w's step 0, tensor 0: what each fault does to the parameters, sync and async, for
// the step's first worker (its gradient is summed) and its last (applied with the sum), while
// the store still reports the update applied once.
struct FaultCase {
  TestFault::Kind kind;
  bool sync;
  uint32_t worker;
};

class StoreFaultTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(StoreFaultTest, ChangesOnlyTheNamedUpdateAndStillAccountsIt) {
  const auto [kind, sync, faulty] = GetParam();
  ParamStore store;
  store.SetTestFault({.kind = kind, .worker = faulty, .step = 0, .tensor = 0});
  Exchange init = Make(ExchangeHeader::kInit, 0, 2, 0, {{10.f, 10.f}, {10.f}, {10.f}}, sync);
  init.header.learning_rate = 1.f;
  init.Send(store);
  ASSERT_TRUE(init.result && init.result->ok());
  // Integer gradients, sync scaled by the worker count so that the mean is the gradient.
  const float unit = sync ? 2.f : 1.f;
  for (uint64_t step = 0; step < 2; ++step) {
    Exchange a = Make(ExchangeHeader::kStep, 0, 2, step, {{unit, unit}, {unit}, {unit}}, sync);
    Exchange b = Make(ExchangeHeader::kStep, 1, 2, step, {{2 * unit, 2 * unit}, {2 * unit}, {2 * unit}}, sync);
    a.header.learning_rate = b.header.learning_rate = 1.f;
    a.Send(store);
    b.Send(store);
    ASSERT_TRUE(a.result && b.result && a.result->ok() && b.result->ok());
  }
  // Without the fault every tensor loses 1 + 2 a step: 10 - 6 = 4. The faulty worker's
  // share of a step is `share`.
  const float share = faulty == 0 ? 1.f : 2.f;
  Exchange read = Make(ExchangeHeader::kInit, 0, 2, 0, {{0.f, 0.f}, {0.f}, {0.f}}, sync);
  read.Send(store);
  ASSERT_TRUE(read.result && read.result->ok());
  std::vector<std::vector<float>> want = {{4.f, 4.f}, {4.f}, {4.f}};
  if (kind == TestFault::kDrop) want[0] = {4 + share, 4 + share};
  if (kind == TestFault::kDuplicate) want[0] = {4 - share, 4 - share};
  if (kind == TestFault::kWrongTensor) {
    want[0] = {4 + share, 4 + share};
    want[1] = {4 - share};  // the next tensor got tensor 0's gradient (its first element) too
  }
  EXPECT_EQ(read.reply, want);
  auto report = store.Report();
  ASSERT_TRUE(report);
  EXPECT_EQ(report->updates, sync ? 2u : 4u);
  for (const auto& w : report->workers) {
    EXPECT_EQ(w.steps.ToString(), "0-1");
    EXPECT_TRUE(w.duplicates.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(Faults, StoreFaultTest,
                         ::testing::ValuesIn([] {
                           std::vector<FaultCase> cases;
                           for (auto kind : {TestFault::kDrop, TestFault::kDuplicate, TestFault::kWrongTensor})
                             for (bool sync : {true, false})
                               for (uint32_t worker : {0u, 1u}) cases.push_back({kind, sync, worker});
                           return cases;
                         }()),
                         [](const auto& info) {
                           const char* k = info.param.kind == TestFault::kDrop        ? "Drop"
                                           : info.param.kind == TestFault::kDuplicate ? "Duplicate"
                                                                                      : "WrongTensor";
                           return std::string(k) + (info.param.sync ? "Sync" : "Async") + "Worker" +
                                  std::to_string(info.param.worker);
                         });

}  // namespace
}  // namespace psbench
