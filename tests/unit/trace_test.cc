// LoadTrace: every accepted form, the reference traces and the errors.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "payloads/spec.h"

namespace psbench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uint64_t kGiB = uint64_t{1} << 30;

std::string ReferenceTrace(const std::string& model) {
  return PSBENCH_SOURCE_DIR "/payloads/traces/" + model + ".json";
}

class TraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("psbench_trace_" + std::to_string(::getpid()) + "_" + info->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& content) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }

  // Loads `content` and returns the plan, failing the test on error.
  PayloadPlan Load(const std::string& content) {
    absl::StatusOr<PayloadPlan> plan = LoadTrace(Write("trace.json", content));
    EXPECT_TRUE(plan.ok()) << plan.status();
    return plan.ok() ? *plan : PayloadPlan{};
  }

  // Loads `content`, expects InvalidArgument and returns the message after the file prefix.
  std::string Error(const std::string& content) {
    const std::string path = Write("bad.json", content);
    absl::StatusOr<PayloadPlan> plan = LoadTrace(path);
    EXPECT_FALSE(plan.ok()) << content;
    if (plan.ok()) return "";
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << plan.status();
    const std::string message(plan.status().message());
    EXPECT_THAT(message, StartsWith("trace file '" + path + "': "));
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    return message.substr(std::min(message.size(), ("trace file '" + path + "': ").size()));
  }

  static std::vector<std::string> Names(const PayloadPlan& plan, size_t payload) {
    std::vector<std::string> names;
    for (const BufferPlan& b : plan.payloads.at(payload)) names.push_back(b.name);
    return names;
  }

  std::filesystem::path dir_;
};

// ---- accepted forms --------------------------------------------------------------------------

TEST_F(TraceTest, ListOfSizes) {
  PayloadPlan plan = Load("[10, 10240, 1048576]");
  ASSERT_EQ(plan.payloads.size(), 1u);
  EXPECT_THAT(plan.Sizes(0), ElementsAre(10, 10240, 1048576));
  EXPECT_THAT(Names(plan, 0), ElementsAre("", "", ""));
}

TEST_F(TraceTest, ListOfGroups) {
  PayloadPlan plan = Load("[[10, 20], [1048576]]");
  ASSERT_EQ(plan.payloads.size(), 2u);
  EXPECT_THAT(plan.Sizes(0), ElementsAre(10, 20));
  EXPECT_THAT(plan.Sizes(1), ElementsAre(1048576));
  EXPECT_EQ(plan.TotalBuffers(), 3u);
}

TEST_F(TraceTest, ListOfNamedTensors) {
  PayloadPlan plan =
      Load(R"([{"name": "fc.weight", "bytes": 4096}, {"name": "fc.bias", "bytes": 16},
                              {"bytes": 8, "shape": [2]}])");
  ASSERT_EQ(plan.payloads.size(), 1u);
  EXPECT_THAT(plan.Sizes(0), ElementsAre(4096, 16, 8));
  EXPECT_THAT(Names(plan, 0), ElementsAre("fc.weight", "fc.bias", ""));
}

TEST_F(TraceTest, GroupsMayMixSizesAndTensors) {
  PayloadPlan plan = Load(R"([[1, {"name": "w", "bytes": 2}], [{"name": "b", "bytes": 3}]])");
  ASSERT_EQ(plan.payloads.size(), 2u);
  EXPECT_THAT(plan.Sizes(0), ElementsAre(1, 2));
  EXPECT_THAT(Names(plan, 0), ElementsAre("", "w"));
  EXPECT_THAT(Names(plan, 1), ElementsAre("b"));
}

TEST_F(TraceTest, PsbenchFormat) {
  PayloadPlan plan = Load(R"({
    "format": "psbench-trace/1",
    "model": "tiny", "step": 3,
    "groups": [
      {"tensors": [{"name": "fc2.weight", "bytes": 40960, "ready_ms": 1.5},
                   {"name": "fc2.bias", "bytes": 40, "ready_ms": 1.6}]},
      {"name": "second", "tensors": [{"name": "fc1.weight", "bytes": 1048576}]}
    ]})");
  ASSERT_EQ(plan.payloads.size(), 2u);
  EXPECT_THAT(plan.Sizes(0), ElementsAre(40960, 40));
  EXPECT_THAT(Names(plan, 0), ElementsAre("fc2.weight", "fc2.bias"));
  EXPECT_THAT(plan.Sizes(1), ElementsAre(1048576));
  EXPECT_THAT(Names(plan, 1), ElementsAre("fc1.weight"));
}

TEST_F(TraceTest, PsbenchFormatFieldIsOptional) {
  PayloadPlan plan = Load(R"({"groups": [{"tensors": [{"name": "a", "bytes": 1}]}]})");
  EXPECT_THAT(plan.Sizes(0), ElementsAre(1));
}

TEST_F(TraceTest, ParamsInGradientReadyOrder) {
  PayloadPlan plan = Load(R"({"model": "m", "params": [
      {"name": "a", "bytes": 100, "grad_ready_order": 2},
      {"name": "b", "bytes": 200, "grad_ready_order": 0},
      {"name": "c", "bytes": 300, "grad_ready_order": 1}]})");
  ASSERT_EQ(plan.payloads.size(), 1u);
  EXPECT_THAT(Names(plan, 0), ElementsAre("b", "c", "a"));
  EXPECT_THAT(plan.Sizes(0), ElementsAre(200, 300, 100));
}

TEST_F(TraceTest, ParamsInFileOrderWhenAnOrderIsMissing) {
  PayloadPlan plan = Load(R"({"params": [
      {"name": "a", "bytes": 100, "grad_ready_order": 2},
      {"name": "b", "bytes": 200},
      {"name": "c", "bytes": 300, "grad_ready_order": 1}]})");
  EXPECT_THAT(Names(plan, 0), ElementsAre("a", "b", "c"));
}

TEST_F(TraceTest, SizeLimitsAreInclusive) {
  EXPECT_THAT(Load("[1, 1073741824]").Sizes(0), ElementsAre(1, kGiB));
}

// One payload holds at most kMaxBuffersPerPayload tensors, in every form of trace: a small
// file must not ask for millions of buffers.
TEST_F(TraceTest, TensorsPerPayloadAreBounded) {
  std::string ones = "1";
  for (int i = 1; i < kMaxBuffersPerPayload; ++i) ones += ",1";
  EXPECT_EQ(Load("[" + ones + "]").payloads[0].size(), static_cast<size_t>(kMaxBuffersPerPayload));
  ones += ",1";
  EXPECT_THAT(Error("[" + ones + "]"), HasSubstr("has 100001 tensors, over the 100000 one payload may hold"));
  EXPECT_THAT(Error("[[1], [" + ones + "]]"), HasSubstr("group 1 has 100001 tensors"));
  std::string params = R"({"name": "w", "bytes": 4})";
  std::string many = params;
  for (int i = 0; i < kMaxBuffersPerPayload; ++i) many += "," + params;
  EXPECT_THAT(Error(R"({"params": [)" + many + "]}"), HasSubstr("'params' has 100001 tensors"));
}

TEST_F(TraceTest, ResolvePlanReadsTheTrace) {
  PayloadSpec spec;
  spec.scheme = Scheme::kTrace;
  spec.trace_path = Write("t.json", "[[10], [20, 30]]");
  absl::StatusOr<PayloadPlan> plan = ResolvePlan(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->payloads.size(), 2u);
  EXPECT_EQ(plan->TotalBytes(), 60u);
  EXPECT_EQ(plan->Summary(), "1x10B; 1x30B 1x20B");
}

// ---- reference traces ------------------------------------------------------------------------

TEST(ReferenceTraceTest, Vgg11) {
  absl::StatusOr<PayloadPlan> plan = LoadTrace(ReferenceTrace("vgg11"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->payloads.size(), 1u);
  EXPECT_EQ(plan->TotalBuffers(), 22u);
  EXPECT_EQ(plan->TotalBytes(), 531453344u);
  // Backward produces the classifier's gradients first.
  EXPECT_EQ(plan->payloads[0].front().name, "classifier.6.bias");
  EXPECT_EQ(plan->payloads[0].back().name, "features.0.bias");
}

TEST(ReferenceTraceTest, AllModelsMatchTheirTotals) {
  for (const std::string model : {"alexnet", "vgg11", "vgg16", "inception_v3"}) {
    SCOPED_TRACE(model);
    const std::string path = ReferenceTrace(model);
    std::ifstream in(path);
    ASSERT_TRUE(in) << "cannot open " << path;
    const nlohmann::json ref = nlohmann::json::parse(in);

    absl::StatusOr<PayloadPlan> plan = LoadTrace(path);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->payloads.size(), 1u);
    EXPECT_EQ(plan->TotalBytes(), ref["total_bytes"].get<uint64_t>());
    EXPECT_EQ(plan->TotalBuffers(), ref["num_tensors"].get<size_t>());
    // Buffer i is the parameter whose gradient was ready i-th.
    for (const auto& param : ref["params"]) {
      const size_t order = param["grad_ready_order"].get<size_t>();
      ASSERT_LT(order, plan->payloads[0].size());
      EXPECT_EQ(plan->payloads[0][order].name, param["name"].get<std::string>());
      EXPECT_EQ(plan->payloads[0][order].bytes, param["bytes"].get<uint64_t>());
    }
  }
}

TEST(ReferenceTraceTest, Totals) {
  const std::pair<const char*, uint64_t> totals[] = {{"alexnet", 244403360},
                                                     {"vgg11", 531453344},
                                                     {"vgg16", 553430176},
                                                     {"inception_v3", 95338272}};
  for (const auto& [model, bytes] : totals) {
    EXPECT_EQ(LoadTrace(ReferenceTrace(model)).value().TotalBytes(), bytes) << model;
  }
}

// ---- errors ----------------------------------------------------------------------------------

TEST_F(TraceTest, MissingFile) {
  const std::string path = (dir_ / "x.json").string();
  absl::StatusOr<PayloadPlan> plan = LoadTrace(path);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(plan.status().message(),
            "trace file '" + path + "': cannot open: No such file or directory");
}

TEST_F(TraceTest, Directory) {
  absl::StatusOr<PayloadPlan> plan = LoadTrace(dir_.string());
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("directory"));
}

TEST_F(TraceTest, MalformedJson) {
  for (const char* text : {"", "   ", "[1, 2", "{", "[1,]", "nul", "garbage", "[1] [2]", "{'a': 1}",
                           "[10, 20] trailing", "\xff\xfe"}) {
    EXPECT_THAT(Error(text), StartsWith("not valid JSON")) << text;
  }
  EXPECT_THAT(Error("[1,\n 2,\n x]"), HasSubstr("line 3"));
}

TEST_F(TraceTest, WrongTopLevelShape) {
  for (const char* text : {"10", "\"x\"", "null", "true", "{}", R"({"tensors": [1]})"}) {
    EXPECT_THAT(Error(text), HasSubstr("expected a list of sizes")) << text;
  }
  EXPECT_THAT(Error(R"({"groups": [], "params": []})"), HasSubstr("both"));
}

TEST_F(TraceTest, Empty) {
  EXPECT_THAT(Error("[]"), HasSubstr("no tensors"));
  EXPECT_THAT(Error("[[]]"), HasSubstr("group 0 has no tensors"));
  EXPECT_THAT(Error("[[1], []]"), HasSubstr("group 1 has no tensors"));
  EXPECT_THAT(Error(R"({"groups": []})"), HasSubstr("'groups' is empty"));
  EXPECT_THAT(Error(R"({"groups": [{"tensors": [1]}, {"tensors": []}]})"),
              HasSubstr("group 1 has no tensors"));
  EXPECT_THAT(Error(R"({"params": []})"), HasSubstr("no tensors"));
}

TEST_F(TraceTest, BadSizes) {
  // Numbers that are not sizes.
  for (const char* value : {"0", "-1", "1.5", "10.0", "1073741825", "1e30", "18446744073709551616",
                            "-9223372036854775808"}) {
    EXPECT_THAT(Error(std::string("[1, 2, 3, ") + value + "]"),
                HasSubstr("entry 3: size must be an integer in [1, 1GiB]"))
        << value;
  }
  // Any non-size value of "bytes".
  for (const char* value : {"0", "-1", "1.5", "10.0", "\"10\"", "true", "null", "1073741825",
                            "1e30", "18446744073709551616", "-9223372036854775808", "[1]", "{}"}) {
    EXPECT_THAT(Error(std::string(R"([1, 2, 3, {"name": "t", "bytes": )") + value + "}]"),
                HasSubstr("entry 3: 'bytes' must be an integer in [1, 1GiB]"))
        << value;
  }
  // Non-numbers where a size is expected.
  for (const char* value : {"\"10\"", "true", "null"}) {
    EXPECT_THAT(Error(std::string("[1, 2, 3, ") + value + "]"),
                HasSubstr("entry 3: expected a size or a {\"name\", \"bytes\"} object"))
        << value;
  }
  EXPECT_THAT(Error("[[1], [2, 0]]"), HasSubstr("group 1, entry 1: size must be an integer"));
  EXPECT_THAT(Error(R"({"groups": [{"tensors": [{"name": "a", "bytes": -5}]}]})"),
              HasSubstr("group 0, entry 0: 'bytes' must be an integer in [1, 1GiB] (got -5)"));
  EXPECT_THAT(Error(R"({"params": [{"name": "a", "bytes": 4}, {"name": "b", "bytes": 0}]})"),
              HasSubstr("entry 1: 'bytes' must be an integer"));
}

TEST_F(TraceTest, BadTensors) {
  EXPECT_THAT(Error(R"([{"name": "a"}])"), HasSubstr("entry 0: missing 'bytes'"));
  EXPECT_THAT(Error(R"([{"name": 5, "bytes": 1}])"), HasSubstr("entry 0: 'name' must be a string"));
  EXPECT_THAT(Error(R"([{"bytes": 1, "ready_ms": "soon"}])"), HasSubstr("'ready_ms'"));
  EXPECT_THAT(Error(R"([1, "two"])"), HasSubstr("entry 1: expected a size or"));
  EXPECT_THAT(Error("[1, [2]]"), HasSubstr("entry 1: expected a size or a tensor object"));
  EXPECT_THAT(Error("[[1], 2]"), HasSubstr("entry 1: expected a list of tensors"));
  EXPECT_THAT(Error("[[[1]]]"), HasSubstr("group 0, entry 0"));
  EXPECT_THAT(Error(R"({"params": [1]})"), HasSubstr("entry 0: expected a"));
  EXPECT_THAT(Error(R"({"params": {"a": 1}})"), HasSubstr("'params' must be a list"));
  EXPECT_THAT(Error(R"({"params": [{"name": "a", "bytes": 1, "grad_ready_order": -1}]})"),
              HasSubstr("entry 0: 'grad_ready_order' must be a non-negative integer"));
  EXPECT_THAT(Error(R"({"params": [{"name": "a", "bytes": 1, "grad_ready_order": 0.5}]})"),
              HasSubstr("'grad_ready_order'"));
}

TEST_F(TraceTest, BadGroups) {
  EXPECT_THAT(Error(R"({"groups": {"tensors": [1]}})"), HasSubstr("'groups' must be a list"));
  EXPECT_THAT(Error(R"({"groups": [[1, 2]]})"),
              HasSubstr("group 0: expected an object with a 'tensors' list"));
  EXPECT_THAT(Error(R"({"groups": [{"tensors": [1]}, {"sizes": [1]}]})"),
              HasSubstr("group 1: expected"));
  EXPECT_THAT(Error(R"({"groups": [{"tensors": 1}]})"), HasSubstr("group 0: expected"));
}

TEST_F(TraceTest, BadFormat) {
  EXPECT_THAT(Error(R"({"format": "psbench-trace/3", "groups": [{"tensors": [1]}]})"),
              HasSubstr("unsupported 'format' \"psbench-trace/3\" (this psbench reads \"psbench-trace/1\" and "
                        "\"psbench-trace/2\")"));
  EXPECT_THAT(Error(R"({"format": 1, "groups": [{"tensors": [1]}]})"), HasSubstr("'format'"));
  EXPECT_THAT(Error(R"({"format": "psbench-trace/2", "groups": [{"tensors": [1]}]})"),
              HasSubstr("psbench-trace/2 has 'tensors' and 'steps', not 'groups'"));
  EXPECT_THAT(Error(R"({"tensors": [], "steps": []})"), HasSubstr("has 'steps' but no \"format\""));
  EXPECT_THAT(Error(R"({"format": "psbench-trace/1", "groups": [{"tensors": [1]}], "steps": []})"),
              HasSubstr("'steps' belongs to \"psbench-trace/2\", not \"psbench-trace/1\""));
}

// ---- psbench-trace/2: a captured training job ---------------------------------------------------

// Three tensors, two steps; tensor 1 has no gradient in step 1, tensor 2 is ready first.
constexpr char kStepTrace[] = R"({
  "format": "psbench-trace/2",
  "tensors": [
    {"name": "conv.weight", "shape": [4, 2], "dtype": "float32", "bytes": 32},
    {"name": "conv.bias", "shape": [4], "dtype": "float16", "bytes": 8},
    {"name": "fc.weight", "shape": [10, 10], "dtype": "float32", "bytes": 400}
  ],
  "buckets": {"tensors": [[2, 0], [1]]},
  "steps": [
    {"start_us": 0, "compute_us": 1000, "ready_us": [700.5, 800, 500], "bucket_ready_us": [700.5, 800]},
    {"start_us": 1500, "compute_us": 900, "ready_us": [650, null, 450.25], "bucket_ready_us": [650, null]}
  ]
})";

TEST_F(TraceTest, StepTraceGivesTheFirstStepsReadyOrderAndItsTiming) {
  PayloadPlan plan = Load(kStepTrace);
  ASSERT_EQ(plan.payloads.size(), 1u);
  EXPECT_THAT(Names(plan, 0), ElementsAre("fc.weight", "conv.weight", "conv.bias"));
  EXPECT_THAT(plan.Sizes(0), ElementsAre(400, 32, 8));
  ASSERT_NE(plan.timing, nullptr);
  const TraceTiming& t = *plan.timing;
  ASSERT_EQ(t.tensors.size(), 3u);
  EXPECT_EQ(t.tensors[1].name, "conv.bias");
  EXPECT_THAT(t.dtypes, ElementsAre("float32", "float16", "float32"));
  ASSERT_EQ(t.buckets.size(), 2u);
  EXPECT_THAT(t.buckets[0], ElementsAre(2, 0));
  ASSERT_EQ(t.steps.size(), 2u);
  EXPECT_DOUBLE_EQ(t.steps[1].start_us, 1500);
  EXPECT_DOUBLE_EQ(t.steps[1].compute_us, 900);
  EXPECT_DOUBLE_EQ(*t.steps[0].ready_us[0], 700.5);
  EXPECT_FALSE(t.steps[1].ready_us[1].has_value());
  EXPECT_DOUBLE_EQ(*t.steps[1].ready_us[2], 450.25);
}

TEST_F(TraceTest, StepTraceWithoutBucketsOrShapes) {
  PayloadPlan plan = Load(R"({"format": "psbench-trace/2",
    "tensors": [{"name": "a", "dtype": "bfloat16", "bytes": 6}, {"name": "b", "dtype": "int64", "bytes": 8}],
    "steps": [{"start_us": 0, "compute_us": 10, "ready_us": [null, 3]},
              {"start_us": 10, "compute_us": 10, "ready_us": [4, 3]}]})");
  // "a" had no gradient in the first step: after those that had.
  EXPECT_THAT(Names(plan, 0), ElementsAre("b", "a"));
  ASSERT_NE(plan.timing, nullptr);
  EXPECT_TRUE(plan.timing->buckets.empty());
}

TEST_F(TraceTest, StepTraceLeavesOutTensorsThatNeverHadAGradient) {
  PayloadPlan plan = Load(R"({"format": "psbench-trace/2",
    "tensors": [{"name": "a", "dtype": "float32", "bytes": 4}, {"name": "frozen", "dtype": "float32", "bytes": 4}],
    "steps": [{"start_us": 0, "compute_us": 10, "ready_us": [5, null]}]})");
  EXPECT_THAT(Names(plan, 0), ElementsAre("a"));
  EXPECT_EQ(plan.timing->tensors.size(), 2u);
}

TEST_F(TraceTest, BadStepTraces) {
  const std::string head = R"({"format": "psbench-trace/2", "tensors": [{"name": "a", "dtype": "float32", "bytes": 4}], )";
  auto steps = [&head](const std::string& list) { return head + R"("steps": )" + list + "}"; };
  // Missing times.
  EXPECT_THAT(Error(steps(R"([{"start_us": 0, "ready_us": [1]}])")), HasSubstr("step 0: missing 'compute_us'"));
  EXPECT_THAT(Error(steps(R"([{"compute_us": 5, "ready_us": [1]}])")), HasSubstr("step 0: missing 'start_us'"));
  EXPECT_THAT(Error(steps(R"([{"start_us": 0, "compute_us": 5}])")), HasSubstr("step 0: missing 'ready_us'"));
  EXPECT_THAT(Error(steps(R"([{"start_us": 0, "compute_us": 5, "ready_us": []}])")),
              HasSubstr("step 0: 'ready_us' must list 1 times"));
  EXPECT_THAT(Error(steps(R"([{"start_us": 0, "compute_us": 5, "ready_us": [null]}])")),
              HasSubstr("step 0: no tensor has a ready time"));
  EXPECT_THAT(Error(steps("[]")), HasSubstr("missing 'steps'"));
  // Times out of order, or out of range.
  EXPECT_THAT(Error(steps(R"([{"start_us": 0, "compute_us": 5, "ready_us": [1]},
                              {"start_us": 3, "compute_us": 5, "ready_us": [1]}])")),
              HasSubstr("step 1 starts at 3 us, before step 0 ended (at 5 us): steps out of order"));
  EXPECT_THAT(Error(steps(R"([{"start_us": 0, "compute_us": 5, "ready_us": [6]}])")),
              HasSubstr("step 0, tensor 0: ready at 6 us, after the step's compute ended (5 us)"));
  EXPECT_THAT(Error(steps(R"([{"start_us": 0, "compute_us": 5, "ready_us": [-1]}])")),
              HasSubstr("step 0, tensor 0: ready time must be a number of microseconds >= 0"));
  EXPECT_THAT(Error(steps(R"([{"start_us": 0, "compute_us": 0, "ready_us": [0]}])")),
              HasSubstr("'compute_us' must be > 0"));
  // A replay waits out each step's compute: a year's worth kept a run waiting silently.
  EXPECT_THAT(Error(steps(R"([{"start_us": 0, "compute_us": 1e13, "ready_us": [1]}])")),
              HasSubstr("step 0: 'compute_us' is 10000000000000 us, over an hour"));
  EXPECT_THAT(Error(steps(R"([{"start_us": 0, "compute_us": 5, "ready_us": [1]},
                              {"start_us": 5, "compute_us": 3600000001, "ready_us": [1]}])")),
              HasSubstr("step 1: 'compute_us' is 3600000001 us, over an hour"));
  EXPECT_THAT(Error(steps(R"([{"start_us": "0", "compute_us": 5, "ready_us": [1]}])")),
              HasSubstr("'start_us' must be a number"));
  // Tensors: unknown dtype, sizes that disagree, missing fields.
  const std::string ok_steps = R"("steps": [{"start_us": 0, "compute_us": 5, "ready_us": [1]}]})";
  auto tensor = [&ok_steps](const std::string& t) {
    return R"({"format": "psbench-trace/2", "tensors": [)" + t + "], " + ok_steps;
  };
  EXPECT_THAT(Error(tensor(R"({"name": "a", "dtype": "float33", "bytes": 4})")),
              HasSubstr("tensor 0: unknown dtype \"float33\""));
  EXPECT_THAT(Error(tensor(R"({"name": "a", "dtype": "float32", "shape": [3], "bytes": 4})")),
              HasSubstr("tensor 0: 'bytes' is 4 but shape [3] of float32 makes 12"));
  EXPECT_THAT(Error(tensor(R"({"name": "a", "dtype": "float32"})")), HasSubstr("tensor 0: missing 'bytes'"));
  EXPECT_THAT(Error(tensor(R"({"dtype": "float32", "bytes": 4})")), HasSubstr("tensor 0: missing 'name'"));
  EXPECT_THAT(Error(tensor(R"({"name": "a", "bytes": 4})")), HasSubstr("tensor 0: missing 'dtype'"));
  EXPECT_THAT(Error(tensor(R"({"name": "a", "dtype": "float32", "bytes": 0})")), HasSubstr("must be an integer in [1, 1GiB]"));
  EXPECT_THAT(Error(tensor(R"({"name": "a", "dtype": "float32", "shape": [-1], "bytes": 4})")),
              HasSubstr("'shape' must hold sizes >= 0"));
  // A product that would wrap around to exactly 'bytes' in 64 bits.
  EXPECT_THAT(Error(tensor(R"({"name": "a", "dtype": "uint8", "shape": [1073741824, 17179869185], "bytes": 1073741824})")),
              HasSubstr("is over 1GiB, the most one tensor may be"));
  // Buckets: coverage and ready times.
  const std::string two = R"({"format": "psbench-trace/2", "tensors": [{"name": "a", "dtype": "float32", "bytes": 4},
    {"name": "b", "dtype": "float32", "bytes": 4}], )";
  EXPECT_THAT(Error(two + R"("buckets": {"tensors": [[0]]}, "steps": [{"start_us": 0, "compute_us": 5, "ready_us": [1, 2]}]})"),
              HasSubstr("tensor 1 is in no bucket"));
  EXPECT_THAT(Error(two + R"("buckets": {"tensors": [[0, 1], [1]]}, "steps": [{"start_us": 0, "compute_us": 5, "ready_us": [1, 2]}]})"),
              HasSubstr("tensor 1 is in buckets 0 and 1"));
  EXPECT_THAT(Error(two + R"("buckets": {"tensors": [[0, 2]]}, "steps": [{"start_us": 0, "compute_us": 5, "ready_us": [1, 2]}]})"),
              HasSubstr("bucket 0: 2 is not a tensor index (0 to 1)"));
  EXPECT_THAT(Error(two + R"("buckets": {"tensors": [[0, 1]]}, "steps": [{"start_us": 0, "compute_us": 5, "ready_us": [1, 2],
                             "bucket_ready_us": [1]}]})"),
              HasSubstr("step 0, bucket 0: ready at 1 but its last tensor was 2 us"));
  EXPECT_THAT(Error(two + R"("steps": [{"start_us": 0, "compute_us": 5, "ready_us": [1, 2], "bucket_ready_us": [2]}]})"),
              HasSubstr("step 0: 'bucket_ready_us' without 'buckets'"));
}

}  // namespace
}  // namespace psbench
