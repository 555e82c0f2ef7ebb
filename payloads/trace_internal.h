// Shared by the trace parsers (trace.cc: the size-only forms; trace_steps.cc: psbench-trace/2).
#ifndef PSBENCH_PAYLOADS_TRACE_INTERNAL_H_
#define PSBENCH_PAYLOADS_TRACE_INTERNAL_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "payloads/cat.h"
#include "payloads/spec.h"

namespace psbench::payloads_internal {

// A short rendering of an offending JSON value for error messages.
std::string Show(const nlohmann::json& value);

// Builds errors that all start with "trace file 'PATH': ".
class TraceErrors {
 public:
  explicit TraceErrors(const std::string& path) : prefix_(Cat("trace file '", path, "': ")) {}
  absl::Status Invalid(std::string_view what) const {
    return absl::InvalidArgumentError(Cat(prefix_, what));
  }

 private:
  std::string prefix_;
};

// A tensor size: an integer in [1 B, 1 GiB]; `what` names it in the error.
absl::StatusOr<uint64_t> TensorBytes(const nlohmann::json& value, std::string_view what,
                                     const TraceErrors& errors);

// {"format": "psbench-trace/2", "tensors": [...], "steps": [...]}: see docs/replay.md.
absl::StatusOr<PayloadPlan> ParseStepTrace(const nlohmann::json& root, const TraceErrors& errors);

}  // namespace psbench::payloads_internal

#endif  // PSBENCH_PAYLOADS_TRACE_INTERNAL_H_
