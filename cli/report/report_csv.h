// psbench report --csv: the records as one spreadsheet, a row per record.
#ifndef PSBENCH_CLI_REPORT_REPORT_CSV_H_
#define PSBENCH_CLI_REPORT_REPORT_CSV_H_

#include <string>
#include <vector>

#include "cli/report/report_data.h"

namespace psbench::report {

// A header row, then one row per record, flat columns: nested objects by dotted path
// ("latency_us.p50", "cpu.worker.utilization"), arrays of objects by index
// ("per_worker.0.rpc_per_s"), arrays of numbers or strings joined by spaces. The columns are
// the union of every record's fields in the order first seen, after "source" (FILE:LINE);
// a field a record lacks is an empty cell. Quoted as RFC 4180 says.
std::string RenderCsv(const std::vector<Input>& records);

}  // namespace psbench::report

#endif  // PSBENCH_CLI_REPORT_REPORT_CSV_H_
