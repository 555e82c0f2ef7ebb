// The no-lost-update check's codes: no two updates of a run share a gradient, the exact
// values follow from what was applied, and a tensor off by one update names that update.
#include "worker/update_codes.h"

#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "worker/updates_worker.h"

namespace psbench::update_codes {
namespace {

std::vector<uint8_t> ElementCodes(uint64_t seed, uint64_t tensor, uint64_t n) {
  std::vector<uint8_t> b(n);
  for (uint64_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(ElementCode(seed, tensor, i));
  return b;
}

std::vector<float> Gradient(const Codes& codes, const std::vector<uint8_t>& b, uint32_t w, uint64_t s) {
  std::vector<float> g(b.size());
  Codes::FillGradient(g.data(), b.data(), b.size(), codes.UpdateCode(w, s), 1.f);
  return g;
}

TEST(UpdateCodesTest, NoTwoUpdatesOfARunShareAGradient) {
  for (uint64_t seed : {1u, 7u, 12345u}) {
    const Codes codes(seed, 4, 300);
    const std::vector<uint8_t> b = ElementCodes(seed, 3, kGroups);
    std::set<std::vector<float>> seen;
    for (uint32_t w = 0; w < 4; ++w) {
      for (uint64_t s = 0; s < 300; ++s) {
        std::vector<float> g = Gradient(codes, b, w, s);
        for (float x : g) ASSERT_TRUE(x >= 1 && x <= 4);
        EXPECT_TRUE(seen.insert(g).second) << "worker " << w << " step " << s << " seed " << seed;
      }
    }
  }
}

TEST(UpdateCodesTest, ExpectedValuesAreTheInitialLessEveryAppliedGradient) {
  const uint64_t seed = 5;
  const Codes codes(seed, 3, 20);
  const std::vector<uint8_t> b = ElementCodes(seed, 0, 50);
  std::vector<double> direct(b.size());
  for (size_t i = 0; i < b.size(); ++i) direct[i] = Initial(seed, 0, i);
  Codes::Applied applied;
  for (uint32_t w = 0; w < 3; ++w) {
    for (uint64_t s = 0; s < 20; s += 1 + w) {  // some steps, as a worker killed mid-run leaves
      applied.Add(codes.UpdateCode(w, s));
      std::vector<float> g = Gradient(codes, b, w, s);
      for (size_t i = 0; i < b.size(); ++i) direct[i] -= g[i];
    }
  }
  double dec[kGroups][4];
  applied.Decrements(dec);
  for (size_t i = 0; i < b.size(); ++i) EXPECT_EQ(Initial(seed, 0, i) - dec[i % kGroups][b[i]], direct[i]) << i;
}

TEST(UpdateCodesTest, ATensorOffByOneUpdateNamesIt) {
  const uint64_t seed = 9;
  const Codes codes(seed, 3, 40);
  for (uint64_t n : {16u, 100u, 1000u}) {
    const std::vector<uint8_t> b = ElementCodes(seed, 2, n);
    for (auto [w, s] : {std::pair<uint32_t, uint64_t>{0, 0}, {1, 17}, {2, 39}}) {
      std::vector<float> g = Gradient(codes, b, w, s);
      std::vector<double> missing(g.begin(), g.end()), extra(n);
      for (size_t i = 0; i < n; ++i) extra[i] = -missing[i];
      Codes::Explanation m = codes.Explain(missing, b);
      EXPECT_EQ(m.kind, Codes::Explanation::kMissing);
      ASSERT_EQ(m.fitting, 1u) << n;
      EXPECT_EQ(m.updates[0], std::make_pair(w, s));
      EXPECT_EQ(DescribeUpdates(m), "worker " + std::to_string(w) + "'s step " + std::to_string(s));
      Codes::Explanation x = codes.Explain(extra, b);
      EXPECT_EQ(x.kind, Codes::Explanation::kExtra);
      ASSERT_EQ(x.fitting, 1u);
      EXPECT_EQ(x.updates[0], std::make_pair(w, s));
    }
  }
}

TEST(UpdateCodesTest, AShortTensorNarrowsTheUpdatesDown) {
  const uint64_t seed = 9;
  const Codes codes(seed, 3, 40);
  const std::vector<uint8_t> b = ElementCodes(seed, 1, 1);  // 1 element: 2 of the 32 bits
  std::vector<float> g = Gradient(codes, b, 1, 5);
  Codes::Explanation e = codes.Explain(std::vector<double>(g.begin(), g.end()), b);
  EXPECT_EQ(e.kind, Codes::Explanation::kMissing);
  EXPECT_GT(e.fitting, 1u);
  EXPECT_LT(e.fitting, 120u);
  EXPECT_EQ(e.updates.size(), 8u) << "the first 8 that fit are listed";
  for (const auto& [w, s] : e.updates) EXPECT_EQ(Gradient(codes, b, w, s), g) << w << " " << s;
  EXPECT_EQ(DescribeUpdates(e).rfind("one of " + std::to_string(e.fitting) + " updates (", 0), 0u);
}

TEST(UpdateCodesTest, DifferencesNoSingleUpdateExplainsAreNotExplained) {
  const uint64_t seed = 9;
  const Codes codes(seed, 3, 40);
  const std::vector<uint8_t> b = ElementCodes(seed, 0, 64);
  std::vector<float> g = Gradient(codes, b, 2, 3);
  std::vector<double> diff(g.begin(), g.end());
  std::vector<double> two = diff;  // two updates missing
  std::vector<float> g2 = Gradient(codes, b, 0, 1);
  for (size_t i = 0; i < two.size(); ++i) two[i] += g2[i];
  EXPECT_EQ(codes.Explain(two, b).kind, Codes::Explanation::kNone);
  std::vector<double> mixed = diff;  // signs disagree
  mixed[7] = -mixed[7];
  EXPECT_EQ(codes.Explain(mixed, b).kind, Codes::Explanation::kNone);
  std::vector<double> partial = diff;  // one element right
  partial[10] = 0;
  EXPECT_EQ(codes.Explain(partial, b).kind, Codes::Explanation::kNone);
  std::vector<double> halves(diff.size(), 0.5);
  EXPECT_EQ(codes.Explain(halves, b).kind, Codes::Explanation::kNone);
  EXPECT_EQ(codes.Explain({}, {}).kind, Codes::Explanation::kNone);
}

// The bound is where float32 itself stops: every partial sum W x K of a sync step (K <= 4W)
// converts to float32 and back unchanged exactly when SyncSumsExact says so.
TEST(UpdateCodesTest, SyncSumsExactIsWhereAStepsPartialSumsStayExact) {
  std::vector<uint32_t> counts = {8191, 12288, 65535, 65536, 1u << 22, (1u << 22) + 2, 1u << 23};
  for (uint32_t w = 1; w <= 4100; ++w) counts.push_back(w);
  int inexact = 0;
  for (uint32_t w : counts) {
    bool exact = true;
    for (uint64_t k = 1; k <= 4 * uint64_t{w} && exact; ++k) {
      const uint64_t sum = w * k;
      exact = static_cast<uint64_t>(static_cast<float>(sum)) == sum;
    }
    inexact += !exact;
    EXPECT_EQ(SyncSumsExact(w), exact) << w << " workers";
  }
  EXPECT_EQ(inexact, 1332);  // from 2049 up, and 8191, 65535, 2^22 + 2, 2^23
  EXPECT_TRUE(SyncSumsExact(12288));  // 3 x 4096
  EXPECT_FALSE(SyncSumsExact(2049));
}

TEST(UpdateCodesTest, RunsPastExactArithmeticAreRefused) {
  const UpdatesSettings sync{.steps = 10, .sync = true};
  const UpdatesSettings async{.steps = 10, .sync = false};
  EXPECT_TRUE(CheckExact(sync, 2048).ok());
  EXPECT_TRUE(CheckExact(sync, 65536).ok());
  EXPECT_TRUE(CheckExact(async, 2049).ok());
  const absl::Status s = CheckExact(sync, 2049);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--async"), std::string::npos) << s;
  EXPECT_EQ(CheckExact({.steps = 1000000, .sync = false}, 5).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psbench::update_codes
