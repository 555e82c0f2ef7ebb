// psbench run --transports: the same scenario under several transports (here the one gRPC
// transport in its two wire modes, grpc/non-serialized and grpc/serialized), one comparison
// table, per-transport records and "kind":"comparison" records in the JSON.
#include <sys/types.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <csignal>
#include <iostream>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"

namespace psbench::testing {
namespace {

const std::string kBase = "grpc/non-serialized";
const std::string kOther = "grpc/serialized";
const std::string kModes = "--transports=" + kBase + "," + kOther;

class CompareTest : public IntegrationTest {
 protected:
  // Runs psbench run with `flags` and --json; expects exit 0 and returns the records.
  std::vector<Json> Run(const Argv& flags, RunResult* result) {
    const std::string json = tmp_.File("results.jsonl");
    *result = RunCommand(RunArgv(Concat(flags, {"--json=" + json})), seconds(60));
    EXPECT_EQ(result->exit_code, 0) << result->Describe();
    EXPECT_EQ(result->err, "") << result->Describe();
    std::cout << result->out;
    return ReadJsonLines(json);
  }

  // Kills the PS of run `number` (from 0) once its worker is up, and expects `run` to end
  // with exit 1.
  void KillPsOfRun(Process& run, int number) {
    auto worker = WaitForWorkerOfRun(run.pid(), number, 0, seconds(20));
    ASSERT_TRUE(worker) << "no worker for run " << number << ": " << run.Stderr();
    pid_t ps = 0;
    for (const ProcInfo& c : ChildrenOf(run.pid())) {
      if (c.comm == "psbench-ps" && c.state != 'Z') ps = c.pid;
    }
    ASSERT_GT(ps, 0) << "run " << number << "'s PS";
    kill(ps, SIGKILL);
    auto status = run.Wait(seconds(30));
    ASSERT_TRUE(status) << "psbench run still running";
    EXPECT_EQ(*status, 1) << run.Stdout() << run.Stderr();
  }

  TempDir tmp_;
};

std::vector<Json> OfKind(const std::vector<Json>& records, bool comparison) {
  std::vector<Json> out;
  for (const Json& r : records) {
    if ((r.value("kind", "") == "comparison") == comparison) out.push_back(r);
  }
  return out;
}

double Headline(const Json& record, const std::string& metric) {
  if (metric == "p50_us") return record["latency_us"]["p50"].get<double>();
  if (metric == "p99_us") return record["latency_us"]["p99"].get<double>();
  if (metric == "mean_us") return record["latency_us"]["mean"].get<double>();
  return record[metric].get<double>();
}

// The stdout line of the table's row for `bytes` in the table of `benchmark` (titled
// "# Latency", ...).
std::string TableRow(const std::string& out, const std::string& benchmark, uint64_t bytes) {
  bool in_block = false;
  for (const std::string& line : Lines(out)) {
    if (line == "# Latency" || line == "# Bandwidth" || line == "# Throughput") {
      std::string title = benchmark;
      title[0] = static_cast<char>(std::toupper(title[0]));
      in_block = line == "# " + title;
      continue;
    }
    if (!in_block || line.empty() || line[0] == '#') continue;
    std::vector<std::string> words;
    for (size_t i = 0; i < line.size();) {
      size_t j = line.find_first_not_of(' ', i);
      if (j == std::string::npos) break;
      size_t k = line.find(' ', j);
      words.push_back(line.substr(j, k == std::string::npos ? std::string::npos : k - j));
      i = k == std::string::npos ? line.size() : k;
    }
    if (words.size() >= 2 && words[1] == std::to_string(bytes)) return line;
  }
  return "";
}

// A comparison record against the per-transport records it was made from (in run order:
// every row of the first transport, then every row of the second). `metrics`: every figure
// of the benchmark; `compared`: those the table shows a ratio of.
void ExpectComparison(const Json& c, const Json& base, const Json& other, const std::vector<std::string>& metrics,
                      const std::vector<std::string>& compared, const std::string& out) {
  SCOPED_TRACE("comparison: " + c.dump());
  EXPECT_EQ(c.value("kind", ""), "comparison");
  EXPECT_EQ(c["benchmark"], base["benchmark"]);
  EXPECT_EQ(c["scheme"], base["scheme"]);
  EXPECT_EQ(c["buffers"], base["buffers"]);
  EXPECT_EQ(c["payload_bytes"], base["payload_bytes"]);
  EXPECT_EQ(c["buffers"], other["buffers"]) << "the same payload under both";
  EXPECT_EQ(c.value("baseline", ""), kBase);
  EXPECT_EQ(c.value("better", ""), base["benchmark"] == "latency" ? "lower" : "higher");
  ASSERT_EQ(c["transports"].size(), 2u);
  EXPECT_EQ(c["transports"][0], Json({{"label", kBase}, {"transport", "grpc"},
                                      {"mode", "non-serialized"}}));
  EXPECT_EQ(c["transports"][1], Json({{"label", kOther}, {"transport", "grpc"},
                                      {"mode", "serialized"}}));
  EXPECT_EQ(base.value("mode", ""), "non-serialized");
  EXPECT_EQ(other.value("mode", ""), "serialized");
  EXPECT_EQ(c["iterations"], Json({base["iterations"], other["iterations"]}));
  ASSERT_EQ(c["values"].size(), metrics.size());
  const std::string row = TableRow(out, base["benchmark"], base["payload_bytes"]);
  EXPECT_NE(row, "") << "a table row for " << base["payload_bytes"] << "\n" << out;
  for (const std::string& m : metrics) {
    SCOPED_TRACE(m);
    const Json& v = c["values"][m];
    const Json& r = c["ratios"][m];
    ASSERT_EQ(v.size(), 2u);
    ASSERT_EQ(r.size(), 2u);
    if (m == "p99_us" && base["iterations"].get<int>() < 100) {
      EXPECT_TRUE(v[0].is_null() && v[1].is_null() && r[1].is_null()) << "a p99 of fewer than 100 iterations";
      continue;
    }
    EXPECT_DOUBLE_EQ(v[0].get<double>(), Headline(base, m));
    EXPECT_DOUBLE_EQ(v[1].get<double>(), Headline(other, m));
    EXPECT_GT(v[0].get<double>(), 0);
    EXPECT_DOUBLE_EQ(r[0].get<double>(), 1.0);
    EXPECT_NEAR(r[1].get<double>(), v[1].get<double>() / v[0].get<double>(),
                1e-12 * r[1].get<double>());
    // The table shows the same ratio.
    if (std::find(compared.begin(), compared.end(), m) == compared.end()) continue;
    char ratio[32];
    std::snprintf(ratio, sizeof(ratio), "%.2fx", r[1].get<double>());
    EXPECT_NE(row.find(ratio), std::string::npos) << ratio << " in '" << row << "'";
  }
}

void ExpectTableHeader(const std::string& out) {
  EXPECT_NE(out.find("# psbench comparison: " + kBase + " | " + kOther + " (baseline = " + kBase +
                     ")"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("# B / A: B's figure divided by A's"), std::string::npos) << out;
  EXPECT_NE(out.find(kOther + " / " + kBase), std::string::npos) << "a ratio column\n" << out;
}

TEST_F(CompareTest, LatencyUnderBothWireModes) {
  RunResult run;
  auto records = Run({"--benchmark=latency", kModes, "--validate", "--warmup-iterations=3",
                      "--iterations=30"},
                     &run);
  ExpectTableHeader(run.out);
  EXPECT_NE(run.out.find("# Latency\n# Round trip in µs, lower is better."), std::string::npos);
  auto runs = OfKind(records, false);
  auto comparisons = OfKind(records, true);
  ASSERT_EQ(runs.size(), 2u);
  ASSERT_EQ(comparisons.size(), 1u);
  for (const Json& r : runs) {
    EXPECT_EQ(r.value("transport", ""), "grpc");
    EXPECT_EQ(r.value("iterations", 0), 30);
    EXPECT_FALSE(r.contains("kind")) << "per-transport records are the usual records";
  }
  EXPECT_NE(runs[0]["placement"]["ps"][0]["pid"], runs[1]["placement"]["ps"][0]["pid"])
      << "a fresh PS for each transport";
  ExpectComparison(comparisons[0], runs[0], runs[1], {"p50_us", "p99_us", "mean_us"}, {"p50_us", "p99_us"}, run.out);
}

TEST_F(CompareTest, BandwidthSweepGivesOneComparedRowPerSize) {
  RunResult run;
  auto records = Run({"--benchmark=bandwidth", kModes, "--sizes=1K:4K", "--window=4",
                      "--warmup-iterations=2", "--iterations=20"},
                     &run);
  ExpectTableHeader(run.out);
  auto runs = OfKind(records, false);
  auto comparisons = OfKind(records, true);
  ASSERT_EQ(runs.size(), 6u) << "3 sizes under each transport";
  ASSERT_EQ(comparisons.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE("size " + std::to_string(1024 << i));
    EXPECT_EQ(runs[i].value("payload_bytes", 0), 1024 << i);
    ExpectComparison(comparisons[i], runs[i], runs[3 + i], {"mb_per_s"}, {"mb_per_s"}, run.out);
  }
}

TEST_F(CompareTest, ThroughputComparesTheTotals) {
  RunResult run;
  auto records = Run({"--benchmark=throughput", kModes, "--num-ps=2", "--num-workers=2",
                      "--warmup-iterations=2", "--iterations=20"},
                     &run);
  ExpectTableHeader(run.out);
  auto runs = OfKind(records, false);
  auto comparisons = OfKind(records, true);
  ASSERT_EQ(runs.size(), 6u) << "2 workers and the total, under each transport";
  ASSERT_EQ(comparisons.size(), 1u);
  EXPECT_EQ(runs[2].value("scope", ""), "total");
  EXPECT_EQ(runs[5].value("scope", ""), "total");
  EXPECT_EQ(comparisons[0].value("scope", ""), "total");
  ExpectComparison(comparisons[0], runs[2], runs[5], {"rpc_per_s", "mb_per_s"}, {"rpc_per_s"}, run.out);
}

TEST_F(CompareTest, EntriesWithoutModeUseModeAndAreLabelledByTransport) {
  // One transport here, so the same mode twice must be refused, and a mode per entry is the
  // only way to compare; what this checks is that --mode fills in entries without /MODE.
  RunResult run;
  auto records = Run({"--benchmark=latency", "--mode=serialized",
                      "--transports=grpc/non-serialized,grpc", "--warmup-iterations=2",
                      "--iterations=10"},
                     &run);
  auto comparisons = OfKind(records, true);
  ASSERT_EQ(comparisons.size(), 1u);
  EXPECT_EQ(comparisons[0]["transports"][1].value("mode", ""), "serialized");
  EXPECT_EQ(comparisons[0]["transports"][1].value("label", ""), "grpc/serialized");
}

// A transport whose run fails: what completed is printed, stderr names the transport, exit 1.
TEST_F(CompareTest, FailedTransportIsNamedAfterWhatCompleted) {
  const std::string json = tmp_.File("results.jsonl");
  Process run(RunArgv({"--benchmark=latency", kModes, "--warmup-iterations=2", "--duration=3s",
                       "--json=" + json}));
  // The second transport's run is run number 1.
  ASSERT_NO_FATAL_FAILURE(KillPsOfRun(run, 1));
  // psbench's line last; before it at most the worker's own (when the kill caught it
  // connecting or measuring, it says what it saw).
  auto err = Lines(run.Stderr());
  ASSERT_GE(err.size(), 1u) << run.Stderr();
  ASSERT_LE(err.size(), 2u) << run.Stderr();
  if (err.size() == 2) {
    EXPECT_EQ(err[0].rfind("psbench-worker: ", 0), 0u) << run.Stderr();
  }
  EXPECT_EQ(err.back().rfind("psbench: transport " + kOther + ": latency uniform: ", 0), 0u)
      << err.back();
  const std::string out = run.Stdout();
  ExpectTableHeader(out);
  auto records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 1u) << "the first transport's record, and no comparison";
  EXPECT_EQ(records[0].value("mode", ""), "non-serialized");
  const std::string row = TableRow(out, "latency", records[0]["payload_bytes"]);
  EXPECT_NE(row, "") << out;
  char p50[32];
  std::snprintf(p50, sizeof(p50), "%.2f", records[0]["latency_us"]["p50"].get<double>());
  EXPECT_NE(row.find(p50), std::string::npos) << "the first transport's figures: " << row;
  EXPECT_NE(row.find(" -"), std::string::npos) << "no figures for the failed transport: " << row;
}

// The values of `metric` in `records`.
std::vector<double> Values(const std::vector<Json>& records, const std::string& metric) {
  std::vector<double> out;
  for (const Json& r : records) out.push_back(Headline(r, metric));
  return out;
}

double MedianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double SpreadOf(const std::vector<double>& v) {
  return *std::max_element(v.begin(), v.end()) / *std::min_element(v.begin(), v.end());
}

// --repetitions with --transports: A, B, A, B, A, B, each with fresh processes; the table and
// the comparison record give each entry's median and its spread.
TEST_F(CompareTest, RepetitionsAlternateTheEntriesAndGiveMediansAndSpread) {
  RunResult run;
  auto records = Run({"--benchmark=latency", kModes, "--repetitions=3", "--warmup-iterations=2", "--iterations=20"},
                     &run);
  EXPECT_NE(run.out.find("(baseline = " + kBase + ") | 3 repetitions, the entries alternating"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("# run 4/6: " + kOther + ": latency uniform (repetition 2/3) done"), std::string::npos)
      << run.out;
  auto runs = OfKind(records, false);
  auto comparisons = OfKind(records, true);
  ASSERT_EQ(runs.size(), 6u);
  ASSERT_EQ(comparisons.size(), 1u);
  std::vector<Json> base, other;
  std::set<int> ps_pids;
  for (size_t i = 0; i < runs.size(); ++i) {
    SCOPED_TRACE("run " + std::to_string(i));
    EXPECT_EQ(runs[i].value("mode", ""), i % 2 == 0 ? "non-serialized" : "serialized") << "the entries alternate";
    EXPECT_EQ(runs[i]["repetition"], Json({{"index", i / 2 + 1}, {"of", 3}}));
    ps_pids.insert(runs[i]["placement"]["ps"][0]["pid"].get<int>());
    (i % 2 == 0 ? base : other).push_back(runs[i]);
  }
  EXPECT_EQ(ps_pids.size(), 6u) << "a fresh PS for every run";
  const Json& c = comparisons[0];
  EXPECT_EQ(c["measurements"], Json({3, 3}));
  for (const std::string m : {"p50_us", "mean_us"}) {
    SCOPED_TRACE(m);
    EXPECT_DOUBLE_EQ(c["values"][m][0].get<double>(), MedianOf(Values(base, m)));
    EXPECT_DOUBLE_EQ(c["values"][m][1].get<double>(), MedianOf(Values(other, m)));
    EXPECT_DOUBLE_EQ(c["spread"][m][0].get<double>(), SpreadOf(Values(base, m)));
    EXPECT_DOUBLE_EQ(c["spread"][m][1].get<double>(), SpreadOf(Values(other, m)));
    EXPECT_GE(c["spread"][m][0].get<double>(), 1.0);
  }
  // The table: a spread column per entry, holding the p50s' spread.
  EXPECT_NE(run.out.find("# spread: the largest p50 µs over the smallest"), std::string::npos) << run.out;
  const std::string row = TableRow(run.out, "latency", base[0]["payload_bytes"]);
  char spread[32];
  std::snprintf(spread, sizeof(spread), "%.2fx", SpreadOf(Values(other, "p50_us")));
  EXPECT_NE(row.find(spread), std::string::npos) << spread << " in '" << row << "'";
}

// --repetitions without --transports: each run's rows as usual, then one table of the
// medians and spreads of the one transport, and its records.
TEST_F(CompareTest, RepetitionsOfOneTransportEndWithTheirSummary) {
  RunResult run;
  auto records = Run({"--benchmark=bandwidth", "--sizes=1K:2K", "--window=4", "--repetitions=2",
                      "--warmup-iterations=2", "--iterations=20"},
                     &run);
  EXPECT_NE(run.out.find("# repetition 2/2\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("# psbench repetitions: grpc | mode non-serialized | 2 runs of each"), std::string::npos)
      << run.out;
  auto runs = OfKind(records, false);
  auto summary = OfKind(records, true);
  ASSERT_EQ(runs.size(), 4u) << "2 sizes, twice";
  ASSERT_EQ(summary.size(), 2u) << "a row per size";
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i]["repetition"], Json({{"index", i / 2 + 1}, {"of", 2}}));
    EXPECT_EQ(runs[i].value("payload_bytes", 0), 1024 << (i % 2));
  }
  EXPECT_NE(runs[0]["placement"]["ps"][0]["pid"], runs[2]["placement"]["ps"][0]["pid"]) << "fresh processes";
  for (size_t size = 0; size < 2; ++size) {
    SCOPED_TRACE("size " + std::to_string(1024 << size));
    const Json& c = summary[size];
    EXPECT_EQ(c.value("payload_bytes", 0), 1024 << size);
    EXPECT_EQ(c["transports"].size(), 1u);
    EXPECT_FALSE(c.contains("ratios")) << "one series: nothing to divide by";
    EXPECT_FALSE(c.contains("baseline"));
    EXPECT_EQ(c["measurements"], Json({2}));
    const std::vector<double> mb = Values({runs[size], runs[2 + size]}, "mb_per_s");
    EXPECT_DOUBLE_EQ(c["values"]["mb_per_s"][0].get<double>(), MedianOf(mb));
    EXPECT_DOUBLE_EQ(c["spread"]["mb_per_s"][0].get<double>(), SpreadOf(mb));
  }
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// An open-loop sweep, repeated under two entries: each entry's repetitions are sweeps of
// their own (a table and a knee verdict each; rates rising), and --hdr-out names them.
TEST_F(CompareTest, RepeatedSweepsGetATableAndKneeEach) {
  RunResult run;
  const std::string hdr = tmp_.File("h");
  auto records = Run({"--benchmark=latency", kModes, "--sizes=64:64", "--repetitions=2",
                      "--load-sweep=poisson:200..400*2", "--warmup=0.1s", "--duration=0.3s", "--hdr-out=" + hdr},
                     &run);
  EXPECT_EQ(OfKind(records, false).size(), 8u) << "2 rates x 2 repetitions x 2 entries";
  EXPECT_EQ(Count(run.out, "# open-loop load, "), 4u) << run.out;
  for (const std::string& e : {kBase, kOther}) {
    for (const char* rep : {"repetition 1/2", "repetition 2/2"}) {
      EXPECT_NE(run.out.find("# open-loop load, " + e + ", latency 1x64B, poisson, " + std::string(rep) + ":"),
                std::string::npos)
          << e << " " << rep << "\n" << run.out;
    }
  }
  EXPECT_EQ(Count(run.out, "knee"), 4u) << "a verdict per sweep\n" << run.out;
  EXPECT_EQ(Count(run.out, "# wrote " + hdr), 8u) << run.out;
  EXPECT_NE(run.out.find("poisson:400 worker 0 repetition 2/2"), std::string::npos) << run.out;
}

// A repetition that fails: the summary of those that completed is printed, not saved, and
// stderr names the repetition; exit 1.
TEST_F(CompareTest, AFailedRepetitionLeavesTheSummaryOfTheOthers) {
  const std::string json = tmp_.File("results.jsonl");
  Process run(RunArgv({"--benchmark=latency", "--repetitions=3", "--warmup-iterations=2", "--duration=3s",
                       "--json=" + json}));
  // Repetition 2 is run number 1.
  ASSERT_NO_FATAL_FAILURE(KillPsOfRun(run, 1));
  auto err = Lines(run.Stderr());
  ASSERT_GE(err.size(), 1u) << run.Stderr();
  EXPECT_EQ(err.back().rfind("psbench: latency uniform (repetition 2/3): ", 0), 0u) << err.back();
  const std::string out = run.Stdout();
  EXPECT_NE(out.find("# psbench repetitions: grpc | mode non-serialized | 3 runs of each, fresh processes for each | "
                     "stopped at a failure: of the runs that completed\n"),
            std::string::npos)
      << out;
  auto records = ReadJsonLines(json);
  std::vector<Json> runs = OfKind(records, false);
  ASSERT_GE(runs.size(), 1u);
  EXPECT_EQ(runs[0]["repetition"], Json({{"index", 1}, {"of", 3}}));
  EXPECT_TRUE(OfKind(records, true).empty()) << "no summary records after a failure";
  const std::string row = TableRow(out.substr(out.find("# psbench repetitions")), "latency", runs[0]["payload_bytes"]);
  char p50[32];
  std::snprintf(p50, sizeof(p50), "%.2f", runs[0]["latency_us"]["p50"].get<double>());
  EXPECT_NE(row.find(p50), std::string::npos) << "repetition 1's figures: " << row;
}

// --- bad input: exit 2, one line on stderr, nothing run -------------------------------------

struct BadList {
  std::string name;
  Argv args;
  std::vector<std::string> keywords;
};

// How gtest shows a case (also in ctest's test names): the flags.
void PrintTo(const BadList& c, std::ostream* os) {
  *os << "psbench run";
  for (const auto& a : c.args) *os << " " << a;
}

class CompareBadInputTest : public IntegrationTest,
                            public ::testing::WithParamInterface<BadList> {};

TEST_P(CompareBadInputTest, ExitsTwoWithOneLine) {
  const BadList& c = GetParam();
  RunResult r = RunCommand(
      RunArgv(Concat({"--benchmark=latency", "--warmup=0s", "--iterations=3"}, c.args)),
      seconds(30));
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  auto lines = r.ErrLines();
  ASSERT_EQ(lines.size(), 1u) << r.Describe();
  EXPECT_EQ(lines[0].rfind("psbench: ", 0), 0u) << r.Describe();
  for (const auto& k : c.keywords) {
    EXPECT_NE(lines[0].find(k), std::string::npos) << "names '" << k << "'\n" << r.Describe();
  }
  EXPECT_EQ(r.out, "") << r.Describe();
}

INSTANTIATE_TEST_SUITE_P(
    Lists, CompareBadInputTest,
    ::testing::Values(
        BadList{"OneEntry", {"--transports=grpc"}, {"--transports=grpc", "at least two"}},
        BadList{"Empty", {"--transports="}, {"--transports=", "at least two"}},
        BadList{"EmptyEntry", {"--transports=grpc/serialized,"}, {"--transports", "empty entry"}},
        BadList{"UnknownTransport",
                {"--transports=grpc,nope"},
                {"--transports=grpc,nope", "nope is not a transport", "available: grpc"}},
        BadList{"Duplicate", {"--transports=grpc,grpc"}, {"--transports=grpc,grpc", "twice"}},
        BadList{"DuplicateWithModes",
                {"--transports=grpc/serialized,grpc/non-serialized,grpc/serialized"},
                {"grpc/serialized is listed twice"}},
        BadList{"DuplicateThroughMode",
                {"--mode=serialized", "--transports=grpc,grpc/serialized"},
                {"grpc/serialized is listed twice", "--mode=serialized"}},
        BadList{"WithTransport",
                {"--transport=grpc", "--transports=grpc/serialized,grpc/non-serialized"},
                {"--transport", "--transports", "not both"}},
        BadList{"BadMode",
                {"--transports=grpc/fast,grpc/serialized"},
                {"--transports", "grpc/fast", "'fast' is not a mode"}},
        BadList{"EmptyMode", {"--transports=grpc/,grpc/serialized"}, {"'' is not a mode"}}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace psbench::testing
