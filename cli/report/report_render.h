// psbench report, the text side: the Markdown document and the static HTML page, both from
// the same Report (cli/report/report_data.h).
#ifndef PSBENCH_CLI_REPORT_REPORT_RENDER_H_
#define PSBENCH_CLI_REPORT_REPORT_RENDER_H_

#include <string>

#include "cli/report/report_data.h"

namespace psbench::report {

std::string RenderMarkdown(const Report& report);

// A self-contained page: inline CSS, no network access. Plots are <img> elements pointing
// into `plot_dir` (relative to the page, e.g. "results_files"). An inline script counts, on
// load, the plot images that decoded and writes the count into the <body>'s
// data-plots-loaded attribute (data-plots holds how many there are), so a headless browser's
// DOM dump shows whether the page is whole.
std::string RenderHtml(const Report& report, const std::string& plot_dir);

}  // namespace psbench::report

#endif  // PSBENCH_CLI_REPORT_REPORT_RENDER_H_
