// The line every psbench-ps prints once it serves,
//   psbench-ps listening on ADDR:PORT transport=T pid=P cpus=C host=H
// and the one parser of it: what a worker dials to reach that PS.
#ifndef PSBENCH_CLI_LAUNCH_PS_ADDRESS_H_
#define PSBENCH_CLI_LAUNCH_PS_ADDRESS_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace psbench {

inline constexpr absl::string_view kPsListeningPrefix = "psbench-ps listening on ";
// What a PS prints as it exits after exchanges: which updates of which worker it applied.
// A launcher does not relay it: the workers' records say what each PS had applied.
inline constexpr absl::string_view kPsAppliedPrefix = "psbench-ps applied updates: ";

// ADDR:PORT, or H:PORT when the PS listens on every interface (0.0.0.0, [::]); nullopt when
// `line` is not that line (or says no port).
std::optional<std::string> PsDialAddress(absl::string_view line);

}  // namespace psbench

#endif  // PSBENCH_CLI_LAUNCH_PS_ADDRESS_H_
