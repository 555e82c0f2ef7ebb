#include "payloads/size.h"

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psbench {
namespace {

using ::testing::HasSubstr;

struct GoodCase {
  const char* text;
  uint64_t bytes;
};

class ParseSizeGoodTest : public ::testing::TestWithParam<GoodCase> {};

TEST_P(ParseSizeGoodTest, Parses) {
  const GoodCase& c = GetParam();
  absl::StatusOr<uint64_t> bytes = ParseSize(c.text);
  ASSERT_TRUE(bytes.ok()) << c.text << ": " << bytes.status();
  EXPECT_EQ(*bytes, c.bytes) << c.text;
}

constexpr uint64_t kK = 1024, kM = kK * 1024, kG = kM * 1024;

INSTANTIATE_TEST_SUITE_P(
    Table, ParseSizeGoodTest,
    ::testing::Values(GoodCase{"0", 0}, GoodCase{"1", 1}, GoodCase{"10", 10}, GoodCase{"010", 10},
                      GoodCase{"10B", 10}, GoodCase{"10b", 10}, GoodCase{"10K", 10 * kK},
                      GoodCase{"10k", 10 * kK}, GoodCase{"10KB", 10 * kK},
                      GoodCase{"10KiB", 10 * kK}, GoodCase{"10kib", 10 * kK},
                      GoodCase{"10KIB", 10 * kK}, GoodCase{"64KB", 64 * kK}, GoodCase{"1M", kM},
                      GoodCase{"1m", kM}, GoodCase{"1MB", kM}, GoodCase{"4MiB", 4 * kM},
                      GoodCase{"1536K", 1536 * kK}, GoodCase{"1g", kG}, GoodCase{"1G", kG},
                      GoodCase{"2GB", 2 * kG}, GoodCase{"3GiB", 3 * kG}, GoodCase{"0K", 0},
                      GoodCase{"18446744073709551615", UINT64_MAX},
                      GoodCase{"17179869183G", 17179869183 * kG}));

class ParseSizeBadTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ParseSizeBadTest, Rejects) {
  const std::string text = GetParam();
  absl::StatusOr<uint64_t> bytes = ParseSize(text);
  ASSERT_FALSE(bytes.ok()) << "'" << text << "' parsed as " << *bytes;
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
  // One line naming the offending text.
  EXPECT_THAT(std::string(bytes.status().message()), HasSubstr("'" + text + "'"));
  EXPECT_EQ(bytes.status().message().find('\n'), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Table, ParseSizeBadTest,
                         ::testing::Values("", "-1", "+1", "1.5M", "1.", ".5", "10X", "10KX",
                                           "10iB", "10Ki", "10KBB", "K", "KiB", " 10", "10 ",
                                           "10 K", "10\tK", "1e3", "0x10", "10T", "10MiBs",
                                           "18446744073709551616", "99999999999999999999",
                                           "20000000000G", "17179869184G", "18014398509481984K"));

TEST(ParseSizeTest, MessagesExplainTheProblem) {
  EXPECT_THAT(std::string(ParseSize("1.5M").status().message()), HasSubstr("fraction"));
  EXPECT_THAT(std::string(ParseSize("10X").status().message()), HasSubstr("suffix 'X'"));
  EXPECT_THAT(std::string(ParseSize("10 K").status().message()), HasSubstr("space"));
  EXPECT_THAT(std::string(ParseSize("20000000000G").status().message()), HasSubstr("too large"));
  EXPECT_THAT(std::string(ParseSize("").status().message()), HasSubstr("empty"));
}

TEST(FormatSizeTest, ShortestExactBinaryForm) {
  EXPECT_EQ(FormatSize(0), "0B");
  EXPECT_EQ(FormatSize(1), "1B");
  EXPECT_EQ(FormatSize(10), "10B");
  EXPECT_EQ(FormatSize(1023), "1023B");
  EXPECT_EQ(FormatSize(1024), "1KiB");
  EXPECT_EQ(FormatSize(1536), "1536B");
  EXPECT_EQ(FormatSize(10240), "10KiB");
  EXPECT_EQ(FormatSize(1048576), "1MiB");
  EXPECT_EQ(FormatSize(1048576 + 1024), "1025KiB");
  EXPECT_EQ(FormatSize(10 * kM), "10MiB");
  EXPECT_EQ(FormatSize(kG), "1GiB");
  EXPECT_EQ(FormatSize(1536 * kM), "1536MiB");
  EXPECT_EQ(FormatSize(UINT64_MAX), "18446744073709551615B");
  EXPECT_EQ(FormatSize(uint64_t{1} << 63), "8589934592GiB");
}

TEST(FormatSizeTest, RoundTripsThroughParseSize) {
  const uint64_t values[] = {0,
                             1,
                             10,
                             1023,
                             1024,
                             1025,
                             1536,
                             10240,
                             65536,
                             1048575,
                             1048576,
                             3 * kM + 1,
                             10 * kM,
                             kG - 1,
                             kG,
                             5 * kG,
                             UINT64_MAX,
                             UINT64_MAX - 1,
                             uint64_t{1} << 63};
  for (uint64_t v : values) {
    absl::StatusOr<uint64_t> back = ParseSize(FormatSize(v));
    ASSERT_TRUE(back.ok()) << v << " -> " << FormatSize(v) << ": " << back.status();
    EXPECT_EQ(*back, v) << FormatSize(v);
  }
  for (uint64_t shift = 0; shift < 64; ++shift) {
    const uint64_t v = uint64_t{1} << shift;
    EXPECT_EQ(ParseSize(FormatSize(v)).value(), v);
    EXPECT_EQ(ParseSize(FormatSize(v + 1)).value(), v + 1);
    EXPECT_EQ(ParseSize(FormatSize(v * 3)).value(), v * 3);  // wraps for the top shifts: fine
  }
}

// The flags library calls AbslParseFlag with absl::string_view, which in Debian's Abseil is
// not std::string_view; this fails to compile if the overload cannot take it.
static_assert(
    std::is_same_v<decltype(AbslParseFlag(std::declval<absl::string_view>(),
                                          std::declval<ByteSize*>(), std::declval<std::string*>())),
                   bool>);

TEST(ByteSizeFlagTest, ParsesAndUnparses) {
  ByteSize size;
  std::string error;
  ASSERT_TRUE(AbslParseFlag("4MiB", &size, &error)) << error;
  EXPECT_EQ(size.bytes, 4 * kM);
  EXPECT_EQ(AbslUnparseFlag(size), "4MiB");
  ASSERT_TRUE(AbslParseFlag("10", &size, &error)) << error;
  EXPECT_EQ(size.bytes, 10u);
  EXPECT_EQ(AbslUnparseFlag(ByteSize{1536}), "1536B");
}

TEST(ByteSizeFlagTest, ErrorIsJustTheReason) {
  ByteSize size{123};
  std::string error;
  EXPECT_FALSE(AbslParseFlag("10X", &size, &error));
  EXPECT_EQ(size.bytes, 123u);  // untouched on failure
  EXPECT_FALSE(error.empty());
  // Abseil already prints the flag name and value; the reason must not repeat the value.
  EXPECT_THAT(error, ::testing::Not(HasSubstr("10X")));
  EXPECT_THAT(error, HasSubstr("suffix"));
  error.clear();
  EXPECT_FALSE(AbslParseFlag("1.5M", &size, &error));
  EXPECT_THAT(error, HasSubstr("fraction"));
  error.clear();
  EXPECT_FALSE(AbslParseFlag("", &size, &error));
  EXPECT_FALSE(error.empty());
}

}  // namespace
}  // namespace psbench
