#include "cli/launch/ps_address.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "inputs/address.h"

namespace psbench {

std::optional<std::string> PsDialAddress(absl::string_view line) {
  if (!absl::ConsumePrefix(&line, kPsListeningPrefix)) return std::nullopt;
  std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
  if (words.empty()) return std::nullopt;
  absl::StatusOr<HostPort> address = ParseHostPort(words[0]);
  if (!address.ok()) return std::nullopt;
  if (address->host == "0.0.0.0" || address->host == "::") {
    // Listening on every interface: dial the host name it printed.
    for (absl::string_view w : words) {
      if (absl::ConsumePrefix(&w, "host=") && !w.empty()) {
        std::string dial = FormatHostPort(w, address->port);
        if (ParseHostPort(dial).ok()) return dial;
      }
    }
    return std::nullopt;
  }
  return FormatHostPort(address->host, address->port);
}

}  // namespace psbench
