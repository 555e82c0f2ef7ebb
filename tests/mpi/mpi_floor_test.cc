// The raw MPI floor (bench/floors/mpi_floor.cc) under a real mpirun: the baseline grpc+mpi
// will be measured against. Open MPI needs --allow-run-as-root --oversubscribe as root in CI.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "nlohmann/json.hpp"
#include "tests/integration/run_helpers.h"

namespace psbench::testing {
namespace {

const std::string kFloor = std::string(PSBENCH_BIN_DIR) + "/psbench-floor-mpi";

Argv Mpirun(int ranks, const Argv& args) {
  Argv argv = {PSBENCH_MPIEXEC, "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(ranks),
               kFloor};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

TEST(MpiFloorTest, PingPongAndStreamUnderMpirun) {
  TempDir tmp;
  RunResult r = RunCommand(Mpirun(2, {"--sizes=32,64K", "--iterations=200", "--window=8",
                                      "--json=" + tmp.File("floor.jsonl")}),
                           seconds(60));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("Open MPI"), std::string::npos) << r.out;
  std::ifstream in(tmp.File("floor.jsonl"));
  std::string line;
  int pingpong = 0, stream = 0;
  while (std::getline(in, line)) {
    auto rec = nlohmann::json::parse(line);
    EXPECT_EQ(rec["tool"], "psbench-floor-mpi");
    if (rec["test"] == "pingpong") {
      ++pingpong;
      EXPECT_EQ(rec["iterations"], 200);
      EXPECT_GT(rec["latency_us"]["p50"].get<double>(), 0);
      EXPECT_LE(rec["latency_us"]["min"].get<double>(), rec["latency_us"]["p50"].get<double>());
    } else {
      ++stream;
      EXPECT_EQ(rec["iterations"], 200) << "whole windows of 8";
      EXPECT_GT(rec["mb_per_s"].get<double>(), 0);
    }
  }
  EXPECT_EQ(pingpong, 2);
  EXPECT_EQ(stream, 2);
}

// grpc+mpi runs at MPI_THREAD_FUNNELED: the floor measures that level too, and says which.
TEST(MpiFloorTest, ThreadLevelIsAskedForAndRecorded) {
  TempDir tmp;
  for (const char* level : {"single", "funneled"}) {
    RunResult r = RunCommand(Mpirun(2, {"--test=pingpong", "--sizes=32", "--iterations=100",
                                        std::string("--thread-level=") + level,
                                        "--json=" + tmp.File(std::string(level) + ".jsonl")}),
                             seconds(60));
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    EXPECT_NE(r.out.find(std::string("MPI_THREAD_") + (level[0] == 's' ? "SINGLE" : "FUNNELED")),
              std::string::npos) << r.out;
    std::ifstream in(tmp.File(std::string(level) + ".jsonl"));
    std::string line;
    ASSERT_TRUE(std::getline(in, line));
    EXPECT_EQ(nlohmann::json::parse(line)["thread_level"], level);
  }
  RunResult bad = RunCommand(Mpirun(2, {"--thread-level=multiple"}), seconds(30));
  EXPECT_EQ(bad.exit_code, 2) << bad.Describe();
  EXPECT_NE(bad.err.find("psbench-floor-mpi: --thread-level=multiple is not a level"), std::string::npos)
      << bad.Describe();
}

TEST(MpiFloorTest, OutsideMpirunSaysHowToLaunch) {
  RunResult r = RunCommand({kFloor}, seconds(30));
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_NE(r.err.find("mpirun -np 2"), std::string::npos) << r.Describe();
}

TEST(MpiFloorTest, BadSizeIsOneLineExitTwo) {
  RunResult r = RunCommand(Mpirun(2, {"--sizes=32,lots"}), seconds(30));
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_NE(r.err.find("'lots'"), std::string::npos) << r.Describe();
  // mpirun adds its own banner about the exit status; of ours there is one line.
  int ours = 0;
  for (const std::string& l : r.ErrLines()) ours += l.rfind("psbench-floor-mpi: ", 0) == 0;
  EXPECT_EQ(ours, 1) << "only rank 0 speaks\n" << r.Describe();
}

}  // namespace
}  // namespace psbench::testing
