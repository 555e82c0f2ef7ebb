// --transports: one scenario run once per transport (or transport/mode), or --repetitions
// times with the entries alternating, each run with fresh processes on the same slots, and
// one table of the headline figures (medians, when repeated) with their ratios against the
// first entry; plus one "kind": "comparison" record per row.
#ifndef PSBENCH_CLI_COMPARE_H_
#define PSBENCH_CLI_COMPARE_H_

#include <cstdio>
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

// Marks every record as repetition `index` (from 1) of `of`: "repetition": {"index", "of"};
// nothing when `of` is 1.
void MarkRepetition(std::vector<Record>& records, int index, int of);
// " (repetition 2/5)"; "" when `of` is 1.
std::string RepetitionSuffix(int index, int of);

// The tables of `headlines` (per entry, its headline records in run order): one per
// benchmark, with each later entry's ratios to the first. One entry's table summarizes its
// `repetitions`. `stopped`: a run failed, and the tables hold what completed before it.
void PrintComparison(std::FILE* out, const std::vector<CompareEntry>& entries,
                     const std::vector<std::vector<Record>>& headlines, int repetitions, bool stopped = false);
// The machine-readable rows ("kind": "comparison"): per payload, the figures of every entry,
// their ratios to the first, and (measured more than once) their spread.
std::vector<Record> ComparisonRecords(const std::vector<CompareEntry>& entries,
                                      const std::vector<std::vector<Record>>& headlines,
                                      const std::vector<std::string>& command);

// Runs one scenario with fresh processes (the run's number, for its files and run id): its
// records, stamped.
using RunOne = std::function<absl::StatusOr<std::vector<Record>>(const Scenario&, size_t plans, int number)>;

// Runs every scenario under every entry `repetitions` times, scenario by scenario, the
// entries alternating within each repetition (A, B, A, B: drift is shared), then prints the
// comparison and appends its records (and every run's) to `json_path`; open-loop runs print
// their table per entry (and repetition) and write their histograms under `hdr_out`
// (bench/hdr_text.h) when it is not empty. Stops at the first failed run: prints what
// completed, names the entry on stderr and returns 1 (128 + the signal when interrupted).
int RunComparison(const std::vector<CompareEntry>& entries,
                  const std::vector<std::pair<Scenario, size_t>>& runs, int repetitions, const RunOne& run_one,
                  const std::string& json_path, const std::string& hdr_out, const std::vector<std::string>& command);

}  // namespace psbench

#endif  // PSBENCH_CLI_COMPARE_H_
