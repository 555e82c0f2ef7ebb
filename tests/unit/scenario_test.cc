#include "bench/scenario.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

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

// A field this psbench does not know is refused, named: a launcher of another version meant
// something by it. Every field ScenarioToJson writes, options included, is known.
TEST(ScenarioTest, AnUnknownFieldIsRefusedByName) {
  Scenario s;
  s.transport = "grpc+verbs";
  s.sweep = std::make_pair(uint64_t{1}, uint64_t{8});
  s.load = {LoadKind::kPoisson, 100};
  s.load_sweep = LoadSweep{LoadKind::kPoisson, 100, 400, 2};
  nlohmann::json j = ScenarioToJson(s);
  for (const char* key : {"sizes", "load", "load_sweep", "max_in_flight", "rdma"}) EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_TRUE(ScenarioFromJson(j).ok()) << ScenarioFromJson(j).status();
  // At the top, and inside the objects it holds.
  for (const char* object : {"", "load", "load_sweep", "rdma"}) {
    nlohmann::json k = j;
    (*object ? k[object] : k)["pacing"] = "fast";
    auto refused = ScenarioFromJson(k);
    ASSERT_FALSE(refused.ok()) << object;
    EXPECT_NE(refused.status().message().find("'pacing' is not a field psbench "), absl::string_view::npos)
        << refused.status();
    EXPECT_NE(refused.status().message().find("another version"), absl::string_view::npos) << refused.status();
    if (*object) EXPECT_NE(refused.status().message().find(object), absl::string_view::npos) << refused.status();
  }
  EXPECT_FALSE(ScenarioFromJson(nlohmann::json::array()).ok());
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

// Every error names its field: nlohmann's own said "type must be number, but is null" or
// "key 'transport' not found".
TEST(ScenarioTest, AFieldOfTheWrongTypeOrMissingIsNamed) {
  Scenario verbs;
  verbs.transport = "grpc+verbs";
  verbs.load = {LoadKind::kPoisson, 100};
  const nlohmann::json base = ScenarioToJson(verbs);
  auto error = [&base](const std::function<void(nlohmann::json&)>& change) {
    nlohmann::json j = base;
    change(j);
    return std::string(ScenarioFromJson(j).status().message());
  };
  EXPECT_EQ(error([](auto& j) { j["rpc_timeout_s"] = nullptr; }), "scenario: 'rpc_timeout_s' must be a number (got null)");
  EXPECT_EQ(error([](auto& j) { j.erase("transport"); }), "scenario: 'transport' is missing");
  EXPECT_EQ(error([](auto& j) { j["ps"] = {1}; }), "scenario: 'ps' must be a list of HOST:PORT strings (got [1])");
  EXPECT_EQ(error([](auto& j) { j["busy_poll"] = "yes"; }), "scenario: 'busy_poll' must be true or false (got \"yes\")");
  EXPECT_EQ(error([](auto& j) { j["validate"] = 1; }), "scenario: 'validate' must be true or false (got 1)");
  // A field of a nested object is named with its object.
  EXPECT_EQ(error([](auto& j) { j["load"]["rate"] = "fast"; }), "scenario: 'load.rate' must be a number (got \"fast\")");
  EXPECT_EQ(error([](auto& j) { j["load"].erase("kind"); }), "scenario: 'load.kind' is missing");
  EXPECT_EQ(error([](auto& j) {
              j.erase("load");
              j["load_sweep"] = {{"kind", "poisson"}, {"lo", 10}, {"hi", nullptr}, {"factor", 2}};
            }),
            "scenario: 'load_sweep.hi' must be a number (got null)");
  EXPECT_EQ(error([](auto& j) { j.erase("iterations"); }), "scenario: 'iterations' is missing");
  EXPECT_EQ(error([](auto& j) { j["rdma"]["device"] = 3; }), "rdma: 'device' must be a string (got 3)");
  // An object given as something else: its fields were said to be missing, or (rdma) the
  // defaults used.
  EXPECT_EQ(error([](auto& j) { j["rdma"] = "mlx5_1"; }), "rdma: must be an object of --rdma-* settings (got \"mlx5_1\")");
  EXPECT_EQ(error([](auto& j) { j["load"] = 5; }), "scenario: 'load' must be an object");
}

// Found by tests/fuzz/scenario_json_fuzz: nlohmann's get<int>() of 1e10 is undefined
// behaviour (UBSan: outside the range of int), and 2^32+16 silently became 16.
TEST(ScenarioTest, NumbersOutOfRangeAreErrors) {
  for (auto [key, value] : std::vector<std::pair<const char*, nlohmann::json>>{
           {"window", 1e10}, {"window", uint64_t{1} << 32 | 16}, {"buffers", 2.5},
           {"small", -1}, {"iterations", 1e300}, {"num_workers", "3"}}) {
    auto j = ScenarioToJson(Scenario());
    j[key] = value;
    auto s = ScenarioFromJson(j);
    ASSERT_FALSE(s.ok()) << key << "=" << value;
    EXPECT_NE(s.status().message().find(key), absl::string_view::npos) << s.status();
  }
  Scenario verbs;
  verbs.transport = "grpc+verbs";
  auto j = ScenarioToJson(verbs);
  j["rdma"]["queue_depth"] = 1e12;
  auto s = ScenarioFromJson(j);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("queue_depth"), absl::string_view::npos) << s.status();
}

// Found by tests/fuzz/scenario_json_fuzz: a scenario file's sweep skipped ParseSweep's checks,
// and MIN 0 or MAX near 2^64 made Plans() double forever (the worker hung, memory growing).
TEST(ScenarioTest, ScenarioFileSweepIsChecked) {
  for (auto [lo, hi] : std::vector<std::pair<uint64_t, uint64_t>>{
           {0, 8}, {1, ~uint64_t{0}}, {8, 4}, {1, (uint64_t{1} << 30) + 1}}) {
    Scenario s;
    s.sweep = std::make_pair(lo, hi);
    auto back = ScenarioFromJson(ScenarioToJson(s));
    ASSERT_TRUE(back.ok()) << back.status();
    absl::Status v = ValidateScenario(*back);
    EXPECT_FALSE(v.ok()) << lo << ":" << hi;
    EXPECT_NE(v.message().find("--sizes"), absl::string_view::npos) << v;
  }
  auto j = ScenarioToJson(Scenario());
  j["sizes"] = {1};
  EXPECT_FALSE(ScenarioFromJson(j).ok());
  j["sizes"] = {1.5, 8};
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

// A launcher whose workers run elsewhere checks an explicit budget only; the default (half of
// what this process may use) is each worker's to check on its own host.
TEST(ScenarioTest, PayloadMemoryDefaultIsCheckedWhereTheWorkersRun) {
  Scenario s;
  s.sweep = std::make_pair(uint64_t{1} << 30, uint64_t{1} << 30);  // 1 GiB, over a 1 MiB budget
  s.max_payload_memory = 1 << 20;
  for (auto check : {Scenario::PayloadMemoryCheck::kThisProcess, Scenario::PayloadMemoryCheck::kExplicitOnly}) {
    auto plans = s.Plans(check);
    ASSERT_FALSE(plans.ok());
    EXPECT_NE(plans.status().message().find("--max-payload-memory=1MiB"), absl::string_view::npos)
        << plans.status();
  }
  s.max_payload_memory = 0;
  EXPECT_TRUE(s.Plans(Scenario::PayloadMemoryCheck::kExplicitOnly).ok());
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
