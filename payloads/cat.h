// String concatenation for payloads/. absl::StrCat does not take std::string_view with
// Debian's Abseil (its string_view is a separate class), so concatenate through fmt.
#ifndef PSBENCH_PAYLOADS_CAT_H_
#define PSBENCH_PAYLOADS_CAT_H_

#include <string>

#include "fmt/format.h"

namespace psbench::payloads_internal {

template <typename... Args>
std::string Cat(const Args&... args) {
  std::string out;
  (out.append(fmt::format("{}", args)), ...);
  return out;
}

}  // namespace psbench::payloads_internal

#endif  // PSBENCH_PAYLOADS_CAT_H_
