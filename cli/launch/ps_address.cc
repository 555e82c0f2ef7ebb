#include "cli/launch/ps_address.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace psbench {

std::optional<std::string> PsDialAddress(absl::string_view line) {
  if (!absl::ConsumePrefix(&line, kPsListeningPrefix)) return std::nullopt;
  std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
  if (words.empty()) return std::nullopt;
  absl::string_view address = words[0];
  size_t colon = address.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port <= 0 || port > 65535) {
    return std::nullopt;
  }
  absl::string_view host = address.substr(0, colon);
  if (host == "0.0.0.0" || host == "[::]") {
    for (absl::string_view w : words) {
      if (absl::ConsumePrefix(&w, "host=") && !w.empty()) return absl::StrCat(w, ":", port);
    }
    return std::nullopt;
  }
  return std::string(address);
}

}  // namespace psbench
