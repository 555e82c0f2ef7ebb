#include "payloads/size.h"

#include <limits>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "fmt/format.h"

namespace psbench {
namespace {

constexpr std::string_view kExpected = "expected a byte count such as 10, 10K, 1M or 4MiB";

// Multiplier for a suffix (already lower-cased), or nullopt when unknown.
std::optional<uint64_t> SuffixMultiplier(std::string_view suffix) {
  if (suffix.empty() || suffix == "b") return 1;
  if (suffix.size() > 3) return std::nullopt;
  uint64_t unit = 0;
  switch (suffix[0]) {
    case 'k':
      unit = uint64_t{1} << 10;
      break;
    case 'm':
      unit = uint64_t{1} << 20;
      break;
    case 'g':
      unit = uint64_t{1} << 30;
      break;
    default:
      return std::nullopt;
  }
  std::string_view rest = suffix.substr(1);
  if (rest.empty() || rest == "b" || rest == "ib") return unit;
  return std::nullopt;
}

// Parses `text`; on failure returns nullopt and sets `reason` (without the text itself, so
// that flag errors, which Abseil prefixes with the flag name and value, read cleanly).
std::optional<uint64_t> ParseSizeImpl(std::string_view text, std::string* reason) {
  if (text.empty()) {
    *reason = fmt::format("empty size; {}", kExpected);
    return std::nullopt;
  }
  size_t digits = 0;
  while (digits < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[digits]))) {
    ++digits;
  }
  if (digits == 0) {
    *reason = std::string(kExpected);
    return std::nullopt;
  }
  uint64_t value = 0;
  for (size_t i = 0; i < digits; ++i) {
    const uint64_t d = static_cast<uint64_t>(text[i] - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - d) / 10) {
      *reason = "too large";
      return std::nullopt;
    }
    value = value * 10 + d;
  }
  std::string_view suffix = text.substr(digits);
  if (!suffix.empty() && suffix[0] == '.') {
    *reason = "fractions are not allowed; use a smaller unit (e.g. 1536K, not 1.5M)";
    return std::nullopt;
  }
  if (suffix.find_first_of(" \t\n\r\f\v") != std::string_view::npos) {
    *reason = fmt::format("spaces are not allowed; {}", kExpected);
    return std::nullopt;
  }
  const std::optional<uint64_t> unit = SuffixMultiplier(absl::AsciiStrToLower(std::string(suffix)));
  if (!unit) {
    *reason = fmt::format(
        "unknown suffix '{}' (use B, K, M or G; KB/KiB, MB/MiB, GB/GiB also work)", suffix);
    return std::nullopt;
  }
  if (value > std::numeric_limits<uint64_t>::max() / *unit) {
    *reason = "too large";
    return std::nullopt;
  }
  return value * *unit;
}

}  // namespace

absl::StatusOr<uint64_t> ParseSize(std::string_view text) {
  std::string reason;
  const std::optional<uint64_t> bytes = ParseSizeImpl(text, &reason);
  if (!bytes) return absl::InvalidArgumentError(fmt::format("invalid size '{}': {}", text, reason));
  return *bytes;
}

std::string FormatSize(uint64_t bytes) {
  struct Unit {
    int shift;
    const char* name;
  };
  static constexpr Unit kUnits[] = {{30, "GiB"}, {20, "MiB"}, {10, "KiB"}};
  if (bytes != 0) {
    for (const Unit& u : kUnits) {
      const uint64_t unit = uint64_t{1} << u.shift;
      if (bytes % unit == 0) return fmt::format("{}{}", bytes / unit, u.name);
    }
  }
  return fmt::format("{}B", bytes);
}

bool AbslParseFlag(absl::string_view text, ByteSize* size, std::string* error) {
  const std::optional<uint64_t> bytes = ParseSizeImpl({text.data(), text.size()}, error);
  if (!bytes) return false;
  size->bytes = *bytes;
  return true;
}

std::string AbslUnparseFlag(ByteSize size) { return FormatSize(size.bytes); }

}  // namespace psbench
