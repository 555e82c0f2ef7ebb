// Byte sizes as users write them: 10, 10K, 1M, 4MiB.
#ifndef PSBENCH_PAYLOADS_SIZE_H_
#define PSBENCH_PAYLOADS_SIZE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psbench {

// Parses a byte count. Suffixes are binary, case-insensitive, with an optional "B"/"iB":
// "", "B" = 1; "K", "KB", "KiB" = 1024; "M", "MB", "MiB" = 2^20; "G", "GB", "GiB" = 2^30.
// ("KB" is binary too, as in perftest and the OSU benchmarks.) Rejects empty strings,
// signs, fractions, spaces inside the number and overflow.
absl::StatusOr<uint64_t> ParseSize(std::string_view text);

// Shortest exact binary form: 10 -> "10B", 10240 -> "10KiB", 1048576 -> "1MiB",
// 1536 -> "1536B" (never rounds: the text parses back to the same number).
std::string FormatSize(uint64_t bytes);

// A byte count usable as an Abseil flag type, so parse errors name the flag.
// AbslParseFlag takes absl::string_view: Debian's Abseil is built with its own string_view
// class (not an alias of std::string_view), and the flags library calls it with that type.
struct ByteSize {
  uint64_t bytes = 0;
};
bool AbslParseFlag(absl::string_view text, ByteSize* size, std::string* error);
std::string AbslUnparseFlag(ByteSize size);

}  // namespace psbench

#endif  // PSBENCH_PAYLOADS_SIZE_H_
