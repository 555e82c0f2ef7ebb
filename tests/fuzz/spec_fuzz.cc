// Payload specs: "key=value" lines (scheme, categories, small, medium, large, buffers,
// skew_bias, seed) go through the same parsers as the flags (ParseScheme, ParseCategories,
// ParseSize, ParseCategory), then ValidateSpec and ResolvePlan. A valid spec must resolve to
// exactly the plan spec.h defines: one payload of `buffers` buffers, each its category's
// size, the same plan every time (random), uniform counts within one of each other, skew
// with the bias category largest and every chosen one present.
#include <algorithm>
#include <map>
#include <string>
#include <string_view>

#include "absl/strings/numbers.h"
#include "payloads/size.h"
#include "payloads/spec.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using namespace psbench;

// Applies one "key=value" line; false when the value does not parse (the spec is then not
// resolved: the flag parser would have stopped there).
bool Apply(std::string_view line, PayloadSpec* spec) {
  const size_t eq = line.find('=');
  if (eq == std::string_view::npos) return true;  // not a setting: ignored
  const std::string_view key = line.substr(0, eq), value = line.substr(eq + 1);
  if (key == "scheme") {
    auto s = ParseScheme(value);
    if (!s.ok()) return false;
    spec->scheme = *s;
  } else if (key == "categories") {
    auto c = ParseCategories(value);
    if (!c.ok()) return false;
    // The text form round-trips.
    auto again = ParseCategories(CategoriesText(*c));
    FUZZ_CHECK(again.ok() && *again == *c);
    spec->categories = *c;
  } else if (key == "small" || key == "medium" || key == "large") {
    auto b = ParseSize(value);
    if (!b.ok()) return false;
    (key == "small" ? spec->small_bytes : key == "medium" ? spec->medium_bytes : spec->large_bytes) = *b;
  } else if (key == "buffers") {
    int n;
    if (!absl::SimpleAtoi(absl::string_view(value.data(), value.size()), &n)) return false;
    spec->buffers = n;
  } else if (key == "skew_bias") {
    auto c = ParseCategory(value);
    if (!c.ok()) return false;
    spec->skew_bias = *c;
  } else if (key == "seed") {
    uint64_t seed;
    if (!absl::SimpleAtoi(absl::string_view(value.data(), value.size()), &seed)) return false;
    spec->seed = seed;
  } else if (key == "trace") {
    spec->trace_path = std::string(value);
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  PayloadSpec spec;
  while (!text.empty()) {
    const size_t nl = std::min(text.find('\n'), text.size());
    if (!Apply(text.substr(0, nl), &spec)) return 0;
    text.remove_prefix(std::min(nl + 1, text.size()));
  }
  const absl::Status valid = ValidateSpec(spec);
  if (!valid.ok()) {
    FUZZ_CHECK(!valid.message().empty());
    return 0;
  }
  if (spec.scheme == Scheme::kTrace) return 0;  // reads a file: trace_fuzz covers the parser
  const absl::StatusOr<PayloadPlan> plan = ResolvePlan(spec);
  FUZZ_CHECK(plan.ok());
  FUZZ_CHECK(plan->payloads.size() == 1);
  const auto& buffers = plan->payloads[0];
  FUZZ_CHECK(static_cast<int>(buffers.size()) == spec.buffers);
  std::map<uint64_t, int> by_size;
  std::map<Category, int> count;
  for (const BufferPlan& b : buffers) {
    bool known = false;
    for (Category c : spec.categories) {
      if (b.bytes == spec.SizeOf(c)) known = true;
    }
    FUZZ_CHECK(known);
    FUZZ_CHECK(b.bytes >= 1 && b.bytes <= 10 * kMiB);
  }
  // Count per category (sizes of distinct categories never coincide: their ranges do not meet).
  for (Category c : spec.categories) {
    count[c] = static_cast<int>(std::count_if(buffers.begin(), buffers.end(), [&](const BufferPlan& b) {
      return b.bytes == spec.SizeOf(c);
    }));
  }
  const int k = static_cast<int>(spec.categories.size());
  if (spec.scheme == Scheme::kUniform) {
    for (int i = 0; i < k; ++i) {
      FUZZ_CHECK(count[spec.categories[i]] == spec.buffers / k + (i < spec.buffers % k ? 1 : 0));
    }
  }
  if (spec.scheme == Scheme::kSkew) {
    for (Category c : spec.categories) {
      FUZZ_CHECK(count[c] <= count[spec.skew_bias]);
      if (spec.buffers >= k) FUZZ_CHECK(count[c] >= 1);
    }
  }
  const absl::StatusOr<PayloadPlan> again = ResolvePlan(spec);
  FUZZ_CHECK(again.ok() && again->Sizes(0) == plan->Sizes(0));
  FUZZ_CHECK(plan->TotalBuffers() == buffers.size());
  FUZZ_CHECK(!plan->Summary().empty());
  return 0;
}
