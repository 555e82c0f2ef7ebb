// LoadTrace: the JSON trace forms listed in spec.h.

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "inputs/input_file.h"
#include "payloads/cat.h"
#include "payloads/json_field.h"
#include "payloads/spec.h"
#include "payloads/trace_internal.h"

namespace psbench {
namespace payloads_internal {

using json = nlohmann::json;

constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 30;

std::string Show(const json& value) {
  std::string text = DumpJson(value);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

absl::StatusOr<uint64_t> TensorBytes(const json& value, std::string_view what,
                                     const TraceErrors& errors) {
  if (value.is_number_integer()) {
    // Checked as signed first so that negative numbers are reported, not wrapped.
    if (value.is_number_unsigned() || value.get<int64_t>() > 0) {
      const uint64_t bytes = value.get<uint64_t>();
      if (bytes >= 1 && bytes <= kMaxTensorBytes) return bytes;
    }
  }
  return errors.Invalid(Cat(what, " must be an integer in [1, 1GiB] (got ", Show(value), ")"));
}

}  // namespace payloads_internal
namespace {

using payloads_internal::Cat;
using payloads_internal::Show;
using payloads_internal::TensorBytes;
using payloads_internal::TraceErrors;

using json = nlohmann::json;

constexpr std::string_view kFormat = "psbench-trace/1";
constexpr std::string_view kStepFormat = "psbench-trace/2";
constexpr std::string_view kForms =
    "expected a list of sizes, a list of groups, a list of {\"name\", \"bytes\"} tensors, "
    "or an object with \"groups\", \"params\" or (psbench-trace/2) \"steps\"";

// Where an entry sits, for messages: "entry 3" or "group 1, entry 3" (0-based, as in JSON).
std::string Where(std::optional<size_t> group, size_t entry) {
  if (group) return Cat("group ", *group, ", entry ", entry);
  return Cat("entry ", entry);
}

// One tensor: a bare size or an object with "bytes" and optional "name" (other keys, such as
// the reference traces' "shape" or "ready_ms", are ignored).
absl::StatusOr<BufferPlan> ParseTensor(const json& value, const std::string& where,
                                       const TraceErrors& errors) {
  if (value.is_number()) {
    absl::StatusOr<uint64_t> bytes = TensorBytes(value, Cat(where, ": size"), errors);
    if (!bytes.ok()) return bytes.status();
    return BufferPlan{*bytes, ""};
  }
  if (!value.is_object()) {
    return errors.Invalid(
        Cat(where, ": expected a size or a {\"name\", \"bytes\"} object (got ", Show(value), ")"));
  }
  BufferPlan tensor;
  auto bytes_it = value.find("bytes");
  if (bytes_it == value.end()) return errors.Invalid(Cat(where, ": missing 'bytes'"));
  absl::StatusOr<uint64_t> bytes = TensorBytes(*bytes_it, Cat(where, ": 'bytes'"), errors);
  if (!bytes.ok()) return bytes.status();
  tensor.bytes = *bytes;
  if (auto name = value.find("name"); name != value.end()) {
    if (!name->is_string()) return errors.Invalid(Cat(where, ": 'name' must be a string"));
    tensor.name = name->get<std::string>();
  }
  if (auto ready = value.find("ready_ms"); ready != value.end() && !ready->is_number()) {
    return errors.Invalid(Cat(where, ": 'ready_ms' must be a number"));
  }
  return tensor;
}

// A non-empty list of tensors (one payload).
absl::StatusOr<std::vector<BufferPlan>> ParseGroup(const json& list, std::optional<size_t> group,
                                                   const TraceErrors& errors) {
  if (list.empty()) {
    return errors.Invalid(group ? Cat("group ", *group, " has no tensors") : "has no tensors");
  }
  if (list.size() > kMaxBuffersPerPayload) {
    return errors.Invalid(Cat(group ? Cat("group ", *group, " has ") : "has ", list.size(),
                              " tensors, over the ", kMaxBuffersPerPayload, " one payload may hold"));
  }
  std::vector<BufferPlan> out;
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].is_array()) {
      return errors.Invalid(Cat(
          Where(group, i),
          ": expected a size or a tensor object, not a list (only groups are lists of tensors)"));
    }
    absl::StatusOr<BufferPlan> tensor = ParseTensor(list[i], Where(group, i), errors);
    if (!tensor.ok()) return tensor.status();
    out.push_back(std::move(*tensor));
  }
  return out;
}

// [10, 20] (one payload) or [[10, 20], [30]] (one payload per inner list).
absl::StatusOr<PayloadPlan> ParseArray(const json& root, const TraceErrors& errors) {
  if (root.empty()) return errors.Invalid("has no tensors");
  PayloadPlan plan;
  if (!root[0].is_array()) {
    absl::StatusOr<std::vector<BufferPlan>> group = ParseGroup(root, std::nullopt, errors);
    if (!group.ok()) return group.status();
    plan.payloads.push_back(std::move(*group));
    return plan;
  }
  for (size_t g = 0; g < root.size(); ++g) {
    if (!root[g].is_array()) {
      return errors.Invalid(
          Cat("entry ", g, ": expected a list of tensors like entry 0 (got ", Show(root[g]), ")"));
    }
    absl::StatusOr<std::vector<BufferPlan>> group = ParseGroup(root[g], g, errors);
    if (!group.ok()) return group.status();
    plan.payloads.push_back(std::move(*group));
  }
  return plan;
}

// {"format": "psbench-trace/1", "groups": [{"tensors": [...]}, ...]}
absl::StatusOr<PayloadPlan> ParseGroups(const json& groups, const TraceErrors& errors) {
  if (!groups.is_array()) return errors.Invalid("'groups' must be a list");
  if (groups.empty()) return errors.Invalid("'groups' is empty");
  PayloadPlan plan;
  for (size_t g = 0; g < groups.size(); ++g) {
    const json& group = groups[g];
    auto tensors = group.is_object() ? group.find("tensors") : group.end();
    if (!group.is_object() || tensors == group.end() || !tensors->is_array()) {
      return errors.Invalid(Cat("group ", g, ": expected an object with a 'tensors' list"));
    }
    absl::StatusOr<std::vector<BufferPlan>> parsed = ParseGroup(*tensors, g, errors);
    if (!parsed.ok()) return parsed.status();
    plan.payloads.push_back(std::move(*parsed));
  }
  return plan;
}

// {"params": [{"name", "bytes", "grad_ready_order", ...}, ...]}: one payload, in the order
// backward produced the gradients when every entry says so, else in file order.
absl::StatusOr<PayloadPlan> ParseParams(const json& params, const TraceErrors& errors) {
  if (!params.is_array()) return errors.Invalid("'params' must be a list");
  if (params.empty()) return errors.Invalid("'params' has no tensors");
  if (params.size() > kMaxBuffersPerPayload) {
    return errors.Invalid(Cat("'params' has ", params.size(), " tensors, over the ",
                              kMaxBuffersPerPayload, " one payload may hold"));
  }
  struct Entry {
    BufferPlan tensor;
    std::optional<int64_t> order;
  };
  std::vector<Entry> entries;
  bool all_ordered = true;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string where = Where(std::nullopt, i);
    if (!params[i].is_object()) {
      return errors.Invalid(
          Cat(where, ": expected a {\"name\", \"bytes\"} object (got ", Show(params[i]), ")"));
    }
    absl::StatusOr<BufferPlan> tensor = ParseTensor(params[i], where, errors);
    if (!tensor.ok()) return tensor.status();
    Entry entry{std::move(*tensor), std::nullopt};
    if (auto order = params[i].find("grad_ready_order"); order != params[i].end()) {
      if (!order->is_number_integer() ||
          (!order->is_number_unsigned() && order->get<int64_t>() < 0)) {
        return errors.Invalid(Cat(
            where, ": 'grad_ready_order' must be a non-negative integer (got ", Show(*order), ")"));
      }
      entry.order = order->get<int64_t>();
    } else {
      all_ordered = false;
    }
    entries.push_back(std::move(entry));
  }
  if (all_ordered) {
    std::stable_sort(entries.begin(), entries.end(),
                     [](const Entry& a, const Entry& b) { return *a.order < *b.order; });
  }
  PayloadPlan plan;
  plan.payloads.emplace_back();
  for (Entry& e : entries) plan.payloads[0].push_back(std::move(e.tensor));
  return plan;
}

absl::StatusOr<PayloadPlan> ParseObject(const json& root, const TraceErrors& errors) {
  if (auto format = root.find("format"); format != root.end()) {
    if (format->is_string() && format->get<std::string>() == kStepFormat) {
      return payloads_internal::ParseStepTrace(root, errors);
    }
    if (!format->is_string() || format->get<std::string>() != kFormat) {
      return errors.Invalid(Cat("unsupported 'format' ", Show(*format), " (this psbench reads \"", kFormat,
                                "\" and \"", kStepFormat, "\")"));
    }
  }
  if (root.contains("steps")) {
    return errors.Invalid(root.contains("format")
                              ? Cat("'steps' belongs to \"", kStepFormat, "\", not \"", kFormat, "\"")
                              : Cat("has 'steps' but no \"format\": \"", kStepFormat, "\""));
  }
  const bool has_groups = root.contains("groups");
  const bool has_params = root.contains("params");
  if (has_groups && has_params) return errors.Invalid("has both 'groups' and 'params'; use one");
  if (has_groups) return ParseGroups(root["groups"], errors);
  if (has_params) return ParseParams(root["params"], errors);
  return errors.Invalid(Cat("object has neither 'groups' nor 'params' (", kForms, ")"));
}

}  // namespace

absl::StatusOr<PayloadPlan> LoadTrace(const std::string& path, uint64_t max_bytes) {
  absl::StatusOr<std::string> text = ReadInputFile(path, "trace file", max_bytes);
  if (!text.ok()) return text.status();
  return ParseTrace(*text, path);
}

absl::StatusOr<PayloadPlan> ParseTrace(std::string_view text, const std::string& path) {
  const TraceErrors errors(path);
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    // Keep nlohmann's position ("at line 3, column 5"), drop its "[json.exception...] " tag.
    std::string_view what = e.what();
    if (auto close = what.find("] ");
        what.starts_with("[json.") && close != std::string_view::npos) {
      what.remove_prefix(close + 2);
    }
    return errors.Invalid(Cat("not valid JSON: ", what));
  }
  try {
    if (root.is_array()) return ParseArray(root, errors);
    if (root.is_object()) return ParseObject(root, errors);
  } catch (const json::exception& e) {
    // The checks above should make this unreachable; never let an exception escape.
    return errors.Invalid(Cat("unexpected content: ", e.what()));
  }
  return errors.Invalid(kForms);
}

}  // namespace psbench
