// Size strings ("4KiB", "10M"): ParseSize and the --small/--medium/--large flag parser agree,
// and whatever parses formats back (FormatSize) to text that parses to the same number.
#include <cstring>
#include <string>
#include <string_view>

#include "payloads/size.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psbench;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<uint64_t> bytes = ParseSize(text);
  ByteSize flag;
  std::string error;
  const bool flag_ok = AbslParseFlag(absl::string_view(text.data(), text.size()), &flag, &error);
  FUZZ_CHECK(flag_ok == bytes.ok());
  if (bytes.ok()) {
    FUZZ_CHECK(flag.bytes == *bytes);
    const std::string formatted = FormatSize(*bytes);
    FUZZ_CHECK(AbslUnparseFlag(flag) == formatted);
    const absl::StatusOr<uint64_t> back = ParseSize(formatted);
    FUZZ_CHECK(back.ok() && *back == *bytes);
  } else {
    FUZZ_CHECK(!error.empty());
    FUZZ_CHECK(bytes.status().message().find("invalid size") == 0);
  }
  // Any 64-bit count formats to text that parses back to it.
  if (size >= 8) {
    uint64_t v;
    std::memcpy(&v, data, 8);
    const absl::StatusOr<uint64_t> back = ParseSize(FormatSize(v));
    FUZZ_CHECK(back.ok() && *back == v);
  }
  return 0;
}
