#include "payloads/spec.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psbench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Category letters from a string such as "SML".
std::vector<Category> Cats(std::string_view letters) {
  std::vector<Category> out;
  for (char c : letters) out.push_back(ParseCategory(std::string(1, c)).value());
  return out;
}

// Sizes chosen so that each identifies its category.
PayloadSpec Spec(Scheme scheme, std::string_view categories, int buffers) {
  PayloadSpec spec;
  spec.scheme = scheme;
  spec.categories = Cats(categories);
  spec.buffers = buffers;
  spec.small_bytes = 100;
  spec.medium_bytes = 100 * kKiB;
  spec.large_bytes = 4 * kMiB;
  return spec;
}

// The plan as category letters, e.g. "LMSLMLMLLL"; fails on an unexpected size or name.
std::string Letters(const PayloadSpec& spec) {
  absl::StatusOr<PayloadPlan> plan = ResolvePlan(spec);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return "<error>";
  EXPECT_EQ(plan->payloads.size(), 1u);
  std::string out;
  for (const BufferPlan& b : plan->payloads.at(0)) {
    EXPECT_TRUE(b.name.empty());
    if (b.bytes == spec.small_bytes) {
      out += 'S';
    } else if (b.bytes == spec.medium_bytes) {
      out += 'M';
    } else if (b.bytes == spec.large_bytes) {
      out += 'L';
    } else {
      out += '?';
    }
  }
  return out;
}

std::string ErrorOf(const PayloadSpec& spec) {
  absl::Status status = ValidateSpec(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  // ResolvePlan refuses the same spec with the same error.
  absl::StatusOr<PayloadPlan> plan = ResolvePlan(spec);
  EXPECT_FALSE(plan.ok());
  if (!plan.ok()) {
    EXPECT_EQ(plan.status(), status);
  }
  EXPECT_EQ(status.message().find('\n'), std::string::npos);
  return std::string(status.message());
}

// ---- categories and schemes ------------------------------------------------------------------

TEST(CategoryTest, BoundsNamesLetters) {
  EXPECT_EQ(CategoryMin(Category::kSmall), 1u);
  EXPECT_EQ(CategoryMax(Category::kSmall), 1023u);
  EXPECT_EQ(CategoryMin(Category::kMedium), 1024u);
  EXPECT_EQ(CategoryMax(Category::kMedium), kMiB - 1);
  EXPECT_EQ(CategoryMin(Category::kLarge), kMiB);
  EXPECT_EQ(CategoryMax(Category::kLarge), 10 * kMiB);
  EXPECT_EQ(CategoryName(Category::kSmall), "small");
  EXPECT_EQ(CategoryName(Category::kMedium), "medium");
  EXPECT_EQ(CategoryName(Category::kLarge), "large");
  EXPECT_EQ(CategoryLetter(Category::kSmall), 'S');
  EXPECT_EQ(CategoryLetter(Category::kMedium), 'M');
  EXPECT_EQ(CategoryLetter(Category::kLarge), 'L');
}

TEST(CategoryTest, Parse) {
  EXPECT_EQ(ParseCategory("S").value(), Category::kSmall);
  EXPECT_EQ(ParseCategory("small").value(), Category::kSmall);
  EXPECT_EQ(ParseCategory("m").value(), Category::kMedium);
  EXPECT_EQ(ParseCategory("Medium").value(), Category::kMedium);
  EXPECT_EQ(ParseCategory("L").value(), Category::kLarge);
  EXPECT_EQ(ParseCategory("large").value(), Category::kLarge);
  for (const char* bad : {"", "X", "sm", "larger", " S"}) {
    absl::StatusOr<Category> c = ParseCategory(bad);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  for (Category c : {Category::kSmall, Category::kMedium, Category::kLarge}) {
    EXPECT_EQ(ParseCategory(CategoryName(c)).value(), c);
    EXPECT_EQ(ParseCategory(std::string(1, CategoryLetter(c))).value(), c);
  }
}

TEST(CategoryTest, ParseCategories) {
  EXPECT_THAT(ParseCategories("S,M,L").value(),
              ElementsAre(Category::kSmall, Category::kMedium, Category::kLarge));
  EXPECT_THAT(ParseCategories("L,S").value(), ElementsAre(Category::kLarge, Category::kSmall));
  EXPECT_THAT(ParseCategories("medium").value(), ElementsAre(Category::kMedium));
  EXPECT_THAT(ParseCategories("large,small,M").value(),
              ElementsAre(Category::kLarge, Category::kSmall, Category::kMedium));
  for (const char* bad : {"", "S,S", "S,small", "S,X", "S,", ",S", "S,,M", "SML", "S;M"}) {
    absl::StatusOr<std::vector<Category>> c = ParseCategories(bad);
    ASSERT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(c.status().message()), HasSubstr("--categories")) << bad;
  }
  EXPECT_THAT(std::string(ParseCategories("S,M,S").status().message()), HasSubstr("twice"));
}

TEST(SchemeTest, NamesRoundTrip) {
  for (Scheme s : {Scheme::kUniform, Scheme::kRandom, Scheme::kSkew, Scheme::kTrace}) {
    EXPECT_EQ(ParseScheme(SchemeName(s)).value(), s);
  }
  EXPECT_EQ(SchemeName(Scheme::kUniform), "uniform");
  EXPECT_EQ(SchemeName(Scheme::kRandom), "random");
  EXPECT_EQ(SchemeName(Scheme::kSkew), "skew");
  EXPECT_EQ(SchemeName(Scheme::kTrace), "trace");
  absl::StatusOr<Scheme> bad = ParseScheme("zipf");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--scheme=zipf"));
}

TEST(PayloadSpecTest, DefaultsAreValid) {
  PayloadSpec spec;
  EXPECT_EQ(spec.scheme, Scheme::kUniform);
  EXPECT_EQ(spec.buffers, 10);
  EXPECT_EQ(spec.seed, kDefaultSeed);
  EXPECT_EQ(spec.SizeOf(Category::kSmall), 10u);
  EXPECT_EQ(spec.SizeOf(Category::kMedium), 10 * kKiB);
  EXPECT_EQ(spec.SizeOf(Category::kLarge), kMiB);
  EXPECT_TRUE(ValidateSpec(spec).ok());
  for (Scheme s : {Scheme::kUniform, Scheme::kRandom, Scheme::kSkew}) {
    spec.scheme = s;
    EXPECT_TRUE(ValidateSpec(spec).ok()) << SchemeName(s);
  }
}

// ---- uniform ---------------------------------------------------------------------------------

TEST(UniformTest, ExactPlans) {
  const std::map<int, std::string> sml = {{1, "S"},           {2, "SM"},      {3, "SML"},
                                          {4, "SMLS"},        {7, "SMLSMLS"}, {10, "SMLSMLSMLS"},
                                          {11, "SMLSMLSMLSM"}};
  for (const auto& [n, want] : sml) EXPECT_EQ(Letters(Spec(Scheme::kUniform, "SML", n)), want) << n;
  // The user's order decides who gets the remainder.
  const std::map<int, std::string> ls = {{1, "L"},           {2, "LS"},      {3, "LSL"},
                                         {4, "LSLS"},        {7, "LSLSLSL"}, {10, "LSLSLSLSLS"},
                                         {11, "LSLSLSLSLSL"}};
  for (const auto& [n, want] : ls) EXPECT_EQ(Letters(Spec(Scheme::kUniform, "LS", n)), want) << n;
  EXPECT_EQ(Letters(Spec(Scheme::kUniform, "LMS", 5)), "LMSLM");
  EXPECT_EQ(Letters(Spec(Scheme::kUniform, "M", 4)), "MMMM");  // a single category is fine
  EXPECT_EQ(Letters(Spec(Scheme::kUniform, "S", 1)), "S");
}

TEST(UniformTest, DefaultSpecSizes) {
  absl::StatusOr<PayloadPlan> plan = ResolvePlan(PayloadSpec{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->Sizes(0),
              ElementsAre(10, 10240, 1048576, 10, 10240, 1048576, 10, 10240, 1048576, 10));
  EXPECT_EQ(plan->Summary(), "3x1MiB 3x10KiB 4x10B");
}

// ---- skew ------------------------------------------------------------------------------------

struct SkewCase {
  const char* categories;
  Category bias;
  std::map<int, std::string> plans;  // buffers -> letters
};

TEST(SkewTest, ExactPlans) {
  const Category S = Category::kSmall, M = Category::kMedium, L = Category::kLarge;
  const std::vector<SkewCase> cases = {
      {"SML",
       L,
       {{1, "L"},
        {2, "LM"},
        {3, "LMS"},
        {4, "LMSL"},
        {5, "LMSLM"},
        {7, "LMSLMLL"},
        {10, "LMSLMLMLLL"},
        {11, "LMSLMLMLLLL"},
        {20, "LMSLMSLMLMLMLMLLLLLL"}}},
      {"SML",
       S,
       {{1, "S"},
        {2, "SM"},
        {3, "SML"},
        {4, "SMLS"},
        {5, "SMLSM"},
        {7, "SMLSMSS"},
        {10, "SMLSMSMSSS"},
        {11, "SMLSMSMSSSS"},
        {20, "SMLSMLSMSMSMSMSSSSSS"}}},
      {"SML",
       M,
       {{1, "M"},
        {2, "ML"},
        {3, "MLS"},
        {4, "MLSM"},
        {5, "MLSML"},
        {7, "MLSMLMM"},
        {10, "MLSMLMLMMM"},
        {11, "MLSMLMLMMMM"},
        {20, "MLSMLSMLMLMLMLMMMMMM"}}},
      // The order of --categories does not matter: the bias order does.
      {"LMS", L, {{3, "LMS"}, {10, "LMSLMLMLLL"}}},
      {"MSL", S, {{10, "SMLSMSMSSS"}}},
      // Two categories: 60:40.
      {"ML",
       L,
       {{1, "L"},
        {2, "LM"},
        {3, "LML"},
        {4, "LMLM"},
        {7, "LMLMLML"},
        {10, "LMLMLMLMLL"},
        {11, "LMLMLMLMLLL"}}},
      {"LM", L, {{10, "LMLMLMLMLL"}}},
      {"ML",
       M,
       {{1, "M"},
        {2, "ML"},
        {3, "MLM"},
        {4, "MLML"},
        {7, "MLMLMLM"},
        {10, "MLMLMLMLMM"},
        {11, "MLMLMLMLMMM"}}},
      {"SM", M, {{1, "M"}, {3, "MSM"}, {10, "MSMSMSMSMM"}}},
      {"SM", S, {{1, "S"}, {2, "SM"}, {3, "SMS"}, {10, "SMSMSMSMSS"}, {11, "SMSMSMSMSSS"}}},
      {"SL", S, {{1, "S"}, {2, "SL"}, {4, "SLSL"}, {7, "SLSLSLS"}, {10, "SLSLSLSLSS"}}},
      {"LS", L, {{1, "L"}, {3, "LSL"}, {10, "LSLSLSLSLL"}, {11, "LSLSLSLSLLL"}}},
  };
  for (const SkewCase& c : cases) {
    for (const auto& [n, want] : c.plans) {
      PayloadSpec spec = Spec(Scheme::kSkew, c.categories, n);
      spec.skew_bias = c.bias;
      EXPECT_EQ(Letters(spec), want)
          << "categories=" << c.categories << " bias=" << CategoryName(c.bias) << " buffers=" << n;
    }
  }
}

TEST(SkewTest, TenBuffersSummary) {
  PayloadSpec spec;
  spec.scheme = Scheme::kSkew;
  EXPECT_EQ(ResolvePlan(spec).value().Summary(), "6x1MiB 3x10KiB 1x10B");
  spec.skew_bias = Category::kSmall;
  EXPECT_EQ(ResolvePlan(spec).value().Summary(), "1x1MiB 3x10KiB 6x10B");
  spec.skew_bias = Category::kMedium;
  EXPECT_EQ(ResolvePlan(spec).value().Summary(), "3x1MiB 6x10KiB 1x10B");
}

TEST(SkewTest, SharesOverManyBuffers) {
  PayloadSpec spec = Spec(Scheme::kSkew, "SML", 1000);
  spec.skew_bias = Category::kMedium;
  const std::string letters = Letters(spec);
  EXPECT_EQ(std::count(letters.begin(), letters.end(), 'M'), 600);
  EXPECT_EQ(std::count(letters.begin(), letters.end(), 'L'), 300);
  EXPECT_EQ(std::count(letters.begin(), letters.end(), 'S'), 100);
  // Every count is within one of its exact share and adds up, for all buffer counts.
  for (int n = 1; n <= 200; ++n) {
    for (Category bias : {Category::kSmall, Category::kMedium, Category::kLarge}) {
      PayloadSpec s = Spec(Scheme::kSkew, "SML", n);
      s.skew_bias = bias;
      const std::string got = Letters(s);
      ASSERT_EQ(got.size(), static_cast<size_t>(n));
      const char b = CategoryLetter(bias);
      const auto count = [&](char c) { return std::count(got.begin(), got.end(), c); };
      EXPECT_NEAR(count(b), n * 0.6, 1.0) << n;
      if (n >= 3) {
        for (char c : {'S', 'M', 'L'}) EXPECT_GE(count(c), 1) << n << " " << c;
      }
    }
  }
}

// ---- random ----------------------------------------------------------------------------------

TEST(RandomTest, PinnedSequence) {
  // mt19937_64 is fully specified by the standard, so these hold on every platform
  // (computed independently with a Python mt19937_64).
  EXPECT_EQ(Letters(Spec(Scheme::kRandom, "SML", 20)), "LMLLMSSMSMMSSSSMLLLS");
  EXPECT_EQ(Letters(Spec(Scheme::kRandom, "ML", 20)), "MLLLLMLLLLLMMMLLMLMM");
  PayloadSpec spec = Spec(Scheme::kRandom, "SML", 20);
  spec.seed = 1;
  EXPECT_EQ(Letters(spec), "LSSSSSLSLMLLLLLSMSLL");
  spec.seed = 0;
  EXPECT_EQ(Letters(spec), "SLMSMLMSLLLSMLMLSLLM");
}

TEST(RandomTest, Deterministic) {
  for (uint64_t seed : {uint64_t{0}, uint64_t{7}, kDefaultSeed}) {
    PayloadSpec spec = Spec(Scheme::kRandom, "SML", 100);
    spec.seed = seed;
    EXPECT_EQ(Letters(spec), Letters(spec));
    EXPECT_EQ(ResolvePlan(spec).value().Sizes(0), ResolvePlan(spec).value().Sizes(0));
  }
}

TEST(RandomTest, SeedsDiffer) {
  std::set<std::string> plans;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    PayloadSpec spec = Spec(Scheme::kRandom, "SML", 64);
    spec.seed = seed;
    plans.insert(Letters(spec));
  }
  EXPECT_EQ(plans.size(), 20u);
}

TEST(RandomTest, DrawsOnlyAndAllChosenCategories) {
  for (const char* cats : {"SML", "SM", "ML", "SL", "LS"}) {
    const std::string letters = Letters(Spec(Scheme::kRandom, cats, 3000));
    ASSERT_EQ(letters.size(), 3000u);
    const std::string chosen = cats;
    for (char c : {'S', 'M', 'L'}) {
      const auto n = std::count(letters.begin(), letters.end(), c);
      if (chosen.find(c) == std::string::npos) {
        EXPECT_EQ(n, 0) << cats << " drew " << c;
      } else {
        // Uniform: about 3000/k each; far outside would mean a broken draw.
        const double expected = 3000.0 / chosen.size();
        EXPECT_NEAR(n, expected, expected * 0.1) << cats << " " << c;
      }
    }
  }
}

TEST(RandomTest, FewBuffers) {
  for (int n : {1, 2, 3})
    EXPECT_EQ(Letters(Spec(Scheme::kRandom, "SML", n)).size(), static_cast<size_t>(n));
}

// ---- validation ------------------------------------------------------------------------------

TEST(ValidateTest, SizesOutsideTheirCategory) {
  PayloadSpec spec = Spec(Scheme::kUniform, "SML", 10);
  spec.medium_bytes = 2 * kMiB;
  EXPECT_EQ(ErrorOf(spec), "--medium=2MiB is outside the Medium category [1KiB, 1MiB)");
  spec.medium_bytes = 1023;
  EXPECT_THAT(ErrorOf(spec), HasSubstr("--medium=1023B"));
  spec.medium_bytes = kMiB;
  EXPECT_THAT(ErrorOf(spec), HasSubstr("--medium=1MiB"));
  spec.medium_bytes = kKiB;
  EXPECT_TRUE(ValidateSpec(spec).ok());
  spec.medium_bytes = kMiB - 1;
  EXPECT_TRUE(ValidateSpec(spec).ok());

  spec.small_bytes = 0;
  EXPECT_EQ(ErrorOf(spec), "--small=0B is outside the Small category [1B, 1KiB)");
  spec.small_bytes = kKiB;
  EXPECT_THAT(ErrorOf(spec), HasSubstr("--small=1KiB"));
  spec.small_bytes = 1;
  EXPECT_TRUE(ValidateSpec(spec).ok());
  spec.small_bytes = kKiB - 1;
  EXPECT_TRUE(ValidateSpec(spec).ok());

  spec.large_bytes = 10 * kMiB + 1;
  EXPECT_EQ(ErrorOf(spec), "--large=10485761B is outside the Large category [1MiB, 10MiB]");
  spec.large_bytes = kMiB - 1;
  EXPECT_THAT(ErrorOf(spec), HasSubstr("--large="));
  spec.large_bytes = 10 * kMiB;
  EXPECT_TRUE(ValidateSpec(spec).ok());
  spec.large_bytes = kMiB;
  EXPECT_TRUE(ValidateSpec(spec).ok());
}

TEST(ValidateTest, OnlyChosenCategoriesSizesMatter) {
  PayloadSpec spec = Spec(Scheme::kUniform, "SM", 10);
  spec.large_bytes = 100 * kMiB;  // unused
  EXPECT_TRUE(ValidateSpec(spec).ok());
  spec.categories = Cats("SML");
  EXPECT_THAT(ErrorOf(spec), HasSubstr("--large="));
}

TEST(ValidateTest, Buffers) {
  PayloadSpec spec = Spec(Scheme::kUniform, "SML", 0);
  EXPECT_THAT(ErrorOf(spec), HasSubstr("--buffers must be at least 1"));
  spec.buffers = -3;
  EXPECT_THAT(ErrorOf(spec), HasSubstr("--buffers must be at least 1"));
  spec.buffers = 100001;
  EXPECT_THAT(ErrorOf(spec), HasSubstr("--buffers=100001"));
  spec.buffers = 100000;
  EXPECT_TRUE(ValidateSpec(spec).ok());
  spec.buffers = 1;
  EXPECT_TRUE(ValidateSpec(spec).ok());
}

TEST(ValidateTest, Categories) {
  PayloadSpec spec = Spec(Scheme::kUniform, "", 10);
  EXPECT_THAT(ErrorOf(spec), HasSubstr("--categories"));
  spec.categories = Cats("SMS");
  EXPECT_THAT(ErrorOf(spec), HasSubstr("--categories=S,M,S"));
}

TEST(ValidateTest, RandomAndSkewNeedTwoCategories) {
  PayloadSpec spec = Spec(Scheme::kRandom, "S", 10);
  EXPECT_EQ(ErrorOf(spec), "--scheme=random needs at least two categories (--categories=S)");
  spec.scheme = Scheme::kSkew;
  spec.skew_bias = Category::kSmall;
  EXPECT_EQ(ErrorOf(spec), "--scheme=skew needs at least two categories (--categories=S)");
}

TEST(ValidateTest, SkewBiasMustBeChosen) {
  PayloadSpec spec = Spec(Scheme::kSkew, "ML", 10);
  spec.skew_bias = Category::kSmall;
  EXPECT_EQ(ErrorOf(spec), "--skew-bias=small is not among --categories=M,L");
  // Other schemes ignore the bias.
  spec.scheme = Scheme::kUniform;
  EXPECT_TRUE(ValidateSpec(spec).ok());
  spec.scheme = Scheme::kRandom;
  EXPECT_TRUE(ValidateSpec(spec).ok());
}

TEST(ValidateTest, TraceFlag) {
  PayloadSpec spec;
  spec.scheme = Scheme::kTrace;
  EXPECT_EQ(ErrorOf(spec), "--scheme=trace needs --trace=FILE");
  spec.trace_path = "model.json";
  EXPECT_TRUE(ValidateSpec(spec).ok());  // the file is read by ResolvePlan, not here
  // The synthetic settings are irrelevant to a trace.
  spec.buffers = 0;
  spec.categories.clear();
  EXPECT_TRUE(ValidateSpec(spec).ok());

  PayloadSpec uniform;
  uniform.trace_path = "model.json";
  EXPECT_THAT(ErrorOf(uniform), HasSubstr("--trace is only used with --scheme=trace"));
  uniform.scheme = Scheme::kSkew;
  EXPECT_THAT(ErrorOf(uniform), HasSubstr("--trace is only used with --scheme=trace"));
}

TEST(ValidateTest, TraceFileErrorsComeFromResolvePlan) {
  PayloadSpec spec;
  spec.scheme = Scheme::kTrace;
  spec.trace_path = "/nonexistent/psbench/model.json";
  absl::StatusOr<PayloadPlan> plan = ResolvePlan(spec);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("/nonexistent/psbench/model.json"));
}

// ---- plans -----------------------------------------------------------------------------------

TEST(PayloadPlanTest, Accessors) {
  PayloadPlan plan;
  plan.payloads = {{{10, "a"}, {20, "b"}}, {{1024, ""}}};
  EXPECT_THAT(plan.Sizes(0), ElementsAre(10, 20));
  EXPECT_THAT(plan.Sizes(1), ElementsAre(1024));
  EXPECT_EQ(plan.Bytes(0), 30u);
  EXPECT_EQ(plan.Bytes(1), 1024u);
  EXPECT_EQ(plan.TotalBytes(), 1054u);
  EXPECT_EQ(plan.TotalBuffers(), 3u);
  EXPECT_EQ(plan.Summary(), "1x20B 1x10B; 1x1KiB");
}

TEST(PayloadPlanTest, SummaryAbbreviatesManyPayloads) {
  PayloadPlan plan;
  for (int i = 1; i <= 5; ++i) plan.payloads.push_back({{uint64_t(i) * kKiB, ""}, {1, ""}});
  EXPECT_EQ(plan.Summary(), "1x1KiB 1x1B; 1x2KiB 1x1B; 1x3KiB 1x1B; ... (5 payloads)");
  plan.payloads.resize(3);
  EXPECT_EQ(plan.Summary(), "1x1KiB 1x1B; 1x2KiB 1x1B; 1x3KiB 1x1B");
  plan.payloads.resize(4);
  EXPECT_EQ(plan.Summary(), "1x1KiB 1x1B; 1x2KiB 1x1B; 1x3KiB 1x1B; ... (4 payloads)");
}

TEST(PayloadPlanTest, SummaryGroupsBySizeLargestFirst) {
  PayloadPlan plan;
  plan.payloads = {{{10, ""}, {kMiB, ""}, {10, ""}, {1536, ""}, {kMiB, ""}}};
  EXPECT_EQ(plan.Summary(), "2x1MiB 1x1536B 2x10B");
}

TEST(PayloadPlanTest, SummaryAbbreviatesManySizes) {
  PayloadPlan plan;
  plan.payloads.emplace_back();
  for (uint64_t i = 1; i <= 10; ++i) plan.payloads[0].push_back({i, ""});
  EXPECT_EQ(plan.Summary(), "1x10B 1x9B 1x8B 1x7B 1x6B 1x5B 1x4B 1x3B 1x2B 1x1B");
  plan.payloads[0].push_back({11, ""});
  plan.payloads[0].push_back({12, ""});
  plan.payloads[0].push_back({1, ""});
  EXPECT_EQ(
      plan.Summary(),
      "1x12B 1x11B 1x10B 1x9B 1x8B 1x7B 1x6B 1x5B 1x4B 1x3B +2 more sizes (13 buffers in all)");
}

TEST(PayloadPlanTest, EmptyPlansDoNotCrash) {
  PayloadPlan plan;
  EXPECT_EQ(plan.TotalBytes(), 0u);
  EXPECT_EQ(plan.TotalBuffers(), 0u);
  EXPECT_FALSE(plan.Summary().empty());
  plan.payloads.emplace_back();
  EXPECT_EQ(plan.Bytes(0), 0u);
  EXPECT_FALSE(plan.Summary().empty());
}

TEST(PayloadPlanTest, SingleBuffer) {
  PayloadPlan plan = SingleBufferPlan(4 * kMiB);
  ASSERT_EQ(plan.payloads.size(), 1u);
  EXPECT_THAT(plan.Sizes(0), ElementsAre(4 * kMiB));
  EXPECT_EQ(plan.Summary(), "1x4MiB");
  EXPECT_EQ(plan.TotalBuffers(), 1u);
}

}  // namespace
}  // namespace psbench
