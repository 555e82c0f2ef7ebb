// The typed record (bench/record.h), the table renderers (bench/table.h) and the comparison
// table (bench/comparison.h), from hand-written records: what goes in comes out, a field of
// the wrong type is named, and the one table --transports and psbench report share.
#include "bench/record.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bench/comparison.h"
#include "bench/figures.h"
#include "bench/table.h"

namespace psbench {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

json Latency(const std::string& mode, double p50, double p99, double mean, int iterations = 200) {
  return {{"benchmark", "latency"},
          {"transport", "grpc"},
          {"mode", mode},
          {"scheme", "uniform"},
          {"payload_bytes", 1024},
          {"payload_summary", "1x1KiB"},
          {"iterations", iterations},
          {"scope", "worker"},
          {"config", {{"warmup_iterations", 5}, {"iterations", iterations}}},
          {"latency_us", {{"p50", p50}, {"p99", p99}, {"mean", mean}}}};
}

Record Read(const json& j) {
  auto r = RecordFromJson(j);
  EXPECT_TRUE(r.ok()) << r.status() << " in " << j.dump();
  return r.ok() ? *r : Record{};
}

TEST(RecordTest, WhatIsReadIsWrittenBack) {
  json j = Latency("serialized", 10.5, 20, 11);
  j["latency_us"]["count"] = 200;
  j["latency_us"]["stdev"] = 1.5;
  j["config"] = {{"warmup_iterations", 5}, {"iterations", 200}, {"run_id", "r1"}};
  j["buffers"] = {1, 2, 3};  // not a typed field: kept as written
  j["something_new"] = {{"a", json::array()}};
  j["step"] = {{"mean_s", 0.5}, {"median_s", 0.4}};
  j["payload_bytes"] = 1500.25;  // a mean over a trace's payloads
  const Record r = Read(j);
  EXPECT_EQ(RecordToJson(r), j);
  EXPECT_EQ(r.extra.size(), 2u) << r.extra.dump();
  EXPECT_FALSE(r.payload_bytes_exact);
  EXPECT_EQ(PayloadBytesText(r), "~1500");
  EXPECT_EQ(r.RunId(), "r1");
  EXPECT_EQ(r.Settings().warmup_iterations, 5);
  EXPECT_FALSE(r.step->min_s) << "an absent member stays absent";
}

TEST(RecordTest, AFieldOfTheWrongTypeIsNamed) {
  auto error = [](json j) { return std::string(RecordFromJson(j).status().message()); };
  EXPECT_EQ(error(json::array()), "not a JSON object");
  EXPECT_EQ(error({{"iterations", -1}}), "field 'iterations' is not a count (an integer, 0 or more)");
  EXPECT_EQ(error({{"transport", 3}}), "field 'transport' is not a string");
  EXPECT_EQ(error({{"tls", "yes"}}), "field 'tls' is not true or false");
  EXPECT_EQ(error({{"rpc_per_ps", {1, "x"}}}), "field 'rpc_per_ps[1]' is not a count (an integer, 0 or more)");
  json bad = Latency("serialized", 1, 1, 1);
  bad["latency_us"]["p99"] = "slow";
  EXPECT_EQ(error(bad), "field 'latency_us.p99' is not a number");
  bad["latency_us"].erase("p99");
  EXPECT_EQ(error(bad), "field 'latency_us.p99' is missing");
  EXPECT_EQ(error({{"step", {{"median_s", 1.0}}}}), "field 'step.mean_s' is missing");
  // Figures are never negative (a report printed a -5.00 µs p50, and its ratio).
  bad = Latency("serialized", 1, 1, 1);
  bad["latency_us"]["p50"] = -5;
  EXPECT_EQ(error(bad), "field 'latency_us.p50' is not 0 or more");
  EXPECT_EQ(error({{"payload_bytes", -1}}), "field 'payload_bytes' is not 0 or more");
  EXPECT_EQ(error({{"mb_per_s", -0.5}}), "field 'mb_per_s' is not 0 or more");
  EXPECT_EQ(error({{"step", {{"mean_s", 1.0}, {"gflops", -2}}}}), "field 'step.gflops' is not 0 or more");
  // An open loop's figures, which a report prints (they read as 0 when not numbers).
  const json load = {{"offered_per_s", 1000}, {"achieved_per_s", 990.5}, {"planned", 10}, {"dropped", 0},
                     {"corrected_us", {{"p50", 5.0}, {"p99", 9.0}}}, {"lag_us", {{"p99", 1.0}}},
                     {"histograms", {{"corrected", "kept as written"}}}};
  EXPECT_TRUE(RecordFromJson({{"load", load}}).ok());
  auto with = [&load](const char* key, json value) {
    json l = load;
    if (value.is_null()) l.erase(key);
    else l[key] = value;
    return json{{"load", l}};
  };
  EXPECT_TRUE(RecordFromJson({{"kind", "comparison"}, {"load", {{"schedule", "poisson:10"}, {"rate_per_s", 10}}}}).ok())
      << "a comparison's load names the schedule only";
  EXPECT_EQ(error({{"load", "poisson"}}), "field 'load' is not an object");
  EXPECT_EQ(error(with("offered_per_s", nullptr)), "field 'load.offered_per_s' is missing");
  EXPECT_EQ(error(with("achieved_per_s", "fast")), "field 'load.achieved_per_s' is not a number");
  EXPECT_EQ(error(with("achieved_per_s", -1)), "field 'load.achieved_per_s' is not a rate (0 or more)");
  EXPECT_EQ(error(with("dropped", -7)), "field 'load.dropped' is not a count (an integer, 0 or more)");
  EXPECT_EQ(error(with("corrected_us", nullptr)), "field 'load.corrected_us' is missing");
  EXPECT_EQ(error(with("corrected_us", {{"p50", 5.0}})), "field 'load.corrected_us.p99' is missing");
  EXPECT_EQ(error(with("corrected_us", {{"p50", 5.0}, {"p99", "9"}})), "field 'load.corrected_us.p99' is not a number");
  EXPECT_EQ(error(with("lag_us", {{"p99", true}})), "field 'load.lag_us.p99' is not a number");
  // A payload benchmark's config says how it measured: what a report prints of it is checked.
  auto config = [](const char* benchmark, json c) { return json{{"benchmark", benchmark}, {"config", c}}; };
  EXPECT_EQ(error({{"benchmark", "latency"}}), "field 'config' is missing (the settings this latency record was measured with)");
  EXPECT_EQ(error(config("latency", "fast")), "field 'config' is not an object");
  EXPECT_EQ(error(config("latency", {{"iterations", 100}})), "field 'config.warmup_iterations' is missing");
  EXPECT_EQ(error(config("latency", {{"warmup_iterations", -1}, {"iterations", 100}})), "field 'config.warmup_s' is missing");
  EXPECT_EQ(error(config("latency", {{"warmup_iterations", -2}, {"iterations", 100}})),
            "field 'config.warmup_iterations' is not -1 (by time) or more");
  EXPECT_EQ(error(config("latency", {{"warmup_iterations", 0}, {"iterations", 0}})), "field 'config.duration_s' is missing");
  EXPECT_EQ(error(config("latency", {{"warmup_iterations", 0}, {"iterations", "100"}})), "field 'config.iterations' is not a number");
  EXPECT_EQ(error(config("latency", {{"warmup_iterations", 0}, {"iterations", 1e300}})), "field 'config.iterations' is not an integer");
  EXPECT_EQ(error(config("latency", {{"warmup_iterations", 2.5}, {"iterations", 10}})), "field 'config.warmup_iterations' is not an integer");
  EXPECT_EQ(error(config("bandwidth", {{"warmup_iterations", 0}, {"iterations", 10}})), "field 'config.window' is missing");
  EXPECT_EQ(error(config("throughput", {{"warmup_iterations", 0}, {"iterations", 10}})), "field 'config.outstanding' is missing");
  EXPECT_TRUE(RecordFromJson(config("latency", {{"warmup_iterations", -1}, {"warmup_s", 1}, {"iterations", 0}, {"duration_s", 2}})).ok());
  EXPECT_TRUE(RecordFromJson({{"kind", "updates"}, {"benchmark", "updates"}}).ok()) << "not a payload benchmark";
}

// A line nested 100,000 deep parses, and a recursive copy of it overflowed the stack
// (psbench report: SIGSEGV).
TEST(RecordTest, NestingBeyondAnyRecordIsRefused) {
  const size_t n = 100000;
  const json deep = json::parse("{\"x\":" + std::string(n, '[') + std::string(n, ']') + "}");
  EXPECT_EQ(RecordFromJson(deep).status().message(), "nested over 64 levels deep");
  json load = {{"offered_per_s", 1}, {"achieved_per_s", 1}, {"corrected_us", {{"p50", 1}, {"p99", 1}}},
               {"histograms", {{"corrected", {{"counts", {{1, 2}, {3, 4}}}}}}}};
  EXPECT_TRUE(RecordFromJson({{"load", load}}).ok()) << "a record's own nesting";
}

TEST(RecordTest, KindsAndSeries) {
  Record r = Read(Latency("serialized", 1, 1, 1));
  EXPECT_EQ(r.Kind(), "latency");
  EXPECT_TRUE(r.IsPayloadBenchmark());
  EXPECT_EQ(KindOf(r), FindBenchmarkKind("latency"));
  EXPECT_TRUE(IsHeadline(r));
  EXPECT_EQ(r.Series(), "grpc/serialized");
  // gRPC's options make a series of their own, not mixed into the default's figures.
  r.config["grpc_api"] = "callback";
  EXPECT_EQ(r.Series(), "grpc/serialized+callback");
  r.config["grpc_tx_zerocopy"] = 16384;
  EXPECT_EQ(r.Series(), "grpc/serialized+callback+zerocopy");
  r.config["grpc_api"] = "cq";
  r.config["grpc_tx_zerocopy"] = 0;
  EXPECT_EQ(r.Series(), "grpc/serialized");
  r.label = "ipoib";
  EXPECT_EQ(r.Series(), "ipoib");
  r.label.reset();
  r.mode.reset();
  r.transport = "grpc+mpi";
  EXPECT_EQ(r.Series(), "grpc+mpi");
  Record updates = Read({{"kind", "updates"}, {"benchmark", "updates"}});
  EXPECT_EQ(updates.Kind(), "updates");
  EXPECT_FALSE(updates.IsPayloadBenchmark());
  EXPECT_EQ(Read({{"benchmark", "warp"}}).Kind(), "") << "not a benchmark psbench has";
  EXPECT_EQ(Record{}.Series(), "local");
  Record total = Read({{"benchmark", "throughput"},
                       {"scope", "worker"},
                       {"config", {{"warmup_iterations", 5}, {"iterations", 100}, {"outstanding", 8}}}});
  EXPECT_FALSE(IsHeadline(total)) << "a throughput run's headline is its total";
  total.scope = "total";
  EXPECT_TRUE(IsHeadline(total));
}

// A NaN loss is written as null: no value of the field's type, kept as written.
TEST(RecordTest, NullIsKeptAsWritten) {
  json j = {{"kind", "train"}, {"loss_first", nullptr}, {"loss_last", 0.5}, {"config", nullptr}};
  Record r = Read(j);
  EXPECT_FALSE(r.loss_first);
  EXPECT_EQ(r.loss_last, 0.5);
  EXPECT_EQ(RecordToJson(r), j);
}

// A comparison's "iterations" is one count per transport, and stays so.
TEST(RecordTest, ComparisonIterationsAreKeptAsWritten) {
  json c = {{"kind", "comparison"}, {"benchmark", "latency"}, {"iterations", {200, 200}}};
  Record r = Read(c);
  EXPECT_FALSE(r.iterations);
  EXPECT_EQ(RecordToJson(r), c);
}

TEST(TableTest, NumbersWithOrWithoutAUnitAlignRightTextLeft) {
  for (const char* cell : {"12", "1.25x", "42%", "3.03MiB", "~1500", "-", "-3.5"}) EXPECT_TRUE(NumericCell(cell)) << cell;
  for (const char* cell : {"uniform", "3x1MiB 3x10KiB", "", "x", "1 2"}) EXPECT_FALSE(NumericCell(cell)) << cell;
}

TEST(TableTest, TextAlignsNumbersAndGroupsMarkdownAndHtmlNameEveryColumn) {
  Table t;
  t.id = "x";
  t.title = "X";
  t.notes = {"What it is."};
  t.groups = {{"", 1}, {"a long series name", 2}};
  t.columns = {"scheme", "p50", "p99"};
  t.rows = {{"uniform", "1.00", "-"}, {"random", "10.25", "2.00"}};
  EXPECT_EQ(RenderText(t),
            "# X\n"
            "# What it is.\n"
            "#          a long series name\n"
            "# scheme         p50      p99\n"
            "  uniform       1.00        -\n"
            "  random       10.25     2.00\n");
  EXPECT_THAT(RenderMarkdown(t), HasSubstr("| scheme | a long series name p50 | a long series name p99 |\n"
                                           "|---|---:|---:|\n"
                                           "| uniform | 1.00 | - |\n"));
  EXPECT_THAT(RenderHtml(t), HasSubstr("<th colspan=\"2\">a long series name</th>"));
  EXPECT_THAT(RenderHtml(t), HasSubstr("<td class=\"num\">10.25</td>"));
}

// The table --transports prints and psbench report shows: a group per series, then B / A.
TEST(ComparisonTest, SeriesGroupsRatiosMediansAndShortRuns) {
  std::vector<Record> records = {Read(Latency("non-serialized", 10, 20, 11)),
                                 Read(Latency("serialized", 15, 30, 16)),
                                 Read(Latency("serialized", 25, 30, 26)),
                                 Read(Latency("serialized", 35, 30, 36))};
  Comparison c(*FindBenchmarkKind("latency"));
  c.Add("grpc/non-serialized", records[0]);
  for (size_t i = 1; i < records.size(); ++i) c.Add("grpc/serialized", records[i]);
  const Table t = ComparisonTable(c, {"grpc/non-serialized", "grpc/serialized"},
                                  {{"grpc/non-serialized", "grpc/serialized"}}, {"Measured alike."});
  EXPECT_EQ(t.title, "Latency");
  EXPECT_THAT(t.notes, ElementsAre("Round trip in µs, lower is better.", "Measured alike.",
                                   "B / A: B's figure divided by A's; below 1x, B is faster.",
                                   HasSubstr("p99 is shown only with at least 100 iterations"),
                                   HasSubstr("median"),
                                   "spread: the largest p50 µs over the smallest, of a series' measurements of a "
                                   "payload (1.05x: within 5 %)."));
  std::vector<std::string> columns;
  for (size_t i = 0; i < t.columns.size(); ++i) columns.push_back(t.FullColumn(i));
  // Measured more than once: a spread column per series, of its p50s (35 / 15); "-" for
  // the series measured once.
  EXPECT_THAT(columns, ElementsAre("scheme", "bytes", "grpc/non-serialized p50 µs", "grpc/non-serialized p99 µs",
                                   "grpc/non-serialized mean µs", "grpc/non-serialized spread",
                                   "grpc/serialized p50 µs", "grpc/serialized p99 µs", "grpc/serialized mean µs",
                                   "grpc/serialized spread", "grpc/serialized / grpc/non-serialized p50",
                                   "grpc/serialized / grpc/non-serialized p99"));
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_THAT(t.rows[0], ElementsAre("uniform", "1024", "10.00", "20.00", "11.00", "-", "25.00", "30.00", "26.00",
                                     "2.33x", "2.50x", "1.50x"));
  const ComparisonCell& serialized = c.rows.begin()->second.at("grpc/serialized");
  EXPECT_DOUBLE_EQ(*serialized.Spread(FindBenchmarkKind("latency")->figures[0]), 35.0 / 15.0);
  EXPECT_FALSE(c.rows.begin()->second.at("grpc/non-serialized").Spread(FindBenchmarkKind("latency")->figures[0]))
      << "one measurement has no spread";
  // A run too short for a p99, in one of the series: no p99 there, and no ratio of it.
  Record short_run = Read(Latency("non-serialized", 10, 20, 11, 50));
  Comparison d(*FindBenchmarkKind("latency"));
  d.Add("a", short_run);
  d.Add("b", records[1]);
  const Table u = ComparisonTable(d, {"a", "b"}, {{"a", "b"}}, {});
  EXPECT_THAT(u.rows[0], ElementsAre("uniform", "1024", "10.00", "-", "11.00", "15.00", "30.00", "16.00", "1.50x", "-"));
}

// A trace of several payloads has a mean size per operation that differs from run to run: its
// rows pair by scheme and payload, not by that mean.
TEST(ComparisonTest, TraceRowsPairWhateverTheirMeanSize) {
  json a = Latency("non-serialized", 10, 20, 11);
  a["scheme"] = "trace";
  a["payload_summary"] = "2 payloads";
  a["payload_bytes"] = 1500.25;
  json b = a;
  b["mode"] = "serialized";
  b["payload_bytes"] = 1499.75;
  b["latency_us"]["p50"] = 20;
  const Record ra = Read(a), rb = Read(b);
  Comparison c(*FindBenchmarkKind("latency"));
  c.Add("a", ra);
  c.Add("b", rb);
  ASSERT_EQ(c.rows.size(), 1u);
  const Table t = ComparisonTable(c, {"a", "b"}, {{"a", "b"}}, {});
  EXPECT_EQ(t.rows[0][1], "~1500");
  EXPECT_EQ(t.rows[0][8], "2.00x");
}

}  // namespace
}  // namespace psbench
