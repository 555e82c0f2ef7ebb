// JSON in and out of psbench's files. Out: text of values that hold the user's bytes (paths,
// labels, the command line): nlohmann's dump() throws on a string that is not UTF-8, and a
// record lost at the end of a run over one byte of a file name is worse than that byte shown
// as U+FFFD. In: fields read from JSON files (scenarios, the --rdma-* hand-over), each error
// naming its key:
// nlohmann's own say "type must be number, but is null" or "key 'transport' not found" and
// not which. Integers without nlohmann's silent conversions: get<int>() turns 1e10 into
// whatever the cast gives (undefined behaviour for a float out of range) and 4294967312 into
// 16. These accept only an integer that fits.
#ifndef PSBENCH_PAYLOADS_JSON_FIELD_H_
#define PSBENCH_PAYLOADS_JSON_FIELD_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
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

// j[key], or JsonFieldError "'KEY' is missing".
inline const nlohmann::json& JsonField(const nlohmann::json& j, const std::string& key) {
  if (j.is_object()) {
    if (auto it = j.find(key); it != j.end()) return *it;
  }
  throw JsonFieldError("'" + key + "' is missing");
}

// JsonFieldError "'KEY' must be WHAT (got VALUE)".
[[noreturn]] inline void JsonFieldIsNot(const nlohmann::json& j, const std::string& key, const std::string& what) {
  throw JsonFieldError("'" + key + "' must be " + what + " (got " + DumpJson(JsonField(j, key)) + ")");
}

// read() for the fields of the object j[OBJECT], a field it finds wrong named with its object
// ("'load.rate' must be a number"): a bare 'rate' does not say where to look.
template <typename F>
auto InJsonObject(const std::string& object, F read) {
  try {
    return read();
  } catch (const JsonFieldError& e) {
    std::string what = e.what();
    if (what.starts_with("'")) what.insert(1, object + ".");
    throw JsonFieldError(what);
  }
}

// j[key] as a T, or JsonFieldError naming the key.
template <typename T>
T JsonIntegerField(const nlohmann::json& j, const std::string& key) {
  if (std::optional<T> v = JsonInteger<T>(JsonField(j, key))) return *v;
  JsonFieldIsNot(j, key, "an integer in [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
                             std::to_string(std::numeric_limits<T>::max()) + "]");
}

inline std::string JsonStringField(const nlohmann::json& j, const std::string& key) {
  const nlohmann::json& v = JsonField(j, key);
  if (!v.is_string()) JsonFieldIsNot(j, key, "a string");
  return v.get<std::string>();
}

inline double JsonNumberField(const nlohmann::json& j, const std::string& key) {
  const nlohmann::json& v = JsonField(j, key);
  if (!v.is_number()) JsonFieldIsNot(j, key, "a number");
  return v.get<double>();
}

inline bool JsonBoolField(const nlohmann::json& j, const std::string& key) {
  const nlohmann::json& v = JsonField(j, key);
  if (!v.is_boolean()) JsonFieldIsNot(j, key, "true or false");
  return v.get<bool>();
}

// The same with a default when the key is absent (as j.value(key, fallback)).
inline std::string JsonStringField(const nlohmann::json& j, const std::string& key, const std::string& fallback) {
  return j.contains(key) ? JsonStringField(j, key) : fallback;
}
inline bool JsonBoolField(const nlohmann::json& j, const std::string& key, bool fallback) {
  return j.contains(key) ? JsonBoolField(j, key) : fallback;
}
inline double JsonNumberField(const nlohmann::json& j, const std::string& key, double fallback) {
  return j.contains(key) ? JsonNumberField(j, key) : fallback;
}

// The same with a default when the key is absent (as j.value(key, fallback)).
template <typename T>
T JsonIntegerField(const nlohmann::json& j, const std::string& key, T fallback) {
  if (!j.contains(key)) return fallback;
  return JsonIntegerField<T>(j, key);
}

}  // namespace psbench

#endif  // PSBENCH_PAYLOADS_JSON_FIELD_H_
