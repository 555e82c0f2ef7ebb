#include "cli/report/report_command.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fstream>
#include <iterator>
#include <regex>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/cli.h"
#include "inputs/input_file.h"
#include "cli/report/report_csv.h"
#include "cli/report/report_data.h"
#include "cli/report/report_render.h"
#include "fmt/core.h"

ABSL_FLAG(std::string, html, "",
          "also write a static HTML page with the tables and plots (SVG, drawn by matplotlib, in "
          "OUT_files/ beside it)");
ABSL_FLAG(std::string, markdown, "", "write the Markdown here instead of stdout");
ABSL_FLAG(std::string, csv, "",
          "also write every record as one CSV row (flat columns: latency_us.p50, "
          "cpu.worker.utilization, ...), for spreadsheets");
ABSL_FLAG(std::string, compare, "",
          "A,B: the two series whose ratio B/A the tables and plots show (default: the first "
          "two series found). A series is a record's \"label\", else TRANSPORT/MODE");

namespace psbench {
namespace {

namespace fs = std::filesystem;

constexpr char kReportProgram[] = "psbench report";
constexpr char kReportUsage[] =
    "psbench report FILE.jsonl... [--markdown=OUT.md] [--html=OUT.html] [--csv=OUT.csv] [--compare=A,B]\n"
    "Tables (Markdown, on stdout) and a static HTML page with plots from the JSON Lines that\n"
    "psbench run --json and psbench-worker --json write: latency and bandwidth against size,\n"
    "PS throughput against workers and PS count, one line per series (a record's \"label\",\n"
    "else TRANSPORT/MODE), and the ratio B/A of two series.\n"
    "Exit status: 0 success, 1 plotting failed (the Markdown is still written), 2 bad input.";

// The plots take seconds; a script that hangs must not hang psbench.
constexpr absl::Duration kPlotTimeout = absl::Seconds(120);

std::string Executable(const std::string& name) {
  const char* path = getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// Debian's python3-matplotlib belongs to /usr/bin/python3, which a python3 earlier on PATH
// (pyenv, a venv) may not see: prefer it. PSBENCH_PYTHON overrides.
std::string Python() {
  if (const char* env = getenv("PSBENCH_PYTHON")) return env;
  if (access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return Executable("python3");
}

// "exited with status 3", "killed by signal 9".
std::string StatusText(int wait_status) {
  return WIFEXITED(wait_status) ? absl::StrCat("exited with status ", WEXITSTATUS(wait_status))
                                : absl::StrCat("killed by signal ", WTERMSIG(wait_status));
}

// Runs argv (argv[0] a path) with stdout and stderr into `log`, killing it after `timeout`.
// Returns its wait status.
absl::StatusOr<int> RunBounded(const std::vector<std::string>& argv, const fs::path& log,
                               absl::Duration timeout) {
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot write ", log.string(), ": ", strerror(errno)));
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives psbench
    if (getppid() != parent) _exit(127);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  int err = errno;
  close(fd);
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", strerror(err)));
  absl::Time deadline = absl::Now() + timeout;
  int st = 0;
  while (waitpid(pid, &st, WNOHANG) == 0) {
    if (absl::Now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return absl::DeadlineExceededError(absl::StrCat(argv[1], " did not finish within ",
                                                      absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return st;
}

// A failed write (UNAVAILABLE, a full disk) is a runtime failure; any other, bad input.
int ExitCodeOf(const absl::Status& st) {
  return st.code() == absl::StatusCode::kUnavailable ? kExitRuntime : kExitUsage;
}

// Whether `path` is directory `dir` or lies inside it (both as the file system resolves them).
bool Inside(const fs::path& path, const fs::path& dir) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) return false;
  return std::mismatch(dir.begin(), dir.end(), p.begin(), p.end()).first == dir.end();
}

// The directory the --html page's plots go in (OUT_files beside it, which the page owns),
// checked before anything is written: the page needs a directory to go in and must not be
// one, and no input or other output of the invocation may lie among its plots.
fs::path PlotDirOrDie(const std::string& html, const std::vector<NamedPath>& inputs,
                      const std::string& markdown, const std::string& csv) {
  const fs::path page(html);
  std::error_code ec;
  if (fs::is_directory(page, ec)) {
    Die(kReportProgram, absl::StrCat("--html=", html, ": is a directory; give the page's file name"), kExitUsage);
  }
  // Its plots go in a directory beside it: /dev/null would make /dev/null_files.
  if (fs::exists(page, ec) && !fs::is_regular_file(page, ec)) {
    Die(kReportProgram, absl::StrCat("--html=", html, ": is not a regular file; the page and its plots' directory "
                                     "beside it need a file name"), kExitUsage);
  }
  const fs::path parent = page.parent_path().empty() ? fs::path(".") : page.parent_path();
  if (!fs::is_directory(parent, ec)) {
    Die(kReportProgram, absl::StrCat("--html=", html, ": no directory ", parent.string(), " to write it in"), kExitUsage);
  }
  fs::path dir = page;
  dir.replace_extension();
  dir += "_files";
  // Found before anything is written (the Markdown and CSV come first).
  if (fs::exists(fs::symlink_status(dir, ec)) && !fs::is_directory(dir, ec)) {
    Die(kReportProgram, absl::StrCat("--html=", html, " writes its plots into ", dir.string(),
                                     "/, which is a file; write the page elsewhere"),
        kExitUsage);
  }
  const fs::path resolved = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  std::vector<NamedPath> files = inputs;
  if (!markdown.empty()) files.push_back({"--markdown", markdown});
  if (!csv.empty()) files.push_back({"--csv", csv});
  for (const NamedPath& f : files) {
    if (ec || !Inside(f.path, resolved)) continue;
    Die(kReportProgram, absl::StrCat("--html=", html, " writes its plots into ", dir.string(), "/, which holds ", f.flag,
                                     f.flag.rfind("--", 0) == 0 ? "=" : " ", f.path, "; write the page elsewhere"),
        kExitUsage);
  }
  // A file it writes there that is another name (a link) of one of them.
  std::vector<fs::path> written = {dir / "plots.json", dir / "plot.log"};
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".svg") written.push_back(it->path());
  }
  for (const fs::path& w : written) {
    if (absl::Status s = CheckOutputSpares("--html", w.string(), files); !s.ok()) {
      Die(kReportProgram, absl::StrCat(s.message(), " (a file of the page's plots)"), kExitUsage);
    }
  }
  return dir;
}

// Draws the plots into `dir` from `data` (written there as plots.json). Error: why not.
absl::Status DrawPlots(const fs::path& bin_dir, const fs::path& dir, const nlohmann::json& data) {
  fs::path script = bin_dir / "psbench_plot.py";
  if (!fs::exists(script)) {
    return absl::NotFoundError(absl::StrCat("cannot find the plotting script ", script.string(),
                                            " (the build copies it beside psbench)"));
  }
  std::string python = Python();
  if (python.empty() || access(python.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(
        "cannot run python3", python.empty() ? std::string() : " (" + python + ")",
        " to draw the plots; install python3 and python3-matplotlib (deploy/install-deps.sh)"));
  }
  // Plots of an earlier report in the same place would be left behind, unlinked.
  static const std::regex kOurs(R"(\d\d-.*\.svg)");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (std::regex_match(entry.path().filename().string(), kOurs)) fs::remove(entry.path(), ec);
  }
  fs::path data_file = dir / "plots.json";
  if (absl::Status st = WriteOutputFile(data_file.string(), data.dump(1)); !st.ok()) {
    return absl::InternalError(absl::StrCat(data_file.string(), ": ", st.message()));
  }
  fs::path log = dir / "plot.log";
  absl::StatusOr<int> status = RunBounded({python, script.string(), data_file.string(), dir.string()}, log,
                                          kPlotTimeout);
  if (!status.ok()) return status.status();
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (*status != 0) {
    // The script says what is wrong on its last line (a missing matplotlib: how to install it).
    std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipWhitespace());
    return absl::InternalError(absl::StrCat(
        "drawing the plots failed (", python, " ", script.string(), " ", StatusText(*status),
        ")", lines.empty() ? std::string() : ": " + lines.back()));
  }
  fs::remove(log, ec);
  // A python3 that exits 0 and draws nothing (PSBENCH_PYTHON=/bin/true) left a page of
  // missing images.
  for (const nlohmann::json& plot : data["plots"]) {
    const fs::path svg = dir / plot["file"].get<std::string>();
    if (!fs::is_regular_file(svg, ec)) {
      return absl::InternalError(absl::StrCat("drawing the plots failed: ", python, " ", script.string(),
                                              " exited 0 without writing ", svg.string()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

int RunReportCommand(int argc, char** argv, const fs::path& bin_dir) {
  auto positional = ParseFlagsOrExit(argc, argv, kReportUsage, {"/cli/report/report_command.cc", "/bench/scenario_flags.cc:max_input_size"});
  std::vector<std::string> files(positional.begin() + 1, positional.end());
  if (files.empty()) {
    Die(kReportProgram, "give one or more JSON Lines files (psbench run --json=FILE); see --help", kExitUsage);
  }
  report::ReportOptions options;
  options.inputs = files;
  if (FlagWasSet("compare")) {
    auto ab = report::ParseCompare(absl::GetFlag(FLAGS_compare));
    if (!ab.ok()) Die(kReportProgram, ab.status(), kExitUsage);
    options.compare = *ab;
  }
  const std::string html = absl::GetFlag(FLAGS_html);
  const std::string markdown = absl::GetFlag(FLAGS_markdown);
  const std::string csv = absl::GetFlag(FLAGS_csv);
  // "-" would be a file of that name: the Markdown goes to stdout when --markdown is not given.
  for (const auto& [flag, path] : {std::pair{"html", html}, {"markdown", markdown}, {"csv", csv}}) {
    if (FlagWasSet(flag) && (path.empty() || path == "-")) {
      Die(kReportProgram,
          absl::StrCat("--", flag, path.empty() ? " needs a file name" : "=-: give a file name",
                       std::string(flag) == "markdown" ? " (without --markdown the Markdown goes to stdout)" : ""),
          kExitUsage);
    }
  }
  // A file given twice would count its records twice.
  for (size_t i = 0; i < files.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      std::error_code ec;
      if (fs::equivalent(files[j], files[i], ec)) {
        Die(kReportProgram, absl::StrCat("report inputs '", files[j], "' and '", files[i],
                                         "' are the same file; give each once"), kExitUsage);
      }
    }
  }
  // An output must not replace what it is made from.
  std::vector<NamedPath> inputs;
  for (const std::string& in : files) inputs.push_back({"the report input", in});
  if (absl::Status s = CheckOutputsSpareInputs(inputs); !s.ok()) Die(kReportProgram, s, kExitUsage);
  const fs::path plot_dir = html.empty() ? fs::path() : PlotDirOrDie(html, inputs, markdown, csv);
  auto records = report::ReadRecords(files);
  if (!records.ok()) Die(kReportProgram, records.status(), kExitUsage);
  auto built = report::BuildReport(*records, options);
  if (!built.ok()) Die(kReportProgram, built.status(), kExitUsage);

  std::string md = report::RenderMarkdown(*built);
  if (markdown.empty()) {
    fmt::print("{}", md);
    std::fflush(stdout);
  } else if (absl::Status st = WriteOutputFile(markdown, md); !st.ok()) {
    Die(kReportProgram, absl::StrCat("--markdown=", markdown, ": ", st.message()), ExitCodeOf(st));
  }
  if (!csv.empty()) {
    if (absl::Status st = WriteOutputFile(csv, report::RenderCsv(*records)); !st.ok()) {
      Die(kReportProgram, absl::StrCat("--csv=", csv, ": ", st.message()), ExitCodeOf(st));
    }
  }
  if (html.empty()) return 0;

  fs::path page(html);
  std::error_code ec;
  fs::create_directory(plot_dir, ec);
  if (ec) Die(kReportProgram, absl::StrCat("--html=", html, ": cannot create ", plot_dir.string(), ": ", ec.message()), kExitUsage);
  if (!built->plots.empty()) {
    if (absl::Status st = DrawPlots(bin_dir, plot_dir, report::PlotData(*built)); !st.ok()) {
      Die(kReportProgram, absl::StrCat(st.message(), "; the Markdown is written, the HTML page is not"), kExitRuntime);
    }
  }
  if (absl::Status st = WriteOutputFile(page.string(), report::RenderHtml(*built, plot_dir.filename().string())); !st.ok()) {
    Die(kReportProgram, absl::StrCat("--html=", html, ": ", st.message()), ExitCodeOf(st));
  }
  if (!markdown.empty()) {
    fmt::print("# report: {} (Markdown), {} ({} plots in {})\n", markdown, html, built->plots.size(),
               plot_dir.string());
  }
  return 0;
}

}  // namespace psbench
