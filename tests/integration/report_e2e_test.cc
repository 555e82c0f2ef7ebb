// psbench report end to end: real psbench runs (two series: non-serialized and serialized)
// into one JSON Lines file, the report's Markdown and HTML page, and the page opened in a
// real headless Chromium: it renders and every plot image loads. Then every bad input.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"

namespace psbench::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kChromium[] = "/usr/bin/chromium";

Argv ReportArgv(const Argv& flags) {
  Argv argv = {BinPath("psbench"), "report"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return argv;
}

int CountOf(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class ReportE2eTest : public IntegrationTest {
 protected:
  void RunInto(const Argv& flags) {
    RunResult r = RunCommand(RunArgv(Concat(flags, {"--json=" + results_})), seconds(120));
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
  }

  // Headless Chromium on `page`, bounded: `timeout` kills its whole process group. A fresh
  // profile each time; no network, no first-run work, no sandbox (we may be root).
  RunResult Chromium(const std::string& page, const Argv& mode) {
    static int profile = 0;
    Argv argv = {"/usr/bin/timeout", "-k", "5", "90", kChromium, "--headless", "--no-sandbox",
                 "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                 "--user-data-dir=" + tmp_.File("profile-" + std::to_string(profile++)),
                 "--virtual-time-budget=10000", "--window-size=1280,2400"};
    argv.insert(argv.end(), mode.begin(), mode.end());
    argv.push_back("file://" + page);
    RunResult r = RunCommand(argv, seconds(120));
    // The browser's helper processes (zygotes, renderer) are still exiting when it returns;
    // they come to us (the fixture made us a subreaper). Give them a bounded moment, so that
    // what the fixture then finds alive is a real leftover.
    auto deadline = Clock::now() + seconds(15);
    while (Clock::now() < deadline) {
      while (waitpid(-1, nullptr, WNOHANG) > 0) {
      }
      bool live = false;
      for (const ProcInfo& c : ChildrenOf(getpid())) live |= c.state != 'Z';
      if (!live) break;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return r;
  }

  // The body's data-plots-loaded attribute in Chromium's DOM dump (-1 when absent).
  int PlotsLoaded(const std::string& page) {
    RunResult r = Chromium(page, {"--dump-dom"});
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    std::smatch m;
    static const std::regex kLoaded("data-plots-loaded=\"(\\d+)\"");
    if (!std::regex_search(r.out, m, kLoaded)) {
      ADD_FAILURE() << "no data-plots-loaded count in the DOM (the page's script did not run)\n" << r.Describe();
      return -1;
    }
    EXPECT_THAT(r.out, HasSubstr("<h1>psbench report</h1>"));
    return std::stoi(m[1]);
  }

  TempDir tmp_;
  std::string results_ = tmp_.File("results.jsonl");
};

TEST_F(ReportE2eTest, RealRunsMakeAPageThatChromiumRendersWithEveryPlot) {
  ASSERT_EQ(access(kChromium, X_OK), 0) << kChromium << " missing: deploy/install-deps.sh installs chromium";
  const Argv quick = {"--iterations=200", "--warmup-iterations=20"};
  // Two series, run one after the other into one file, as a user compares two setups.
  for (const char* mode : {"--mode=non-serialized", "--mode=serialized"}) {
    RunInto(Concat({"--benchmark=latency", "--sizes=1:4K", mode}, quick));
  }
  RunInto({"--benchmark=bandwidth", "--sizes=1K:16K", "--iterations=100", "--warmup-iterations=10",
           "--transports=grpc/non-serialized,grpc/serialized"});
  // Throughput of 1 and 2 workers, against 1 and 2 PS: per series, a line per PS count.
  for (const char* ps : {"--num-ps=1", "--num-ps=2"}) {
    for (const char* workers : {"--num-workers=1", "--num-workers=2"}) {
      RunInto({"--benchmark=throughput", "--sizes=4K:4K", "--iterations=100", "--warmup-iterations=10", workers,
               ps, "--transports=grpc/non-serialized,grpc/serialized"});
    }
  }
  if (HasFatalFailure()) return;

  const std::string page = tmp_.File("report.html"), md = tmp_.File("report.md");
  RunResult r = RunCommand(ReportArgv({results_, "--html=" + page, "--markdown=" + md}), seconds(150));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(r.err, "") << r.Describe();
  const std::string text = ReadFile(md);
  for (const char* want : {"## Latency", "## Bandwidth", "## Throughput", "grpc/serialized / grpc/non-serialized p50",
                           "| sweep | 4096 |", "- **Series:** grpc/non-serialized; grpc/serialized",
                           "comparison records not shown"}) {
    EXPECT_THAT(text, HasSubstr(want));
  }
  // Latency and bandwidth vs size, each with its ratio; throughput vs workers and vs PS, each
  // with its ratio.
  const std::string html = ReadFile(page);
  const int plots = CountOf(html, "<img class=\"plot\"");
  EXPECT_EQ(plots, 8) << html;
  EXPECT_THAT(html, HasSubstr("data-plots=\"8\""));
  std::vector<std::string> svgs;
  for (const auto& e : std::filesystem::directory_iterator(tmp_.File("report_files"))) {
    if (e.path().extension() == ".svg") svgs.push_back(e.path().string());
  }
  ASSERT_EQ(static_cast<int>(svgs.size()), plots);
  for (const auto& svg : svgs) EXPECT_THAT(ReadFile(svg).substr(0, 200), HasSubstr("<svg")) << svg;
  // Every line of the throughput plot can be told apart: 2 series x 2 PS counts, 4 colours
  // (greys are the axes and grid).
  int throughput_plots = 0;
  for (const auto& svg : svgs) {
    if (svg.find("throughput-workers") == std::string::npos || svg.find("ratio") != std::string::npos) continue;
    ++throughput_plots;
    static const std::regex kStroke("stroke: ?#([0-9a-f]{6})");
    std::set<std::string> colours;
    const std::string text = ReadFile(svg);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), kStroke); it != std::sregex_iterator(); ++it) {
      const std::string c = (*it)[1].str();
      if (!(c.substr(0, 2) == c.substr(2, 2) && c.substr(2, 2) == c.substr(4, 2))) colours.insert(c);
    }
    EXPECT_EQ(colours.size(), 4u) << svg;
  }
  EXPECT_EQ(throughput_plots, 1);

  EXPECT_EQ(PlotsLoaded(page), plots);
  RunResult shot = Chromium(page, {"--screenshot=" + tmp_.File("report.png")});
  EXPECT_EQ(shot.exit_code, 0) << shot.Describe();
  const std::string png = ReadFile(tmp_.File("report.png"));
  EXPECT_EQ(png.substr(0, 8), "\x89PNG\r\n\x1a\n");
  EXPECT_GT(png.size(), 20000u) << "a blank page compresses to a few KB";
  if (const char* keep = std::getenv("PSBENCH_KEEP_REPORT")) {  // to look at it
    std::filesystem::copy(tmp_.path(), keep, std::filesystem::copy_options::recursive |
                                                 std::filesystem::copy_options::overwrite_existing);
  }
  // The check sees a plot that does not load.
  std::filesystem::remove(svgs[0]);
  EXPECT_EQ(PlotsLoaded(page), plots - 1);
}

// --json=- means what it means to psbench-worker: records alone on stdout, the table on
// stderr. psbench run mixed the two, and the report refused what it had written.
TEST_F(ReportE2eTest, JsonToStdoutIsRecordsOnly) {
  RunResult r = RunCommand(RunArgv({"--benchmark=latency", "--sizes=1K:2K", "--iterations=3", "--json=-"}),
                           seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  for (const std::string& line : lines) EXPECT_EQ(Json::parse(line).value("benchmark", ""), "latency") << line;
  EXPECT_THAT(r.err, HasSubstr("# psbench latency")) << r.Describe();
  TempDir tmp;
  RunResult report = RunCommand(ReportArgv({tmp.Write("stdout.jsonl", r.out)}), seconds(60));
  EXPECT_EQ(report.exit_code, 0) << report.Describe();
}

class ReportInputTest : public IntegrationTest {
 protected:
  // Runs psbench report; expects `code` and one line on stderr holding `message`.
  RunResult Expect(const Argv& flags, int code, const std::string& message, const Argv& env = {}) {
    Argv argv = ReportArgv(flags);
    if (!env.empty()) argv = Concat(Concat({"/usr/bin/env"}, env), argv);
    RunResult r = RunCommand(argv, seconds(60));
    EXPECT_EQ(r.exit_code, code) << r.Describe();
    EXPECT_EQ(r.ErrLines().size(), 1u) << r.Describe();
    EXPECT_THAT(r.err, HasSubstr(message)) << r.Describe();
    return r;
  }

  TempDir tmp_;
};

const std::string kLatencyRecord =
    R"({"benchmark":"latency","transport":"grpc","mode":"serialized","scheme":"sweep","payload_bytes":1,)"
    R"("iterations":200,"config":{"warmup_iterations":20,"iterations":200},)"
    R"("latency_us":{"p50":10.0,"p99":20.0,"mean":11.0}})"
    "\n";

// No output may replace an input; --csv writes a row per record.
TEST_F(ReportInputTest, OutputsNeverReplaceAnInputAndCsvHasARowPerRecord) {
  std::string in = tmp_.Write("in.jsonl", kLatencyRecord + kLatencyRecord);
  for (const char* flag : {"--markdown=", "--html=", "--csv="}) {
    Expect({in, flag + in}, 2, "would write over the report input");
    EXPECT_EQ(ReadFile(in), kLatencyRecord + kLatencyRecord) << flag;
  }
  const std::string csv = tmp_.File("out.csv");
  RunResult r = RunCommand(ReportArgv({in, "--csv=" + csv}), seconds(60));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::vector<std::string> rows = Lines(ReadFile(csv));
  ASSERT_EQ(rows.size(), 3u) << ReadFile(csv);
  EXPECT_EQ(rows[0].rfind("source,benchmark,", 0), 0u) << rows[0];
  EXPECT_EQ(rows[1].rfind(in + ":1,latency,", 0), 0u) << rows[1];
  EXPECT_NE(rows[0].find("latency_us.p50"), std::string::npos) << rows[0];
}

TEST_F(ReportInputTest, BadInputsExitTwoWithOneLine) {
  std::string bad = tmp_.Write("bad.jsonl", kLatencyRecord + "not json\n");
  Expect({bad}, 2, "psbench report: " + bad + ":2: not a JSON object");
  Expect({tmp_.File("missing.jsonl")}, 2, "missing.jsonl': cannot open: No such file or directory");
  // Only regular files, of bounded size: /dev/zero would grow without end, a FIFO wait forever.
  Expect({"/dev/zero"}, 2, "report input '/dev/zero': is a character device, not a regular file");
  Expect({tmp_.path()}, 2, "is a directory, not a regular file");
  Expect({"--max-input-size=8", bad}, 2, "over the 8 bytes limit (raise it with --max-input-size)");
  std::string empty = tmp_.Write("empty.jsonl", "");
  Expect({empty}, 2, empty + ": empty, no records");
  std::string unknown = tmp_.Write("unknown.jsonl", "{\"kind\":\"mystery\"}\n");
  Expect({unknown}, 2, "no record psbench report can tabulate (found 1 mystery");
  // An open loop's figures are checked too: a negative count printed as a large number or 0.
  std::string load = tmp_.Write("load.jsonl", kLatencyRecord.substr(0, kLatencyRecord.size() - 2) +
                                                  R"(,"load":{"offered_per_s":10,"achieved_per_s":"ten","corrected_us":{"p50":1,"p99":2}}})" "\n");
  Expect({load}, 2, load + ":1: not a psbench record: field 'load.achieved_per_s' is not a number");
  // How it was measured is printed from its config ("measure 0 s" without one).
  std::string no_config = tmp_.Write("no_config.jsonl", std::regex_replace(kLatencyRecord, std::regex(R"("config":\{[^}]*\},)"), ""));
  Expect({no_config}, 2, no_config + ":1: not a psbench record: field 'config' is missing (the settings this latency record");
  std::string good = tmp_.Write("good.jsonl", kLatencyRecord);
  Expect({}, 2, "give one or more JSON Lines files");
  Expect({good, "--compare=a"}, 2, "--compare=a: give two different series");
  Expect({good, "--compare=a,grpc/serialized"}, 2, "no series 'a'");
  Expect({good, "--transport=grpc"}, 2, "unknown flag --transport");
  // An output that is a named pipe no process reads: a bounded wait, not a hang.
  const std::string fifo = tmp_.File("md.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  Expect({good, "--markdown=" + fifo}, 2, "--markdown=" + fifo + ": cannot write: a named pipe no process reads");
  // A page is a file with its plots' directory beside it (--html=/dev/null made /dev/null_files).
  Expect({good, "--html=" + fifo}, 2, "--html=" + fifo + ": is not a regular file");
  // Its plots' directory name taken by a file: found before the Markdown is written.
  tmp_.Write("clash_files", "keep");
  const std::string clash_md = tmp_.File("clash.md");
  Expect({good, "--markdown=" + clash_md, "--html=" + tmp_.File("clash.html")}, 2,
         "/clash_files/, which is a file; write the page elsewhere");
  EXPECT_FALSE(std::filesystem::exists(clash_md));
  EXPECT_EQ(ReadFile(tmp_.File("clash_files")), "keep");
  // A full disk is no bad input: exit 1 (it was 2).
  Expect({good, "--markdown=/dev/full"}, 1, "--markdown=/dev/full: cannot write: No space left on device");
  Expect({good, "--csv=/dev/full"}, 1, "--csv=/dev/full: cannot write: No space left on device");
}

TEST_F(ReportInputTest, WithoutPythonOrMatplotlibThePageFailsAndTheMarkdownIsWritten) {
  std::string good = tmp_.Write("good.jsonl", kLatencyRecord);
  // Two sizes make a plot.
  std::string two = tmp_.Write("two.jsonl", kLatencyRecord + std::regex_replace(kLatencyRecord, std::regex("\"payload_bytes\":1"), "\"payload_bytes\":2"));
  std::string md = tmp_.File("out.md"), page = tmp_.File("out.html");
  Expect({two, "--html=" + page, "--markdown=" + md}, 1, "cannot run python3 (/nonexistent/python3)",
         {"PSBENCH_PYTHON=/nonexistent/python3"});
  EXPECT_THAT(ReadFile(md), HasSubstr("## Latency"));
  EXPECT_FALSE(std::filesystem::exists(page));
  // A python3 that cannot import matplotlib (-S: no site-packages).
  std::string no_mpl = tmp_.Write("python-no-site", "#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n");
  chmod(no_mpl.c_str(), 0755);
  std::filesystem::remove(md);
  Expect({two, "--html=" + page, "--markdown=" + md}, 1, "matplotlib is not available", {"PSBENCH_PYTHON=" + no_mpl});
  EXPECT_THAT(ReadFile(md), HasSubstr("## Latency"));
  EXPECT_FALSE(std::filesystem::exists(page));
  // A "python3" that draws nothing and exits 0: no page of missing images.
  std::filesystem::remove(md);
  Expect({two, "--html=" + page, "--markdown=" + md}, 1, "exited 0 without writing", {"PSBENCH_PYTHON=/bin/true"});
  EXPECT_FALSE(std::filesystem::exists(page));
  // One size: no plot, so no Python needed.
  RunResult r = RunCommand(Concat({"/usr/bin/env", "PSBENCH_PYTHON=/nonexistent/python3"},
                                  ReportArgv({good, "--html=" + page})), seconds(60));
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_THAT(ReadFile(page), HasSubstr("data-plots=\"0\""));
}

}  // namespace
}  // namespace psbench::testing
