// psbench-trace/2: a training job as captured (tools/psbench_trace): its tensors, and per step
// when each gradient became ready and how long the step computed. Every time is checked here,
// so that a replay never meets a trace it cannot follow.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "payloads/trace_internal.h"

namespace psbench::payloads_internal {
namespace {

using json = nlohmann::json;

// Times are written with three decimals; a bucket's time is its last member's.
constexpr double kSlackUs = 0.01;
// A replay waits out each step's recorded compute: one of over an hour is no training step
// (a unit slip, a damaged file) and would keep a run silently waiting.
constexpr double kMaxComputeUs = 3600e6;

// Bytes per element of the dtypes PyTorch names (str(dtype) without "torch.").
std::optional<uint64_t> ItemBytes(std::string_view dtype) {
  static constexpr std::pair<std::string_view, uint64_t> kTypes[] = {
      {"float64", 8}, {"float32", 4},  {"float16", 2},    {"bfloat16", 2},      {"complex128", 16},
      {"complex64", 8}, {"complex32", 4}, {"int64", 8},   {"int32", 4},         {"int16", 2},
      {"int8", 1},    {"uint8", 1},    {"bool", 1},       {"float8_e4m3fn", 1}, {"float8_e5m2", 1},
      {"uint16", 2},  {"uint32", 4},   {"uint64", 8}};
  for (const auto& [name, bytes] : kTypes) {
    if (name == dtype) return bytes;
  }
  return std::nullopt;
}

absl::StatusOr<double> Micros(const json& value, const std::string& what, const TraceErrors& errors) {
  if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0) {
    return errors.Invalid(Cat(what, " must be a number of microseconds >= 0 (got ", Show(value), ")"));
  }
  return value.get<double>();
}

// One tensor: {"name", "bytes", "dtype", "shape"?}; bytes must be what shape and dtype make.
absl::Status ParseTensor(const json& t, size_t i, TraceTiming* out, const TraceErrors& errors) {
  const std::string where = Cat("tensor ", i);
  if (!t.is_object()) return errors.Invalid(Cat(where, ": expected an object (got ", Show(t), ")"));
  auto name = t.find("name");
  if (name == t.end() || !name->is_string()) return errors.Invalid(Cat(where, ": missing 'name' (a string)"));
  auto bytes_it = t.find("bytes");
  if (bytes_it == t.end()) return errors.Invalid(Cat(where, ": missing 'bytes'"));
  absl::StatusOr<uint64_t> bytes = TensorBytes(*bytes_it, Cat(where, ": 'bytes'"), errors);
  if (!bytes.ok()) return bytes.status();
  auto dtype = t.find("dtype");
  if (dtype == t.end() || !dtype->is_string()) return errors.Invalid(Cat(where, ": missing 'dtype' (a string)"));
  const std::optional<uint64_t> item = ItemBytes(dtype->get<std::string>());
  if (!item) return errors.Invalid(Cat(where, ": unknown dtype ", Show(*dtype)));
  if (auto shape = t.find("shape"); shape != t.end()) {
    if (!shape->is_array()) return errors.Invalid(Cat(where, ": 'shape' must be a list"));
    // Counted without overflow: past 1 GiB of elements it cannot match `bytes` anyway.
    constexpr uint64_t kCap = uint64_t{1} << 31;
    uint64_t elements = 1;
    for (const json& d : *shape) {
      if (!d.is_number_integer() || (!d.is_number_unsigned() && d.get<int64_t>() < 0)) {
        return errors.Invalid(Cat(where, ": 'shape' must hold sizes >= 0 (got ", Show(d), ")"));
      }
      const uint64_t n = d.get<uint64_t>();
      elements = n == 0 ? 0 : (elements > kCap / n ? kCap : elements * n);
    }
    if (elements >= kCap) {
      return errors.Invalid(Cat(where, ": shape ", Show(*shape), " is over 1GiB, the most one tensor may be"));
    }
    if (elements * *item != *bytes) {
      return errors.Invalid(Cat(where, ": 'bytes' is ", *bytes, " but shape ", Show(*shape), " of ",
                                dtype->get<std::string>(), " makes ", elements * *item));
    }
  }
  out->tensors.push_back({*bytes, name->get<std::string>()});
  out->dtypes.push_back(dtype->get<std::string>());
  return absl::OkStatus();
}

// {"tensors": [[0, 3], [1, 2], ...]}: every tensor in exactly one bucket.
absl::Status ParseBuckets(const json& b, TraceTiming* out, const TraceErrors& errors) {
  auto lists = b.is_object() ? b.find("tensors") : b.end();
  if (lists == b.end() || !lists->is_array() || lists->empty()) {
    return errors.Invalid("'buckets' must be an object with a non-empty 'tensors' list of lists");
  }
  const size_t n = out->tensors.size();
  std::vector<int> seen(n, -1);
  for (size_t k = 0; k < lists->size(); ++k) {
    const json& members = (*lists)[k];
    if (!members.is_array() || members.empty()) return errors.Invalid(Cat("bucket ", k, ": expected a non-empty list"));
    std::vector<size_t> bucket;
    for (const json& m : members) {
      if (!m.is_number_unsigned() || m.get<uint64_t>() >= n) {
        return errors.Invalid(Cat("bucket ", k, ": ", Show(m), " is not a tensor index (0 to ", n - 1, ")"));
      }
      const size_t t = m.get<size_t>();
      if (seen[t] >= 0) return errors.Invalid(Cat("tensor ", t, " is in buckets ", seen[t], " and ", k));
      seen[t] = static_cast<int>(k);
      bucket.push_back(t);
    }
    out->buckets.push_back(std::move(bucket));
  }
  if (auto missing = std::find(seen.begin(), seen.end(), -1); missing != seen.end()) {
    return errors.Invalid(Cat("tensor ", missing - seen.begin(), " is in no bucket"));
  }
  return absl::OkStatus();
}

// A bucket is ready when its last member is; given times must say the same.
absl::Status CheckBucketTimes(const json& step, size_t s, const TraceTiming& t, const TraceErrors& errors) {
  auto times = step.find("bucket_ready_us");
  if (times == step.end()) return absl::OkStatus();
  if (t.buckets.empty()) return errors.Invalid(Cat("step ", s, ": 'bucket_ready_us' without 'buckets'"));
  if (!times->is_array() || times->size() != t.buckets.size()) {
    return errors.Invalid(Cat("step ", s, ": 'bucket_ready_us' must list ", t.buckets.size(), " times, one per bucket"));
  }
  const auto& ready = t.steps.back().ready_us;
  for (size_t k = 0; k < t.buckets.size(); ++k) {
    std::optional<double> last = 0.0;
    for (size_t m : t.buckets[k]) last = last && ready[m] ? std::optional(std::max(*last, *ready[m])) : std::nullopt;
    const json& given = (*times)[k];
    const bool agrees = given.is_null() ? !last : given.is_number() && last && std::abs(given.get<double>() - *last) <= kSlackUs;
    if (!agrees) {
      return errors.Invalid(Cat("step ", s, ", bucket ", k, ": ready at ", Show(given), " but its last tensor was ",
                                last ? Cat(*last, " us") : std::string("never ready")));
    }
  }
  return absl::OkStatus();
}

// One step: {"start_us", "compute_us", "ready_us": [per tensor, a time or null]}.
absl::Status ParseStep(const json& step, size_t s, TraceTiming* t, const TraceErrors& errors) {
  const std::string where = Cat("step ", s);
  if (!step.is_object()) return errors.Invalid(Cat(where, ": expected an object (got ", Show(step), ")"));
  for (const char* key : {"start_us", "compute_us", "ready_us"}) {
    if (!step.contains(key)) return errors.Invalid(Cat(where, ": missing '", key, "'"));
  }
  TraceTiming::Step out;
  absl::StatusOr<double> start = Micros(step["start_us"], Cat(where, ": 'start_us'"), errors);
  if (!start.ok()) return start.status();
  absl::StatusOr<double> compute = Micros(step["compute_us"], Cat(where, ": 'compute_us'"), errors);
  if (!compute.ok()) return compute.status();
  if (*compute <= 0) return errors.Invalid(Cat(where, ": 'compute_us' must be > 0"));
  if (*compute > kMaxComputeUs) {
    return errors.Invalid(Cat(where, ": 'compute_us' is ", *compute, " us, over an hour: not one training step's time"));
  }
  out.start_us = *start;
  out.compute_us = *compute;
  if (!t->steps.empty()) {
    const TraceTiming::Step& prev = t->steps.back();
    if (out.start_us + kSlackUs < prev.start_us + prev.compute_us) {
      return errors.Invalid(Cat(where, " starts at ", out.start_us, " us, before step ", s - 1, " ended (at ",
                                prev.start_us + prev.compute_us, " us): steps out of order"));
    }
  }
  const json& ready = step["ready_us"];
  const size_t n = t->tensors.size();
  if (!ready.is_array() || ready.size() != n) {
    return errors.Invalid(Cat(where, ": 'ready_us' must list ", n, " times (null: no gradient), one per tensor"));
  }
  for (size_t i = 0; i < n; ++i) {
    if (ready[i].is_null()) {
      out.ready_us.push_back(std::nullopt);
      continue;
    }
    absl::StatusOr<double> r = Micros(ready[i], Cat(where, ", tensor ", i, ": ready time"), errors);
    if (!r.ok()) return r.status();
    if (*r > out.compute_us + kSlackUs) {
      return errors.Invalid(Cat(where, ", tensor ", i, ": ready at ", *r, " us, after the step's compute ended (",
                                out.compute_us, " us)"));
    }
    out.ready_us.push_back(*r);
  }
  if (std::none_of(out.ready_us.begin(), out.ready_us.end(), [](auto r) { return r.has_value(); })) {
    return errors.Invalid(Cat(where, ": no tensor has a ready time"));
  }
  t->steps.push_back(std::move(out));
  return CheckBucketTimes(step, s, *t, errors);
}

}  // namespace

absl::StatusOr<PayloadPlan> ParseStepTrace(const json& root, const TraceErrors& errors) {
  for (const char* key : {"groups", "params"}) {
    if (root.contains(key)) return errors.Invalid(Cat("psbench-trace/2 has 'tensors' and 'steps', not '", key, "'"));
  }
  auto tensors = root.find("tensors");
  if (tensors == root.end() || !tensors->is_array() || tensors->empty()) {
    return errors.Invalid("missing 'tensors' (a non-empty list)");
  }
  if (tensors->size() > kMaxBuffersPerPayload) {
    return errors.Invalid(Cat("has ", tensors->size(), " tensors, over the ", kMaxBuffersPerPayload,
                              " one payload may hold"));
  }
  auto timing = std::make_shared<TraceTiming>();
  for (size_t i = 0; i < tensors->size(); ++i) {
    if (absl::Status s = ParseTensor((*tensors)[i], i, timing.get(), errors); !s.ok()) return s;
  }
  if (auto buckets = root.find("buckets"); buckets != root.end()) {
    if (absl::Status s = ParseBuckets(*buckets, timing.get(), errors); !s.ok()) return s;
  }
  auto steps = root.find("steps");
  if (steps == root.end() || !steps->is_array() || steps->empty()) {
    return errors.Invalid("missing 'steps' (a non-empty list)");
  }
  for (size_t s = 0; s < steps->size(); ++s) {
    if (absl::Status st = ParseStep((*steps)[s], s, timing.get(), errors); !st.ok()) return st;
  }
  // Back-to-back replay sends one payload: every tensor that ever had a gradient, in the order
  // they became ready in the first step (the others after, in model order).
  const auto& first = timing->steps.front().ready_us;
  std::vector<size_t> order;
  for (size_t i = 0; i < timing->tensors.size(); ++i) {
    const bool used = std::any_of(timing->steps.begin(), timing->steps.end(),
                                  [i](const TraceTiming::Step& st) { return st.ready_us[i].has_value(); });
    if (used) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&first](size_t a, size_t b) {
    if (first[a].has_value() != first[b].has_value()) return first[a].has_value();
    return first[a].has_value() && *first[a] < *first[b];
  });
  PayloadPlan plan;
  plan.payloads.emplace_back();
  for (size_t i : order) plan.payloads[0].push_back(timing->tensors[i]);
  plan.timing = std::move(timing);
  return plan;
}

}  // namespace psbench::payloads_internal
