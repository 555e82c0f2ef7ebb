// JSON text of values that hold the user's bytes: paths, labels, the command line.
//
// nlohmann's dump() throws on a string that is not UTF-8; a record lost at the end of a run
// over one byte of a file name is worse than that byte shown as U+FFFD.
#ifndef PSBENCH_BENCH_JSON_TEXT_H_
#define PSBENCH_BENCH_JSON_TEXT_H_

#include <string>
#include <string_view>

#include "nlohmann/json.hpp"

namespace psbench {

// `j` as text (`indent` as dump()'s), any byte that is not UTF-8 replaced by U+FFFD.
inline std::string DumpJson(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Whether `s` is UTF-8, which a JSON string holds as it is.
inline bool IsUtf8(std::string_view s) {
  try {
    (void)nlohmann::json(std::string(s)).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

}  // namespace psbench

#endif  // PSBENCH_BENCH_JSON_TEXT_H_
