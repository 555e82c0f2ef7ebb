#include "bench/scenario.h"

#include <gtest/gtest.h>

namespace psbench {
namespace {

TEST(ScenarioTest, JsonRoundTripKeepsEveryField) {
  Scenario s;
  s.benchmark = Benchmark::kThroughput;
  s.mode = WireMode::kSerialized;
  s.payload.scheme = Scheme::kSkew;
  s.payload.categories = {Category::kLarge, Category::kSmall};
  s.payload.small_bytes = 100;
  s.payload.skew_bias = Category::kSmall;
  s.payload.seed = 99;
  s.warmup = absl::Milliseconds(500);
  s.iterations = 77;
  s.window = 3;
  s.outstanding = 5;
  s.validate = true;
  s.ps = {"a:1", "b:2"};
  s.num_workers = 3;
  s.worker_index = 2;
  s.run_id = "r";
  auto back = ScenarioFromJson(ScenarioToJson(s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(ScenarioToJson(*back), ScenarioToJson(s));
  s.sweep = std::make_pair(uint64_t{1}, uint64_t{4096});
  back = ScenarioFromJson(ScenarioToJson(s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->sweep, s.sweep);
}

TEST(ScenarioTest, MalformedJsonIsAnErrorNotACrash) {
  EXPECT_FALSE(ScenarioFromJson(nlohmann::json::object()).ok());
  auto j = ScenarioToJson(Scenario());
  j["window"] = "many";
  EXPECT_FALSE(ScenarioFromJson(j).ok());
  j = ScenarioToJson(Scenario());
  j["benchmark"] = "speed";
  EXPECT_FALSE(ScenarioFromJson(j).ok());
}

TEST(ScenarioTest, SweepDoublesAndEndsAtMax) {
  Scenario s;
  s.sweep = std::make_pair(uint64_t{3}, uint64_t{20});
  auto plans = s.Plans();
  ASSERT_TRUE(plans.ok());
  std::vector<uint64_t> sizes;
  for (const auto& p : *plans) sizes.push_back(p.Bytes(0));
  EXPECT_EQ(sizes, (std::vector<uint64_t>{3, 6, 12, 20}));
}

TEST(ScenarioTest, ParseSweepErrorsNameTheFlag) {
  for (const char* bad : {"", "1", "4K:1K", "0:8", "a:b", "1:2:3", "1:2G"}) {
    auto r = ParseSweep(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--sizes"), absl::string_view::npos);
  }
  EXPECT_EQ(*ParseSweep("1:4M"), std::make_pair(uint64_t{1}, uint64_t{4} << 20));
}

TEST(ScenarioTest, ValidationNamesFlags) {
  Scenario s;
  s.window = 0;
  EXPECT_NE(ValidateScenario(s).message().find("--window"), absl::string_view::npos);
  s = Scenario();
  s.ps = {"a:1", "b:1"};
  EXPECT_NE(ValidateScenario(s).message().find("point-to-point"), absl::string_view::npos);
  s = Scenario();
  s.worker_index = 1;
  EXPECT_NE(ValidateScenario(s).message().find("--worker-index"), absl::string_view::npos);
}

}  // namespace
}  // namespace psbench
