#include "payloads/cat.h"
#include "payloads/spec.h"

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <random>

#include "absl/strings/ascii.h"
#include "fmt/format.h"
#include "payloads/payload.h"
#include "payloads/size.h"

namespace psbench {
namespace {

using payloads_internal::Cat;

constexpr int kMaxBuffers = kMaxBuffersPerPayload;

std::string CategoryTitle(Category c) {
  std::string name(CategoryName(c));
  name[0] = absl::ascii_toupper(static_cast<unsigned char>(name[0]));
  return name;
}

// "[1KiB, 1MiB)" for Small and Medium (exclusive upper bound), "[1MiB, 10MiB]" for Large.
std::string CategoryRange(Category c) {
  if (c == Category::kLarge) {
    return Cat("[", FormatSize(CategoryMin(c)), ", ", FormatSize(CategoryMax(c)), "]");
  }
  return Cat("[", FormatSize(CategoryMin(c)), ", ", FormatSize(CategoryMax(c) + 1), ")");
}

std::string_view SizeFlag(Category c) {
  switch (c) {
    case Category::kSmall:
      return "--small";
    case Category::kMedium:
      return "--medium";
    case Category::kLarge:
      return "--large";
  }
  return "--?";
}


bool Contains(const std::vector<Category>& categories, Category c) {
  return std::find(categories.begin(), categories.end(), c) != categories.end();
}

// The bias category first, then the others from nearest to farthest, restricted to `chosen`.
std::vector<Category> BiasOrder(Category bias, const std::vector<Category>& chosen) {
  std::array<Category, 3> full = {Category::kLarge, Category::kMedium, Category::kSmall};
  if (bias == Category::kSmall) full = {Category::kSmall, Category::kMedium, Category::kLarge};
  if (bias == Category::kMedium) full = {Category::kMedium, Category::kLarge, Category::kSmall};
  std::vector<Category> order;
  for (Category c : full) {
    if (Contains(chosen, c)) order.push_back(c);
  }
  return order;
}

// Buffers per category (parallel to `order`) for the skew scheme; see ResolvePlan in spec.h.
std::vector<int> SkewCounts(int buffers, const std::vector<Category>& order) {
  // Percent shares: the bias takes 60; the rest is 30:10, or all 40 with a single other.
  // (A lone category, which ValidateSpec refuses, would simply take everything.)
  std::vector<int> percent = {100};
  if (order.size() == 2) percent = {60, 40};
  if (order.size() == 3) percent = {60, 30, 10};

  const size_t k = order.size();
  std::vector<int> counts(k);
  std::vector<int> remainders(k);
  int assigned = 0;
  for (size_t i = 0; i < k; ++i) {
    const int64_t exact = int64_t{buffers} * percent[i];  // in hundredths of a buffer
    counts[i] = static_cast<int>(exact / 100);
    remainders[i] = static_cast<int>(exact % 100);
    assigned += counts[i];
  }
  // Largest remainder; stable sort keeps the bias order among equal remainders.
  std::vector<size_t> by_remainder(k);
  for (size_t i = 0; i < k; ++i) by_remainder[i] = i;
  std::stable_sort(by_remainder.begin(), by_remainder.end(),
                   [&](size_t a, size_t b) { return remainders[a] > remainders[b]; });
  for (size_t j = 0; assigned < buffers; j = (j + 1) % k, ++assigned) {
    ++counts[by_remainder[j]];
  }
  // Every chosen category appears at least once when there are enough buffers for that.
  if (buffers >= static_cast<int>(k)) {
    for (size_t i = 0; i < k; ++i) {
      if (counts[i] > 0) continue;
      // max_element returns the first maximum, i.e. the earliest in bias order.
      auto donor = std::max_element(counts.begin(), counts.end());
      --*donor;
      ++counts[i];
    }
  }
  return counts;
}

// Round robin over `order` while a category has buffers left.
std::vector<Category> RoundRobin(const std::vector<Category>& order, std::vector<int> counts) {
  std::vector<Category> out;
  bool any = true;
  while (any) {
    any = false;
    for (size_t i = 0; i < order.size(); ++i) {
      if (counts[i] == 0) continue;
      --counts[i];
      out.push_back(order[i]);
      any = true;
    }
  }
  return out;
}

std::vector<Category> SyntheticCategories(const PayloadSpec& spec) {
  const std::vector<Category>& chosen = spec.categories;
  const size_t k = chosen.size();
  std::vector<Category> out;
  out.reserve(spec.buffers);
  switch (spec.scheme) {
    case Scheme::kUniform:
      // Round robin in the user's order hands the remainder to the first chosen categories.
      for (int i = 0; i < spec.buffers; ++i) out.push_back(chosen[i % k]);
      break;
    case Scheme::kRandom: {
      // rng() % k rather than uniform_int_distribution, whose sequence differs between
      // standard libraries; the tiny modulo bias is irrelevant for k <= 3.
      std::mt19937_64 rng(spec.seed);
      for (int i = 0; i < spec.buffers; ++i) out.push_back(chosen[rng() % k]);
      break;
    }
    case Scheme::kSkew: {
      const std::vector<Category> order = BiasOrder(spec.skew_bias, chosen);
      out = RoundRobin(order, SkewCounts(spec.buffers, order));
      break;
    }
    case Scheme::kTrace:
      break;
  }
  return out;
}

}  // namespace

uint64_t CategoryMin(Category c) {
  switch (c) {
    case Category::kSmall:
      return 1;
    case Category::kMedium:
      return kKiB;
    case Category::kLarge:
      return kMiB;
  }
  return 0;
}

uint64_t CategoryMax(Category c) {
  switch (c) {
    case Category::kSmall:
      return kKiB - 1;
    case Category::kMedium:
      return kMiB - 1;
    case Category::kLarge:
      return 10 * kMiB;
  }
  return 0;
}

std::string_view CategoryName(Category c) {
  switch (c) {
    case Category::kSmall:
      return "small";
    case Category::kMedium:
      return "medium";
    case Category::kLarge:
      return "large";
  }
  return "?";
}

char CategoryLetter(Category c) {
  switch (c) {
    case Category::kSmall:
      return 'S';
    case Category::kMedium:
      return 'M';
    case Category::kLarge:
      return 'L';
  }
  return '?';
}

absl::StatusOr<Category> ParseCategory(std::string_view text) {
  const std::string lower = absl::AsciiStrToLower(std::string(text));
  if (lower == "s" || lower == "small") return Category::kSmall;
  if (lower == "m" || lower == "medium") return Category::kMedium;
  if (lower == "l" || lower == "large") return Category::kLarge;
  return absl::InvalidArgumentError(
      Cat("unknown category '", text, "' (use S, M, L or small, medium, large)"));
}

std::string_view SchemeName(Scheme s) {
  switch (s) {
    case Scheme::kUniform:
      return "uniform";
    case Scheme::kRandom:
      return "random";
    case Scheme::kSkew:
      return "skew";
    case Scheme::kTrace:
      return "trace";
  }
  return "?";
}

absl::StatusOr<Scheme> ParseScheme(std::string_view text) {
  const std::string lower = absl::AsciiStrToLower(std::string(text));
  for (Scheme s : {Scheme::kUniform, Scheme::kRandom, Scheme::kSkew, Scheme::kTrace}) {
    if (lower == SchemeName(s)) return s;
  }
  return absl::InvalidArgumentError(
      Cat("--scheme=", text, ": unknown scheme (use uniform, random, skew or trace)"));
}

uint64_t PayloadSpec::SizeOf(Category c) const {
  switch (c) {
    case Category::kSmall:
      return small_bytes;
    case Category::kMedium:
      return medium_bytes;
    case Category::kLarge:
      return large_bytes;
  }
  return 0;
}

absl::StatusOr<std::vector<Category>> ParseCategories(std::string_view text) {
  if (text.empty()) {
    return absl::InvalidArgumentError(
        "--categories is empty; name at least one of S, M, L (e.g. --categories=S,M,L)");
  }
  std::vector<Category> out;
  for (size_t start = 0; start <= text.size();) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    start = comma + 1;
    absl::StatusOr<Category> c = ParseCategory(item);
    if (!c.ok()) {
      return absl::InvalidArgumentError(
          Cat("--categories=", text, ": ", std::string(c.status().message())));
    }
    if (Contains(out, *c)) {
      return absl::InvalidArgumentError(
          Cat("--categories=", text, " names ", CategoryLetter(*c), " twice"));
    }
    out.push_back(*c);
  }
  return out;
}

absl::Status ValidateSpec(const PayloadSpec& spec) {
  const std::string scheme(SchemeName(spec.scheme));
  if (spec.scheme == Scheme::kTrace) {
    if (spec.trace_path.empty()) {
      return absl::InvalidArgumentError("--scheme=trace needs --trace=FILE");
    }
    return absl::OkStatus();  // sizes, categories and buffer count come from the file
  }
  if (!spec.trace_path.empty()) {
    return absl::InvalidArgumentError(
        Cat("--trace is only used with --scheme=trace (not --scheme=", scheme, ")"));
  }
  if (spec.buffers < 1) {
    return absl::InvalidArgumentError(Cat("--buffers must be at least 1 (got ", spec.buffers, ")"));
  }
  if (spec.buffers > kMaxBuffers) {
    return absl::InvalidArgumentError(
        Cat("--buffers=", spec.buffers, " is more than the maximum of ", kMaxBuffers));
  }
  if (spec.categories.empty()) {
    return absl::InvalidArgumentError("--categories must name at least one of S, M, L");
  }
  for (size_t i = 0; i < spec.categories.size(); ++i) {
    const Category c = spec.categories[i];
    if (c != Category::kSmall && c != Category::kMedium && c != Category::kLarge) {
      return absl::InvalidArgumentError("--categories holds an unknown category");
    }
    if (std::find(spec.categories.begin(), spec.categories.begin() + i, c) !=
        spec.categories.begin() + i) {
      return absl::InvalidArgumentError(Cat("--categories=", CategoriesText(spec.categories),
                                            " names ", CategoryLetter(c), " twice"));
    }
  }
  if ((spec.scheme == Scheme::kRandom || spec.scheme == Scheme::kSkew) &&
      spec.categories.size() < 2) {
    return absl::InvalidArgumentError(
        Cat("--scheme=", scheme,
            " needs at least two categories (--categories=", CategoriesText(spec.categories), ")"));
  }
  if (spec.scheme == Scheme::kSkew && !Contains(spec.categories, spec.skew_bias)) {
    return absl::InvalidArgumentError(
        Cat("--skew-bias=", CategoryName(spec.skew_bias),
            " is not among --categories=", CategoriesText(spec.categories)));
  }
  // Only the chosen categories' sizes are used, so only they must fit their category.
  for (Category c : spec.categories) {
    const uint64_t bytes = spec.SizeOf(c);
    if (bytes < CategoryMin(c) || bytes > CategoryMax(c)) {
      return absl::InvalidArgumentError(Cat(SizeFlag(c), "=", FormatSize(bytes), " is outside the ",
                                            CategoryTitle(c), " category ", CategoryRange(c)));
    }
  }
  return absl::OkStatus();
}

std::vector<uint64_t> PayloadPlan::Sizes(size_t payload) const {
  std::vector<uint64_t> sizes;
  for (const BufferPlan& b : payloads.at(payload)) sizes.push_back(b.bytes);
  return sizes;
}

std::vector<uint64_t> PayloadPlan::AllSizes() const {
  std::vector<uint64_t> sizes;
  for (const auto& p : payloads) {
    for (const BufferPlan& b : p) sizes.push_back(b.bytes);
  }
  return sizes;
}

uint64_t PayloadPlan::Bytes(size_t payload) const {
  uint64_t total = 0;
  for (const BufferPlan& b : payloads.at(payload)) total += b.bytes;
  return total;
}

uint64_t PayloadPlan::TotalBytes() const {
  uint64_t total = 0;
  for (size_t i = 0; i < payloads.size(); ++i) total += Bytes(i);
  return total;
}

uint64_t PayloadPlan::ArenaBytes() const {
  uint64_t total = 0;
  for (size_t i = 0; i < payloads.size(); ++i) total += PayloadArenaBytes(Sizes(i));
  return total;
}

size_t PayloadPlan::TotalBuffers() const {
  size_t total = 0;
  for (const auto& p : payloads) total += p.size();
  return total;
}

std::string PayloadPlan::Summary() const {
  constexpr size_t kShown = 3;      // payloads spelled out before abbreviating
  constexpr size_t kMaxSizes = 10;  // distinct sizes spelled out per payload (traces have many)
  if (payloads.empty()) return "(no payloads)";
  std::vector<std::string> parts;
  for (size_t i = 0; i < payloads.size() && i < kShown; ++i) {
    if (payloads[i].empty()) {
      parts.push_back("(empty)");
      continue;
    }
    std::map<uint64_t, size_t, std::greater<>> counts;  // largest size first
    for (const BufferPlan& b : payloads[i]) ++counts[b.bytes];
    std::string part;
    size_t shown = 0;
    for (const auto& [bytes, count] : counts) {
      if (shown++ == kMaxSizes) break;
      part += Cat(part.empty() ? "" : " ", count, "x", FormatSize(bytes));
    }
    if (counts.size() > kMaxSizes) {
      part += Cat(" +", counts.size() - kMaxSizes, " more sizes (", payloads[i].size(),
                  " buffers in all)");
    }
    parts.push_back(std::move(part));
  }
  std::string summary;
  for (const std::string& part : parts) summary += Cat(summary.empty() ? "" : "; ", part);
  if (payloads.size() > kShown) summary += Cat("; ... (", payloads.size(), " payloads)");
  return summary;
}

absl::StatusOr<PayloadPlan> ResolvePlan(const PayloadSpec& spec, uint64_t max_trace_bytes) {
  if (absl::Status s = ValidateSpec(spec); !s.ok()) return s;
  if (spec.scheme == Scheme::kTrace) return LoadTrace(spec.trace_path, max_trace_bytes);
  std::vector<BufferPlan> buffers;
  for (Category c : SyntheticCategories(spec)) buffers.push_back({spec.SizeOf(c), ""});
  PayloadPlan plan;
  plan.payloads.push_back(std::move(buffers));
  return plan;
}

PayloadPlan SingleBufferPlan(uint64_t bytes) {
  PayloadPlan plan;
  plan.payloads.push_back({BufferPlan{bytes, ""}});
  return plan;
}

std::string CategoriesText(const std::vector<Category>& categories) {
  std::string out;
  for (Category c : categories) {
    if (!out.empty()) out += ',';
    out += CategoryLetter(c);
  }
  return out;
}

}  // namespace psbench
