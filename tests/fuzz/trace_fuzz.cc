// Trace files (every form LoadTrace accepts, spec.h): ParseTrace is what LoadTrace runs on
// the file's text. An accepted trace has at least one payload, none empty, every size in
// [1, 1GiB]; written back in the psbench trace format it parses to the same plan. A
// psbench-trace/2's timing is whole: every step has a time per tensor within its compute.
#include <string>
#include <string_view>

#include "nlohmann/json.hpp"
#include "payloads/spec.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psbench;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<PayloadPlan> plan = ParseTrace(text, "fuzz.json");
  if (!plan.ok()) {
    FUZZ_CHECK(plan.status().message().find("trace file 'fuzz.json': ") == 0);
    return 0;
  }
  FUZZ_CHECK(!plan->payloads.empty());
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& payload : plan->payloads) {
    FUZZ_CHECK(!payload.empty());
    nlohmann::json tensors = nlohmann::json::array();
    for (const BufferPlan& b : payload) {
      FUZZ_CHECK(b.bytes >= 1 && b.bytes <= (uint64_t{1} << 30));
      tensors.push_back({{"name", b.name}, {"bytes", b.bytes}});
    }
    groups.push_back({{"tensors", tensors}});
  }
  FUZZ_CHECK(!plan->Summary().empty());
  if (plan->timing != nullptr) {  // psbench-trace/2: times a replay can follow
    const TraceTiming& t = *plan->timing;
    FUZZ_CHECK(!t.steps.empty() && t.dtypes.size() == t.tensors.size());
    for (size_t s = 0; s < t.steps.size(); ++s) {
      const TraceTiming::Step& step = t.steps[s];
      FUZZ_CHECK(step.compute_us > 0 && step.ready_us.size() == t.tensors.size());
      if (s > 0) FUZZ_CHECK(step.start_us + 0.01 >= t.steps[s - 1].start_us + t.steps[s - 1].compute_us);
      for (const auto& r : step.ready_us) FUZZ_CHECK(!r || (*r >= 0 && *r <= step.compute_us + 0.01));
    }
    size_t bucketed = 0;
    for (const auto& b : t.buckets) bucketed += b.size();
    FUZZ_CHECK(t.buckets.empty() || bucketed == t.tensors.size());
  }
  const nlohmann::json canonical = {{"format", "psbench-trace/1"}, {"groups", groups}};
  // Names may hold any bytes; replace what is not UTF-8, as the JSON writer must.
  const std::string again_text = canonical.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const absl::StatusOr<PayloadPlan> again = ParseTrace(again_text, "again.json");
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->payloads.size() == plan->payloads.size());
  for (size_t i = 0; i < plan->payloads.size(); ++i) {
    FUZZ_CHECK(again->Sizes(i) == plan->Sizes(i));
  }
  return 0;
}
