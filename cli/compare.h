// --transports: one scenario run once per transport (or transport/mode), each with fresh
// processes on the same slots, and one table of the headline figures with their ratios
// against the first entry; plus one "kind": "comparison" record per row.
#ifndef PSBENCH_CLI_COMPARE_H_
#define PSBENCH_CLI_COMPARE_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/record.h"
#include "bench/scenario.h"
#include "nlohmann/json.hpp"

namespace psbench {

// One entry of --transports: a transport and the wire mode it runs in.
struct CompareEntry {
  std::string transport;
  WireMode mode = WireMode::kNonSerialized;
  std::string label;  // how the table and the JSON name it: "grpc", or "grpc/serialized"
};

// Parses "TRANSPORT[/MODE],TRANSPORT[/MODE],...": at least two entries, distinct (transport,
// mode) pairs, every transport one of TransportNames(). Entries without /MODE use
// `default_mode` (--mode). Labels carry the mode only when the entries' modes differ.
absl::StatusOr<std::vector<CompareEntry>> ParseTransportList(const std::string& text,
                                                            WireMode default_mode);

// Runs one scenario with fresh processes (the run's number, for its files and run id): its
// records, stamped.
using RunOne = std::function<absl::StatusOr<std::vector<Record>>(const Scenario&, size_t plans, int number)>;

// Runs every scenario under every entry, entry by entry, then prints the comparison and
// appends its records (and every run's) to `json_path`; open-loop runs print their table per
// entry and write their histograms under `hdr_out` (bench/hdr_text.h) when it is not empty.
// Stops at the first failed run: prints what completed, names the entry on stderr and returns
// 1 (128 + the signal when interrupted).
int RunComparison(const std::vector<CompareEntry>& entries,
                  const std::vector<std::pair<Scenario, size_t>>& runs, const RunOne& run_one,
                  const std::string& json_path, const std::string& hdr_out, const std::vector<std::string>& command);

}  // namespace psbench

#endif  // PSBENCH_CLI_COMPARE_H_
