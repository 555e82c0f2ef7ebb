// Integers read from JSON files (scenarios, the --rdma-* hand-over) without nlohmann's silent
// conversions: get<int>() turns 1e10 into whatever the cast gives (undefined behaviour for a
// float out of range) and 4294967312 into 16. These accept only an integer that fits.
#ifndef PSBENCH_PAYLOADS_JSON_INT_H_
#define PSBENCH_PAYLOADS_JSON_INT_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "nlohmann/json.hpp"

namespace psbench {

// `value` as a T when it is a JSON integer in T's range (1.0 and 1e3 are floats: refused).
template <typename T>
std::optional<T> JsonInteger(const nlohmann::json& value) {
  static_assert(std::is_integral_v<T>);
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u <= static_cast<uint64_t>(std::numeric_limits<T>::max())) return static_cast<T>(u);
  } else if (value.is_number_integer()) {
    const int64_t i = value.get<int64_t>();
    if constexpr (std::is_signed_v<T>) {
      if (i >= std::numeric_limits<T>::min() && i <= std::numeric_limits<T>::max()) {
        return static_cast<T>(i);
      }
    } else if (i >= 0 && static_cast<uint64_t>(i) <= std::numeric_limits<T>::max()) {
      return static_cast<T>(i);
    }
  }
  return std::nullopt;
}

// Thrown by the field readers below; callers that catch nlohmann's exceptions catch it too
// (it is an std::invalid_argument: catch both, or std::exception).
class JsonFieldError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// j.at(key) as a T, or JsonFieldError naming the key.
template <typename T>
T JsonIntegerField(const nlohmann::json& j, const std::string& key) {
  if (std::optional<T> v = JsonInteger<T>(j.at(key))) return *v;
  throw JsonFieldError("'" + key + "' must be an integer in [" +
                       std::to_string(std::numeric_limits<T>::min()) + ", " +
                       std::to_string(std::numeric_limits<T>::max()) + "] (got " +
                       j.at(key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + ")");
}

// The same with a default when the key is absent (as j.value(key, fallback)).
template <typename T>
T JsonIntegerField(const nlohmann::json& j, const std::string& key, T fallback) {
  if (!j.contains(key)) return fallback;
  return JsonIntegerField<T>(j, key);
}

}  // namespace psbench

#endif  // PSBENCH_PAYLOADS_JSON_INT_H_
