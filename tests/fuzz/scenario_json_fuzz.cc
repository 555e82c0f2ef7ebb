// Scenario files (--scenario=FILE, the JSON the driver hands every worker): parsed as the
// worker does (nlohmann without exceptions), then ScenarioFromJson and ValidateScenario. An
// accepted scenario writes back (ScenarioToJson) to JSON that reads back to the same JSON,
// and a valid one resolves to plans (Scenario::Plans) of sane sizes, as the worker then does.
#include <string_view>

#include "bench/scenario.h"
#include "nlohmann/json.hpp"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psbench;
  const auto j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  const absl::StatusOr<Scenario> s = ScenarioFromJson(j);
  if (!s.ok()) {
    FUZZ_CHECK(!s.status().message().empty());
    return 0;
  }
  const nlohmann::json written = ScenarioToJson(*s);
  const absl::StatusOr<Scenario> back = ScenarioFromJson(written);
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(ScenarioToJson(*back) == written);
  if (!ValidateScenario(*s).ok()) return 0;
  FUZZ_CHECK(ValidateScenario(*back).ok());
  if (!s->sweep && s->payload.scheme == Scheme::kTrace) return 0;  // reads a file
  const absl::StatusOr<std::vector<PayloadPlan>> plans = s->Plans();
  // A valid scenario resolves, unless one plan's payloads exceed --max-payload-memory (large
  // sizes times many buffers, or a small budget), which the error names.
  if (!plans.ok()) {
    FUZZ_CHECK(plans.status().code() == absl::StatusCode::kInvalidArgument &&
               plans.status().message().find("--max-payload-memory") != std::string::npos);
    return 0;
  }
  FUZZ_CHECK(!plans->empty() && plans->size() <= 64);
  for (const PayloadPlan& p : *plans) {
    FUZZ_CHECK(p.payloads.size() == 1 && !p.payloads[0].empty());
    for (uint64_t b : p.Sizes(0)) FUZZ_CHECK(b >= 1 && b <= (uint64_t{1} << 30));
  }
  return 0;
}
