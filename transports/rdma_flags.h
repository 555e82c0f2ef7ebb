// The --rdma-* flags, shared by psbench-ps, psbench-worker and psbench run so that every
// binary spells and checks them the same way.
#ifndef PSBENCH_TRANSPORTS_RDMA_FLAGS_H_
#define PSBENCH_TRANSPORTS_RDMA_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "transports/transport.h"

namespace psbench {

// Source-file suffix that owns the flags (for ParseFlagsOrExit's flag_files).
inline constexpr char kRdmaFlagsFile[] = "/transports/rdma_flags.cc";

// Reads and checks the flags. --rdma-poll defaults to busy when `busy_poll` (the generic
// --busy-poll) is set, else to event.
absl::StatusOr<RdmaOptions> RdmaOptionsFromFlags(bool busy_poll);
absl::Status ValidateRdmaOptions(const RdmaOptions& o);

// The flags that reproduce `o` on another binary's command line (only non-defaults).
std::vector<std::string> RdmaCommandLine(const RdmaOptions& o);

nlohmann::json RdmaOptionsToJson(const RdmaOptions& o);
absl::StatusOr<RdmaOptions> RdmaOptionsFromJson(const nlohmann::json& j);

}  // namespace psbench

#endif  // PSBENCH_TRANSPORTS_RDMA_FLAGS_H_
