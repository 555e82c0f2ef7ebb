// Builds that differ: a worker of another psbench version under this launcher is named on
// stderr and its records keep the version it ran; a scenario holding a field this worker does
// not know (what a launcher of another version would send) is refused, not half done.
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"

namespace psbench::testing {
namespace {

class VersionsTest : public IntegrationTest {
 protected:
  TempDir tmp_;
};

// psbench run starts the psbench-ps and psbench-worker beside it: here the real PS and a
// worker whose records say another version (the real worker, its output rewritten).
TEST_F(VersionsTest, AWorkerOfAnotherBuildIsNamedOnce) {
  const std::string bin = tmp_.File("bin");
  std::filesystem::create_directory(bin);
  // psbench finds its PS and worker beside its own executable (/proc/self/exe): a link to it
  // where it can be, else a copy (another filesystem).
  std::error_code linked;
  std::filesystem::create_hard_link(BinPath("psbench"), bin + "/psbench", linked);
  if (linked) std::filesystem::copy_file(BinPath("psbench"), bin + "/psbench");
  std::filesystem::create_symlink(BinPath("psbench-ps"), bin + "/psbench-ps");
  const std::string worker = tmp_.Write("bin/psbench-worker",
                                        "#!/bin/bash\nset -o pipefail\n'" + BinPath("psbench-worker") +
                                            "' \"$@\" | sed 's/\"psbench\":\"[^\"]*\"/\"psbench\":\"0.0.0-other\"/g'\n");
  ASSERT_EQ(chmod(worker.c_str(), 0755), 0);
  const std::string json = tmp_.File("r.jsonl");
  RunResult r = RunCommand({bin + "/psbench", "run", "--benchmark=latency", "--sizes=64:128", "--warmup-iterations=2",
                            "--iterations=20", "--repetitions=2", "--json=" + json},
                           seconds(60));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  auto lines = r.ErrLines();
  ASSERT_EQ(lines.size(), 1u) << "once for the whole session\n" << r.Describe();
  EXPECT_EQ(lines[0].rfind("psbench: warning: worker 0 ran psbench 0.0.0-other, this psbench is ", 0), 0u)
      << lines[0];
  EXPECT_NE(lines[0].find("install one psbench on every node"), std::string::npos) << lines[0];
  size_t runs = 0;
  for (const Json& rec : ReadJsonLines(json)) {
    if (rec.contains("kind")) continue;
    ++runs;
    EXPECT_EQ(rec["environment"]["versions"]["psbench"], "0.0.0-other");
  }
  EXPECT_EQ(runs, 4u);
}

TEST_F(VersionsTest, AScenarioFieldTheWorkerDoesNotKnowIsRefused) {
  // What psbench run sends a worker is what its records keep as "config": one from a real
  // run, plus a field of a newer psbench.
  const std::string json = tmp_.File("r.jsonl");
  RunResult run = RunCommand(RunArgv({"--benchmark=latency", "--warmup-iterations=0", "--iterations=5",
                                      "--json=" + json}),
                             seconds(60));
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  auto records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 1u);
  Json scenario = records[0]["config"];
  scenario["connect_timeout_s"] = 1;
  scenario["ps"] = {"127.0.0.1:1"};  // nothing listens there
  const std::string path = tmp_.Write("scenario.json", scenario.dump());
  // As it is, it is a scenario: the worker gets as far as its PS, which is gone.
  RunResult as_is = RunCommand({BinPath("psbench-worker"), "--scenario=" + path}, seconds(20));
  EXPECT_NE(as_is.err.find("cannot reach PS"), std::string::npos) << as_is.Describe();
  scenario["pacing"] = "fast";
  tmp_.Write("scenario.json", scenario.dump());
  ExpectOneLineFailure(RunCommand({BinPath("psbench-worker"), "--scenario=" + path}, seconds(20)), 2,
                       "psbench-worker", {"'pacing' is not a field psbench ", "another version"});
}

}  // namespace
}  // namespace psbench::testing
