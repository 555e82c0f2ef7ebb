// PS addresses (HOST:PORT, [IPV6]:PORT): whatever ParseHostPort accepts formats back
// (FormatHostPort) to text that parses to the same host and port, and a list's syntax check
// agrees with parsing each entry.
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_split.h"
#include "inputs/address.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psbench;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<HostPort> hp = ParseHostPort(absl::string_view(text.data(), text.size()));
  if (hp.ok()) {
    FUZZ_CHECK(!hp->host.empty() && hp->port >= 1 && hp->port <= 65535);
    const std::string formatted = FormatHostPort(hp->host, hp->port);
    const absl::StatusOr<HostPort> back = ParseHostPort(formatted);
    FUZZ_CHECK(back.ok() && back->host == hp->host && back->port == hp->port);
    FUZZ_CHECK(FormatHostPort(back->host, back->port) == formatted);
  } else {
    FUZZ_CHECK(hp.status().message().find("is not HOST:PORT: ") != std::string::npos);
  }
  // A comma-separated list passes the syntax check exactly when every entry parses and none
  // repeats.
  std::vector<std::string> list = absl::StrSplit(absl::string_view(text.data(), text.size()), ',');
  bool all_ok = true;
  for (size_t i = 0; i < list.size() && all_ok; ++i) {
    all_ok = ParseHostPort(list[i]).ok();
    for (size_t j = 0; j < i && all_ok; ++j) all_ok = list[j] != list[i];
  }
  FUZZ_CHECK(CheckPsListSyntax(list, "--ps").ok() == all_ok);
  return 0;
}
