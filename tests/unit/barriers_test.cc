// The PS's polled barriers, driven with a clock of the test's own.
#include "transports/control/barriers.h"

#include <string>

#include <gtest/gtest.h>

namespace psbench::control {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class BarriersTest : public ::testing::Test {
 protected:
  grpc::Status Poll(const std::string& name, int parties, int index, uint64_t nonce,
                    Barriers::Clock::duration at, wire::BarrierReply* reply = nullptr) {
    wire::BarrierRequest r;
    r.set_name(name);
    r.set_parties(parties);
    r.set_worker_index(index);
    r.set_nonce(nonce);
    wire::BarrierReply ignored;
    return barriers_.Poll(r, reply ? reply : &ignored, start_ + at);
  }
  Barriers barriers_;
  const Barriers::Clock::time_point start_ = Barriers::Clock::now();
};

TEST_F(BarriersTest, ReleasesWhenEveryPartyWaitsAndAnswersLatePollers) {
  wire::BarrierReply reply;
  ASSERT_TRUE(Poll("run/start", 3, 0, 10, milliseconds(0), &reply).ok());
  EXPECT_FALSE(reply.released());
  EXPECT_EQ(reply.arrived(), 1);
  EXPECT_EQ(std::vector<int>(reply.missing().begin(), reply.missing().end()), (std::vector<int>{1, 2}));
  ASSERT_TRUE(Poll("run/start", 3, 2, 12, milliseconds(1)).ok());
  reply.Clear();
  ASSERT_TRUE(Poll("run/start", 3, 1, 11, milliseconds(2), &reply).ok());
  EXPECT_TRUE(reply.released());
  reply.Clear();
  ASSERT_TRUE(Poll("run/start", 3, 0, 10, milliseconds(3), &reply).ok());
  EXPECT_TRUE(reply.released()) << "worker 0 polls again after the release";
}

// A worker killed while waiting (or any stray caller) with another --num-workers must not
// hold the barrier's party count once its lease has passed: a rerun would be refused for as
// long as the PS lives.
TEST_F(BarriersTest, AnExpiredArrivalDoesNotKeepItsPartyCount) {
  ASSERT_TRUE(Poll("run/updates-start", 3, 0, 1, milliseconds(0)).ok());
  grpc::Status early = Poll("run/updates-start", 2, 0, 2, milliseconds(100));
  EXPECT_EQ(early.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(early.error_message(),
            "barrier 'run/updates-start' waits for 3 workers, this one says 2 (same --num-workers everywhere?)");
  const auto later = Barriers::kLease + milliseconds(100);
  ASSERT_TRUE(Poll("run/updates-start", 2, 0, 2, later).ok());
  wire::BarrierReply reply;
  ASSERT_TRUE(Poll("run/updates-start", 2, 1, 3, later + milliseconds(1), &reply).ok());
  EXPECT_TRUE(reply.released());
}

TEST_F(BarriersTest, TwoLiveWorkersWithOneIndexAreRefused) {
  ASSERT_TRUE(Poll("b", 2, 0, 1, milliseconds(0)).ok());
  EXPECT_EQ(Poll("b", 2, 0, 2, milliseconds(1)).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  // A restarted worker 0 (a new nonce) after the old one's lease is the worker.
  EXPECT_TRUE(Poll("b", 2, 0, 2, Barriers::kLease + milliseconds(1)).ok());
}

TEST_F(BarriersTest, NamesAndBarriersAreBounded) {
  EXPECT_EQ(Poll(std::string(Barriers::kMaxName + 1, 'n'), 1, 0, 1, milliseconds(0)).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(Poll(std::string(Barriers::kMaxName, 'n'), 1, 0, 1, milliseconds(0)).ok());
  // Released barriers make room for new ones, oldest first.
  for (size_t i = 0; i < Barriers::kMaxBarriers + 100; ++i) {
    ASSERT_TRUE(Poll("released/" + std::to_string(i), 1, 0, 1, milliseconds(1)).ok()) << i;
  }
  EXPECT_EQ(barriers_.size(), Barriers::kMaxBarriers);
  // Barriers with live arrivals stay; past the most, a new one is refused until they expire.
  for (size_t i = 0; i < Barriers::kMaxBarriers; ++i) {
    ASSERT_TRUE(Poll("waiting/" + std::to_string(i), 2, 0, 1, milliseconds(2)).ok()) << i;
  }
  EXPECT_EQ(Poll("one-more", 2, 0, 1, milliseconds(3)).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(Poll("waiting/0", 2, 1, 2, milliseconds(3)).ok()) << "a barrier held still answers";
  EXPECT_TRUE(Poll("one-more", 2, 0, 1, Barriers::kLease + milliseconds(10)).ok());
  EXPECT_EQ(barriers_.size(), 2u) << "expired arrivals take their barriers with them (one released)";
}

TEST_F(BarriersTest, AReleasedBarrierIsForgottenAfterAWhile) {
  ASSERT_TRUE(Poll("r", 1, 0, 1, milliseconds(0)).ok());
  EXPECT_EQ(barriers_.size(), 1u);
  ASSERT_TRUE(Poll("other", 2, 0, 1, Barriers::kForget + seconds(1)).ok());
  EXPECT_EQ(barriers_.size(), 1u);
}

}  // namespace
}  // namespace psbench::control
