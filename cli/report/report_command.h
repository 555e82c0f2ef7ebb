// `psbench report FILE.jsonl... [--markdown=OUT.md] [--html=OUT.html] [--compare=A,B]`:
// tables (Markdown) and a static HTML page with plots from psbench's JSON Lines results.
#ifndef PSBENCH_CLI_REPORT_REPORT_COMMAND_H_
#define PSBENCH_CLI_REPORT_REPORT_COMMAND_H_

#include <filesystem>

namespace psbench {

// Parses its own flags (argv[1] is "report") and runs the command; `bin_dir` holds
// psbench_plot.py. Returns the exit status: 0, 1 (plotting failed; the Markdown is written),
// 2 (bad input).
int RunReportCommand(int argc, char** argv, const std::filesystem::path& bin_dir);

}  // namespace psbench

#endif  // PSBENCH_CLI_REPORT_REPORT_COMMAND_H_
