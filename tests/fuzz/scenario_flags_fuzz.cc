// Scenario flags (psbench-worker and psbench run): each input line is one command-line
// argument, parsed by psbench's flag parser (ParseFlags, what ParseFlagsOrExit runs) over the
// scenario and --rdma-* flags, then ScenarioFromFlags. A scenario it accepts is valid, goes
// through the worker's JSON hand-over unchanged, and resolves to plans.
#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/reflection.h"
#include "bench/cli.h"
#include "bench/flag_scope.h"
#include "bench/scenario.h"
#include "bench/scenario_flags.h"
#include "tests/fuzz/fuzz_check.h"
#include "transports/rdma_flags.h"
#include "transports/transport_flags.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psbench;
  std::vector<std::string> args = {"psbench-worker"};
  std::string_view text(reinterpret_cast<const char*>(data), size);
  while (!text.empty() && args.size() < 64) {
    const size_t nl = std::min(text.find('\n'), text.size());
    args.emplace_back(text.substr(0, nl));
    text.remove_prefix(std::min(nl + 1, text.size()));
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  absl::FlagSaver restore;  // every input starts from the defaults
  ForgetFlagsSet();
  bool help = false;
  const auto positional = ParseFlags(static_cast<int>(args.size()), argv.data(),
                                     {"/bench/scenario_flags.cc", kTransportFlagsFile, kRdmaFlagsFile}, &help);
  if (!positional.ok()) {
    FUZZ_CHECK(!positional.status().message().empty());
    return 0;
  }
  if (help) return 0;
  const absl::StatusOr<Scenario> s = ScenarioFromFlags();
  if (!s.ok()) return 0;
  FUZZ_CHECK(ValidateScenario(*s).ok());
  // Which of the given flags apply: an answer for any scenario, a reason when refused.
  for (bool tour : {false, true}) {
    const absl::Status applies = CheckFlagsApply(ShapeOf(*s, /*training=*/false, tour));
    FUZZ_CHECK(applies.ok() || !applies.message().empty());
  }
  const nlohmann::json written = ScenarioToJson(*s);
  const absl::StatusOr<Scenario> back = ScenarioFromJson(written);
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(ScenarioToJson(*back) == written);
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
  return 0;
}
