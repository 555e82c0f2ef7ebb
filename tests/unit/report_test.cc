// psbench report's data side from hand-written records: series, rows, medians, ratios,
// throughput totals, plot data, Markdown and HTML, and every bad input it refuses.
#include "cli/report/report_data.h"

#include <cstdio>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/report/report_csv.h"
#include "cli/report/report_render.h"

namespace psbench::report {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

json Base(const std::string& bench, const std::string& transport, const std::string& mode, double bytes) {
  return {{"benchmark", bench},
          {"transport", transport},
          {"mode", mode},
          {"scheme", "sweep"},
          {"payload_bytes", static_cast<uint64_t>(bytes)},
          {"payload_summary", "1x" + std::to_string(static_cast<uint64_t>(bytes)) + "B"},
          {"iterations", 200},
          {"workers", 1},
          {"ps", 1},
          {"scope", "worker"},
          {"seed", 7},
          {"validate", false},
          {"config", {{"warmup_iterations", 20}, {"iterations", 200}, {"window", 16}, {"outstanding", 8}, {"run_id", "r1"}}},
          {"environment",
           {{"host", "node1"},
            {"kernel", "Linux 6.1"},
            {"cpu_model", "Xeon"},
            {"online_cpus", 8},
            {"versions", {{"psbench", "0.1.0"}, {"grpc", "1.51.1"}, {"protobuf", "3.21.12"}, {"compiler", "g++ 12"}}}}},
          {"timestamp", "2025-01-01T00:00:00Z"}};
}

json Latency(const std::string& mode, double bytes, double p50, double p99, double mean, int iterations = 200) {
  json r = Base("latency", "grpc", mode, bytes);
  r["latency_us"] = {{"min", p50 / 2}, {"p50", p50}, {"p90", p99}, {"p99", p99}, {"p999", p99},
                     {"max", p99}, {"mean", mean}, {"stdev", 0.0}};
  r["iterations"] = iterations;
  return r;
}

json Bandwidth(const std::string& label, double bytes, double mbps) {
  json r = Base("bandwidth", "grpc", "non-serialized", bytes);
  r["label"] = label;
  r["mb_per_s"] = mbps;
  return r;
}

json Throughput(const std::string& mode, const std::string& scope, int workers, int ps, double rpc, double mbps) {
  json r = Base("throughput", "grpc", mode, 4096);
  r["scope"] = scope;
  r["workers"] = workers;
  r["ps"] = ps;
  r["rpc_per_s"] = rpc;
  r["mb_per_s"] = mbps;
  r["config"]["run_id"] = "run-" + mode + "-" + std::to_string(workers) + "x" + std::to_string(ps);
  return r;
}

std::vector<Input> Records(const std::vector<json>& list) {
  std::vector<Input> out;
  for (size_t i = 0; i < list.size(); ++i) {
    auto r = RecordFromJson(list[i]);
    EXPECT_TRUE(r.ok()) << r.status() << " in " << list[i].dump();
    out.push_back({r.ok() ? *r : psbench::Record{}, "t.jsonl:" + std::to_string(i + 1)});
  }
  return out;
}

std::string SeriesKey(const json& j) { return RecordFromJson(j)->Series(); }

Report Build(const std::vector<json>& list, ReportOptions options = {}) {
  options.inputs = {"t.jsonl"};
  auto r = BuildReport(Records(list), options);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : Report{};
}

const Table* FindTable(const Report& r, const std::string& id) {
  for (const Table& t : r.tables) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

// Every column's full name: its series (or ratio) and its figure.
std::vector<std::string> Columns(const Table& t) {
  std::vector<std::string> out;
  for (size_t i = 0; i < t.columns.size(); ++i) out.push_back(t.FullColumn(i));
  return out;
}

std::string HeaderValue(const Report& r, const std::string& key) {
  for (const auto& [k, v] : r.header) {
    if (k == key) return v;
  }
  return "";
}

TEST(ReportSeriesTest, LabelElseTransportSlashMode) {
  json r = Latency("serialized", 1, 1, 1, 1);
  EXPECT_EQ(SeriesKey(r), "grpc/serialized");
  r["label"] = "ipoib";
  EXPECT_EQ(SeriesKey(r), "ipoib");
  r["label"] = "";
  EXPECT_EQ(SeriesKey(r), "grpc/serialized");
}

TEST(ReportLatencyTest, ColumnGroupPerSeriesAndRatioOfTheFirstTwo) {
  Report r = Build({Latency("non-serialized", 1, 10, 20, 11), Latency("non-serialized", 1024, 20, 40, 21),
                    Latency("serialized", 1, 15, 30, 16), Latency("serialized", 1024, 50, 60, 51)});
  EXPECT_THAT(r.series, ElementsAre("grpc/non-serialized", "grpc/serialized"));
  ASSERT_TRUE(r.compare);
  EXPECT_EQ(r.compare->first, "grpc/non-serialized");
  const Table* t = FindTable(r, "latency");
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(Columns(*t),
              ElementsAre("scheme", "bytes", "grpc/non-serialized p50 µs", "grpc/non-serialized p99 µs",
                          "grpc/non-serialized mean µs", "grpc/serialized p50 µs", "grpc/serialized p99 µs",
                          "grpc/serialized mean µs", "grpc/serialized / grpc/non-serialized p50",
                          "grpc/serialized / grpc/non-serialized p99"));
  ASSERT_EQ(t->rows.size(), 2u);
  EXPECT_THAT(t->rows[0], ElementsAre("sweep", "1", "10.00", "20.00", "11.00", "15.00", "30.00", "16.00", "1.50x", "1.50x"));
  EXPECT_THAT(t->rows[1], ElementsAre("sweep", "1024", "20.00", "40.00", "21.00", "50.00", "60.00", "51.00", "2.50x", "1.50x"));
  // The latency plot and its ratio: p50 solid and p99 dashed per series.
  ASSERT_EQ(r.plots.size(), 2u);
  EXPECT_EQ(r.plots[0].file, "01-latency-sweep.svg");
  ASSERT_EQ(r.plots[0].panels.size(), 1u);
  const auto& lines = r.plots[0].panels[0].lines;
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].label, "grpc/non-serialized p50");
  EXPECT_EQ(lines[1].style, "dashed");
  EXPECT_THAT(lines[2].x, ElementsAre(1, 1024));
  EXPECT_THAT(lines[2].y, ElementsAre(15, 50));
  EXPECT_TRUE(r.plots[0].panels[0].ylog);
  EXPECT_EQ(r.plots[1].file, "02-latency-sweep-ratio.svg");
  const auto& ratio = r.plots[1].panels[0];
  EXPECT_EQ(ratio.reference, 1.0);
  ASSERT_EQ(ratio.lines.size(), 2u);
  EXPECT_THAT(ratio.lines[0].y, ElementsAre(1.5, 2.5));
  EXPECT_THAT(ratio.lines[1].y, ElementsAre(1.5, 1.5));
}

TEST(ReportLatencyTest, CompareChoosesAndOrdersTheRatio) {
  ReportOptions o;
  o.compare = std::pair{std::string("grpc/serialized"), std::string("grpc/non-serialized")};
  Report r = Build({Latency("non-serialized", 1, 10, 20, 11), Latency("serialized", 1, 15, 30, 16)}, o);
  const Table* t = FindTable(r, "latency");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Columns(*t).back(), "grpc/non-serialized / grpc/serialized p99");
  EXPECT_EQ(t->rows[0][8], "0.67x");  // 10 / 15
}

TEST(ReportLatencyTest, RepeatedRowsShowTheMedianAndShortRunsNoP99) {
  Report r = Build({Latency("non-serialized", 8, 10, 99, 1), Latency("non-serialized", 8, 30, 99, 3),
                    Latency("non-serialized", 8, 20, 99, 2), Latency("non-serialized", 16, 5, 99, 5, 50)});
  const Table* t = FindTable(r, "latency");
  ASSERT_NE(t, nullptr);
  // The spread of the p50s: 30 / 10; none for a size measured once.
  EXPECT_THAT(t->rows[0], ElementsAre("sweep", "8", "20.00", "99.00", "2.00", "3.00x"));
  EXPECT_THAT(t->rows[1], ElementsAre("sweep", "16", "5.00", "-", "5.00", "-"));  // 50 iterations
  EXPECT_THAT(t->notes, ::testing::Contains(HasSubstr("median")));
  EXPECT_THAT(t->notes, ::testing::Contains(HasSubstr("spread: the largest p50 µs over the smallest")));
  EXPECT_FALSE(r.compare);  // one series: no ratio
  ASSERT_EQ(r.plots.size(), 1u);
  // The p99 line has only the point measured long enough.
  EXPECT_THAT(r.plots[0].panels[0].lines[1].x, ElementsAre(8));
}

// An open-loop latency record at `rate`/s: corrected p50 and p99, achieved as given.
json OpenLoop(const std::string& mode, double rate, double achieved, double p50, double p99, uint64_t dropped = 0) {
  json r = Latency(mode, 1024, p50, p99, p50);
  r["load"] = {{"schedule", "poisson:" + std::to_string(static_cast<int>(rate))},
               {"kind", "poisson"},
               {"rate_per_s", rate},
               {"offered_per_s", rate},
               {"achieved_per_s", achieved},
               {"deferred", dropped},
               {"dropped", dropped},
               {"corrected_us", {{"p50", p50}, {"p99", p99}, {"p999", p99}, {"p9999", p99}}},
               {"uncorrected_us", {{"p50", p50 / 2}, {"p99", p99 / 2}}},
               {"lag_us", {{"p99", 1.0}}}};
  return r;
}

// A sweep's rates are rows of their own in the comparison, and each series gets a table of
// its rates with the knee and a plot against achieved rate marking it; no plot against size.
TEST(ReportLoadTest, SweepTablesAndPlotsPerSeriesWithTheKnee) {
  Report r = Build({OpenLoop("non-serialized", 1000, 1000, 50, 100), OpenLoop("non-serialized", 2000, 2000, 50, 110),
                    OpenLoop("non-serialized", 4000, 3000, 900, 5000, 12), OpenLoop("serialized", 1000, 1000, 60, 120),
                    OpenLoop("serialized", 2000, 2000, 60, 130), OpenLoop("serialized", 4000, 4000, 61, 140)});
  const Table* t = FindTable(r, "latency");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->rows.size(), 3u) << "one row per rate";
  EXPECT_EQ(t->rows[2][2], "poisson:4000");
  const Table* a = FindTable(r, "load-2");
  const Table* b = FindTable(r, "load-3");
  ASSERT_TRUE(a && b);
  EXPECT_THAT(a->title, HasSubstr("grpc/non-serialized"));
  EXPECT_THAT(a->notes, ::testing::Contains(HasSubstr("Knee: 4000/s offered (3000/s achieved)")));
  EXPECT_THAT(b->notes, ::testing::Contains(HasSubstr("No knee up to 4000/s")));
  ASSERT_EQ(a->rows.size(), 3u);
  EXPECT_THAT(a->rows[2], ElementsAre("4000", "3000", "900.0", "5000.0", "5000.0", "5000.0", "450.0", "2500.0", "1.0", "12", "12"));
  ASSERT_EQ(r.plots.size(), 2u) << "a plot per series against rate, none against size";
  const Plot& p = r.plots[0];
  EXPECT_EQ(p.xaxis, Plot::XAxis::kRate);
  ASSERT_EQ(p.panels.size(), 1u);
  EXPECT_THAT(p.panels[0].lines[1].x, ElementsAre(1000, 2000, 3000));
  ASSERT_EQ(p.panels[0].marks.size(), 1u);
  EXPECT_EQ(p.panels[0].marks[0].first, 3000);
  EXPECT_TRUE(r.plots[1].panels[0].marks.empty());
  EXPECT_EQ(PlotData(r)["plots"][0]["xaxis"], "rate");
  EXPECT_EQ(PlotData(r)["plots"][0]["panels"][0]["marks"][0]["label"], "knee");
}

// A sweep repeated (--repetitions): each rate's row holds each figure's median over its
// measurements, how many there were and the spread of p99; the knee comes from the medians, so
// one repetition's bad tail at a rate does not make the knee.
TEST(ReportLoadTest, RepeatedRatesShowMediansAndTheKneeOfTheMedians) {
  Report r = Build({OpenLoop("non-serialized", 1000, 1000, 50, 100), OpenLoop("non-serialized", 2000, 2000, 50, 110),
                    OpenLoop("non-serialized", 4000, 4000, 51, 120), OpenLoop("non-serialized", 1000, 1000, 52, 104),
                    OpenLoop("non-serialized", 2000, 1990, 900, 9000, 3), OpenLoop("non-serialized", 4000, 3900, 53, 130),
                    OpenLoop("non-serialized", 1000, 1000, 54, 102), OpenLoop("non-serialized", 2000, 2000, 51, 115),
                    OpenLoop("non-serialized", 4000, 3990, 52, 125)});
  const Table* a = FindTable(r, "load-2");
  ASSERT_NE(a, nullptr);
  EXPECT_THAT(a->columns, ::testing::IsSupersetOf({"runs", "p99 spread"}));
  ASSERT_EQ(a->rows.size(), 3u) << "one row per rate";
  EXPECT_THAT(a->rows[0], ElementsAre("1000", "1000", "52.0", "102.0", "102.0", "102.0", "26.0", "51.0", "1.0", "0", "0",
                                      "3", "1.04x"));
  EXPECT_THAT(a->rows[1], ElementsAre("2000", "2000", "51.0", "115.0", "115.0", "115.0", "25.5", "57.5", "1.0", "0", "0",
                                      "3", "81.82x"));
  EXPECT_THAT(a->rows[2][1], "3990");
  EXPECT_THAT(a->notes, ::testing::Contains(HasSubstr("No knee up to 4000/s")));
  EXPECT_THAT(a->notes, ::testing::Contains(HasSubstr("its own median over the measurements")));
  ASSERT_EQ(r.plots.size(), 1u);
  EXPECT_THAT(r.plots[0].panels[0].lines[1].y, ElementsAre(102, 115, 125));
}

// A repetition that completed nothing at a rate (p99 0) leaves that rate's spread unsaid, and
// an even count of drops rounds alike in the row and in the knee.
TEST(ReportLoadTest, RepeatedRateWithNothingCompletedHasNoSpread) {
  Report r = Build({OpenLoop("non-serialized", 1000, 1000, 50, 100), OpenLoop("non-serialized", 1000, 0, 0, 0, 3),
                    OpenLoop("non-serialized", 1000, 1000, 50, 200), OpenLoop("non-serialized", 2000, 2000, 50, 100),
                    OpenLoop("non-serialized", 2000, 2000, 50, 100, 3)});
  const Table* a = FindTable(r, "load-2");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->rows.size(), 2u);
  EXPECT_EQ(a->rows[0].back(), "-");
  EXPECT_EQ(a->rows[1][10], "2") << "the median of 0 and 3 drops, rounded";
  EXPECT_EQ(a->rows[1].back(), "1.00x");
}

TEST(ReportBandwidthTest, LabelsAreSeriesAndOneSizeMakesNoPlot) {
  Report r = Build({Bandwidth("ipoib", 65536, 1000), Bandwidth("rdma", 65536, 3000)});
  EXPECT_THAT(r.series, ElementsAre("ipoib", "rdma"));
  const Table* t = FindTable(r, "bandwidth");
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->rows[0], ElementsAre("sweep", "65536", "1000.00", "3000.00", "3.00x"));
  EXPECT_TRUE(r.plots.empty());
  EXPECT_EQ(HeaderValue(r, "Series"), "ipoib = grpc/non-serialized; rdma = grpc/non-serialized");
}

TEST(ReportThroughputTest, TotalsPerTopologyAndPlotsAgainstWorkersAndPs) {
  std::vector<json> in;
  for (const std::string mode : {"non-serialized", "serialized"}) {
    double f = mode == "serialized" ? 0.5 : 1.0;
    for (auto [w, ps] : {std::pair{1, 1}, {2, 1}, {1, 2}, {2, 2}}) {
      in.push_back(Throughput(mode, "worker", w, ps, 1, 1));  // ignored: the run has a total
      in.push_back(Throughput(mode, "total", w, ps, f * 1000 * w * ps, f * 4 * w * ps));
    }
  }
  Report r = Build(in);
  const Table* t = FindTable(r, "throughput");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->rows.size(), 4u);  // by PS, then workers
  EXPECT_THAT(t->rows[0], ElementsAre("sweep", "4096", "1", "1", "1000.0", "4.00", "500.0", "2.00", "0.50x"));
  EXPECT_THAT(t->rows[1], ElementsAre("sweep", "4096", "2", "1", "2000.0", "8.00", "1000.0", "4.00", "0.50x"));
  EXPECT_THAT(t->rows[3], ElementsAre("sweep", "4096", "2", "2", "4000.0", "16.00", "2000.0", "8.00", "0.50x"));
  // vs workers (+ ratio), vs PS (+ ratio)
  ASSERT_EQ(r.plots.size(), 4u);
  const Plot& by_workers = r.plots[0];
  EXPECT_EQ(by_workers.xaxis, Plot::XAxis::kCount);
  EXPECT_EQ(by_workers.xlabel, "Workers");
  ASSERT_EQ(by_workers.panels.size(), 2u);  // RPC/s, MB/s
  ASSERT_EQ(by_workers.panels[0].lines.size(), 4u);  // 2 series x 2 PS counts
  EXPECT_EQ(by_workers.panels[0].lines[1].label, "grpc/non-serialized, 2 PS");
  EXPECT_THAT(by_workers.panels[0].lines[1].x, ElementsAre(1, 2));
  EXPECT_THAT(by_workers.panels[0].lines[1].y, ElementsAre(2000, 4000));
  EXPECT_THAT(by_workers.panels[1].lines[3].y, ElementsAre(4, 8));
  EXPECT_EQ(r.plots[1].title, "Throughput ratio grpc/serialized / grpc/non-serialized vs workers (scheme sweep, 4096 B payload)");
  EXPECT_THAT(r.plots[1].panels[0].lines[0].y, ElementsAre(0.5, 0.5));
  EXPECT_EQ(r.plots[2].xlabel, "Parameter servers");
  EXPECT_EQ(r.plots[2].panels[0].lines[0].label, "grpc/non-serialized, 1 worker");
}

TEST(ReportThroughputTest, WorkerRecordsWithoutATotalAreSummedOverTheirWindow) {
  json w0 = Throughput("non-serialized", "worker", 2, 1, 0, 0);
  w0["iterations"] = 100;
  w0["bytes"] = 1000000;
  w0["start_unix_s"] = 10.0;
  w0["end_unix_s"] = 11.0;
  json w1 = w0;
  w1["start_unix_s"] = 10.5;
  w1["end_unix_s"] = 12.0;
  json lonely = Throughput("non-serialized", "worker", 3, 1, 0, 0);  // 1 of 3 workers
  Report r = Build({w0, w1, lonely});
  const Table* t = FindTable(r, "throughput");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->rows.size(), 1u);
  EXPECT_THAT(t->rows[0], ElementsAre("sweep", "4096", "2", "1", "100.0", "1.00"));  // 200 / 2 s, 2 MB / 2 s
  EXPECT_THAT(r.notes, ::testing::Contains(HasSubstr("1 of 3 worker records")));
  EXPECT_THAT(r.notes, ::testing::Contains(HasSubstr("summed here from worker records")));
}

json Steps(double mean_s) { return {{"mean_s", mean_s}, {"median_s", mean_s}, {"min_s", mean_s}, {"max_s", mean_s}}; }

TEST(ReportKindsTest, TrainingTabulatedComparisonAndUnknownKindsNoted) {
  json t0 = {{"kind", "train"}, {"model", "tiny"}, {"batch", 8}, {"transport", "grpc"}, {"mode", "serialized"},
             {"sync", true}, {"num_ps", 2}, {"num_workers", 2}, {"run_id", "x"}, {"images_per_s", 100.0},
             {"step", Steps(0.010)}, {"compute", Steps(0.006)}, {"communication", Steps(0.004)}};
  json t1 = t0;
  t1["images_per_s"] = 50.5;
  t1["step"]["mean_s"] = 0.020;
  Report r = Build({t0, t1, {{"kind", "comparison"}}, {{"kind", "weird"}}, {{"kind", "weird"}}});
  const Table* t = FindTable(r, "train");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->rows.size(), 1u);
  EXPECT_THAT(t->rows[0], ElementsAre("grpc/serialized", "tiny", "8", "2", "2", "sync", "150.50", "15.0", "6.0", "4.0"));
  EXPECT_THAT(r.notes, ElementsAre(HasSubstr("1 comparison record not shown"),
                                   "2 records of kind 'weird' skipped: psbench report does not know it."));
}

TEST(ReportHeaderTest, SaysWhatWasMeasured) {
  json a = Latency("non-serialized", 1, 10, 20, 11);
  a["placement"] = {{"worker", {{"cpu_affinity", "1"}}}, {"ps", {{{"host", "node2"}, {"cpu_affinity", "0"}}}}};
  json b = Latency("serialized", 1, 15, 30, 16);
  a["config"]["tls"] = false;  // where the record says it
  b["tls"] = true;
  b["timestamp"] = "2025-01-02T00:00:00Z";
  Report r = Build({a, b});
  EXPECT_EQ(HeaderValue(r, "Input"), "t.jsonl: 2 records (2 latency)");
  EXPECT_EQ(HeaderValue(r, "Hosts"), "node1 (worker): Linux 6.1, Xeon, 8 CPUs; node2 (PS)");
  EXPECT_EQ(HeaderValue(r, "TLS"), "off (grpc/non-serialized); on (grpc/serialized)");
  EXPECT_EQ(HeaderValue(r, "Versions"), "psbench 0.1.0, gRPC 1.51.1, protobuf 3.21.12, g++ 12");
  EXPECT_EQ(HeaderValue(r, "Measurement"),
            "latency: warm-up 20 iterations, measure 200 iterations, validate off, busy-poll off");
  EXPECT_EQ(HeaderValue(r, "Placement"), "worker CPUs 1, PS CPUs 0");
  EXPECT_EQ(HeaderValue(r, "Seeds"), "7");
  EXPECT_EQ(HeaderValue(r, "Recorded"), "2025-01-01T00:00:00Z to 2025-01-02T00:00:00Z");
  EXPECT_THAT(HeaderValue(r, "Ratio"), HasSubstr("A = grpc/non-serialized, B = grpc/serialized"));
}

TEST(ReportHeaderTest, APsOfAnotherBuildIsNamedWithTheVersions) {
  json a = Latency("non-serialized", 1, 10, 20, 11);
  a["placement"] = {{"ps", {{{"version", "0.1.0"}}, {{"version", "0.0.9+abc"}}, {{"version", "python-interop"}}}}};
  json b = Latency("serialized", 1, 15, 30, 16);
  b["placement"] = {{"ps", {{{"version", "0.1.0"}}}}};
  Report r = Build({a, b});
  EXPECT_EQ(HeaderValue(r, "Versions"),
            "psbench 0.1.0, gRPC 1.51.1, protobuf 3.21.12, g++ 12 (PS: 0.0.9+abc, python-interop); "
            "psbench 0.1.0, gRPC 1.51.1, protobuf 3.21.12, g++ 12");
}

TEST(ReportRenderTest, MarkdownTablesAndEscapedCells) {
  json a = Bandwidth("a|b", 1024, 10);
  json b = Bandwidth("c", 1024, 20);
  Report r = Build({a, b});
  std::string md = RenderMarkdown(r);
  EXPECT_THAT(md, HasSubstr("# psbench report\n\n- **Input:** t.jsonl: 2 records (2 bandwidth)\n"));
  EXPECT_THAT(md, HasSubstr("\n## Bandwidth\n\nMB/s (10^6 B/s), higher is better.\n"));
  EXPECT_THAT(md, HasSubstr("| scheme | bytes | a\\|b MB/s | c MB/s | c / a\\|b MB/s |\n"
                            "|---|---:|---:|---:|---:|\n"
                            "| sweep | 1024 | 10.00 | 20.00 | 2.00x |\n"));
  // A label with a line break (a record psbench run would refuse to write) broke the table.
  const std::string broken = RenderMarkdown(Build({Bandwidth("x\ny", 1024, 10)}));
  EXPECT_THAT(broken, HasSubstr("| scheme | bytes | x y MB/s |\n")) << broken;
}

TEST(ReportRenderTest, HtmlHasEveryPlotAndEscapes) {
  Report r = Build({Latency("non-serialized", 1, 10, 20, 11), Latency("non-serialized", 2, 10, 20, 11),
                    Latency("serialized", 1, 10, 20, 11), Latency("serialized", 2, 10, 20, 11)});
  r.header.push_back({"Note", "<b>&"});
  std::string html = RenderHtml(r, "out_files");
  EXPECT_THAT(html, HasSubstr("data-plots=\"2\""));
  EXPECT_THAT(html, HasSubstr("<img class=\"plot\" src=\"out_files/01-latency-sweep.svg\""));
  EXPECT_THAT(html, HasSubstr("<img class=\"plot\" src=\"out_files/02-latency-sweep-ratio.svg\""));
  EXPECT_THAT(html, HasSubstr("&lt;b&gt;&amp;"));
  EXPECT_THAT(html, ::testing::Not(HasSubstr("http")));  // nothing from the network
  json data = PlotData(r);
  EXPECT_EQ(data["format"], "psbench-plot/1");
  EXPECT_EQ(data["plots"].size(), 2u);
  EXPECT_EQ(data["plots"][0]["xaxis"], "bytes");
  EXPECT_EQ(data["plots"][1]["panels"][0]["reference"], 1.0);
}

// One row per record, flat columns in the order first seen, cells quoted where they must be.
TEST(ReportCsvTest, FlatColumnsOneRowPerRecord) {
  std::vector<Input> records = {
      {*RecordFromJson(nlohmann::json::parse(R"({"benchmark":"latency","cpu":{"ps":10.5,"worker":20},"buffers":[1,2,3],)"
                                             R"("config":{"warmup_iterations":0,"iterations":10},)"
                                             R"("label":"a,\"b\"","per_worker":[{"rpc_per_s":5}]})")),
       "r.jsonl:1"},
      {*RecordFromJson(nlohmann::json::parse(R"({"benchmark":"bandwidth","mb_per_s":100,"validate":true,"extra":null,)"
                                             R"("config":{"warmup_iterations":0,"iterations":10,"window":4}})")),
       "r.jsonl:2"}};
  EXPECT_EQ(RenderCsv(records),
            "source,benchmark,buffers,config.iterations,config.warmup_iterations,cpu.ps,cpu.worker,label,"
            "per_worker.0.rpc_per_s,config.window,extra,mb_per_s,validate\r\n"
            "r.jsonl:1,latency,1 2 3,10,0,10.5,20,\"a,\"\"b\"\"\",5,,,,\r\n"
            "r.jsonl:2,bandwidth,,10,0,,,,,4,,100.0,true\r\n");
}

// Keys a column name cannot tell apart each keep their own column: a key with a dot beside the
// same path nested, and a record's own "source" beside the column naming the input line.
TEST(ReportCsvTest, KeysThatFlattenAlikeKeepTheirOwnColumns) {
  std::vector<Input> records = {
      {*RecordFromJson(nlohmann::json::parse(R"({"benchmark":"latency","config":{"warmup_iterations":0,"iterations":1},)"
                                             R"("x":{"a.b":1,"a":{"b":2},"\"q":3},"source":"mine"})")),
       "r.jsonl:1"}};
  EXPECT_EQ(RenderCsv(records),
            "source,benchmark,config.iterations,config.warmup_iterations,\"\"\"source\"\"\",\"x.\"\"\"\"\"\"q\"\"\",x.a.b,"
            "\"x.\"\"a.b\"\"\"\r\n"
            "r.jsonl:1,latency,1,0,mine,3,2,1\r\n");
}

TEST(ReportInputTest, RefusesWhatItCannotTabulate) {
  auto fails = [](const std::vector<json>& list, ReportOptions o = {}) {
    o.inputs = {"t.jsonl"};
    auto r = BuildReport(Records(list), o);
    EXPECT_FALSE(r.ok());
    return std::string(r.status().message());
  };
  EXPECT_EQ(fails({{{"kind", "weird"}}, {{"kind", "comparison"}}}),
            "t.jsonl: no record psbench report can tabulate (found 1 comparison, 1 weird; it reads latency, "
            "bandwidth, throughput, train and train_timing records)");
  json no_figure = Latency("serialized", 1, 1, 1, 1);
  no_figure.erase("latency_us");
  EXPECT_EQ(fails({Latency("serialized", 1, 1, 1, 1), no_figure}), "t.jsonl:2: a latency record without latency_us");
  json no_p50 = Latency("serialized", 1, 1, 1, 1);
  no_p50["latency_us"].erase("p50");
  EXPECT_EQ(RecordFromJson(no_p50).status().message(), "field 'latency_us.p50' is missing");
  ReportOptions o;
  o.compare = std::pair{std::string("rdma"), std::string("grpc/serialized")};
  EXPECT_EQ(fails({Latency("serialized", 1, 1, 1, 1)}, o),
            "--compare: no series 'rdma' in the latency, bandwidth and throughput records; series: grpc/serialized");
  EXPECT_FALSE(ParseCompare("a").ok());
  EXPECT_FALSE(ParseCompare("a,a").ok());
  EXPECT_FALSE(ParseCompare("a,b,c").ok());
  EXPECT_TRUE(ParseCompare("a,b").ok());
}

TEST(ReportInputTest, ReadsJsonLinesAndNamesTheBadLine) {
  std::string dir = ::testing::TempDir();
  auto write = [&](const std::string& name, const std::string& text) {
    std::string path = dir + "/" + name;
    std::ofstream(path) << text;
    return path;
  };
  std::string good = write("good.jsonl", "{\"a\":1}\n\n{\"b\":2}\n");
  auto ok = ReadRecords({good});
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[1].where, good + ":3");
  std::string bad = write("bad.jsonl", "{\"a\":1}\n{\"a\":\n");
  EXPECT_THAT(std::string(ReadRecords({good, bad}).status().message()),
              HasSubstr(bad + ":2: not a JSON object"));
  std::string array = write("array.jsonl", "[1,2]\n");
  EXPECT_THAT(std::string(ReadRecords({array}).status().message()), HasSubstr(array + ":1: not a JSON object"));
  std::string typed = write("typed.jsonl", "{\"a\":1}\n{\"benchmark\":\"latency\",\"iterations\":\"many\"}\n");
  EXPECT_EQ(ReadRecords({typed}).status().message(),
            typed + ":2: not a psbench record: field 'iterations' is not a count (an integer, 0 or more) (docs/records.md)");
  std::remove(typed.c_str());
  std::string empty = write("empty.jsonl", "\n");
  EXPECT_EQ(ReadRecords({empty}).status().message(), empty + ": empty, no records");
  EXPECT_THAT(std::string(ReadRecords({dir + "/missing.jsonl"}).status().message()),
              HasSubstr("missing.jsonl': cannot open: No such file or directory"));
  std::remove(good.c_str());
  std::remove(bad.c_str());
  std::remove(array.c_str());
  std::remove(empty.c_str());
}

}  // namespace
}  // namespace psbench::report
