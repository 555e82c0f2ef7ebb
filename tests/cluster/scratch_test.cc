// Scratch directories: removed when done, and after a SIGKILL by the next psbench (a real
// process killed, its lock released by the kernel).
#include "cli/launch/scratch.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace psbench {
namespace {
namespace fs = std::filesystem;

// A TMPDIR of the test's own, restored after.
class ScratchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* old = getenv("TMPDIR");
    if (old != nullptr) old_ = old;
    had_old_ = old != nullptr;
    root_ = fs::temp_directory_path() / ("scratch_test." + std::to_string(getpid()));
    fs::create_directories(root_);
    setenv("TMPDIR", root_.c_str(), 1);
  }
  void TearDown() override {
    if (had_old_) {
      setenv("TMPDIR", old_.c_str(), 1);
    } else {
      unsetenv("TMPDIR");
    }
    fs::remove_all(root_);
  }
  int Entries() const {
    int n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(root_)) ++n;
    return n;
  }
  fs::path root_;
  std::string old_;
  bool had_old_ = false;
};

TEST_F(ScratchTest, LivesUnderTmpdirAndGoesWhenDone) {
  EXPECT_EQ(TempRoot(), root_.string());
  {
    auto scratch = ScratchDir::Create("floor");
    ASSERT_TRUE(scratch.ok()) << scratch.status();
    const std::string path = (*scratch)->path();
    EXPECT_EQ(fs::path(path).parent_path(), root_);
    EXPECT_EQ(fs::path(path).filename().string().rfind("psbench-scratch-floor.", 0), 0u) << path;
    std::ofstream(path + "/record.jsonl") << "{}\n";
    EXPECT_EQ(SweepStaleScratch(), 0) << "a live psbench's directory is not stale";
    EXPECT_TRUE(fs::exists(path + "/record.jsonl"));
  }
  EXPECT_EQ(Entries(), 0);
}

TEST_F(ScratchTest, WhatAKilledPsbenchLeftGoesWithTheNextOne) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[0]);
    auto scratch = ScratchDir::Create("cluster");
    if (!scratch.ok()) _exit(1);
    std::ofstream((*scratch)->path() + "/hosts") << "node1\n";
    (void)!write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  EXPECT_EQ(SweepStaleScratch(), 0) << "its psbench still runs";
  ASSERT_EQ(Entries(), 1);
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_EQ(Entries(), 1) << "SIGKILL left it behind";
  EXPECT_EQ(SweepStaleScratch(), 1);
  EXPECT_EQ(Entries(), 0);
}

// Only directories psbench made are swept: other tools' psbench-* directories (the test
// suite's own) never are, even when nobody holds them.
TEST_F(ScratchTest, OtherDirectoriesAreLeftAlone) {
  fs::create_directories(root_ / "psbench-fuzz.abcdef");
  fs::create_directories(root_ / "psbench-scratch-x.abcdef");  // no owner file
  fs::create_directories(root_ / "psbench-scratch-x.abc");     // not mkdtemp's suffix
  std::ofstream(root_ / "psbench-scratch-x.abc" / "owner") << "localhost 1\n";
  std::ofstream(root_ / "psbench-scratch-file.abcdef") << "x";  // not a directory
  EXPECT_EQ(SweepStaleScratch(), 0);
  EXPECT_EQ(Entries(), 4);
  fs::create_directories(root_ / "psbench-scratch-far.abcdef");  // another host's
  std::ofstream(root_ / "psbench-scratch-far.abcdef" / "owner") << "elsewhere.invalid 1\n";
  EXPECT_EQ(SweepStaleScratch(), 0);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  fs::create_directories(root_ / "psbench-scratch-old.abcdef");  // this host's, nobody holds it
  std::ofstream(root_ / "psbench-scratch-old.abcdef" / "owner") << host << " 1\n";
  EXPECT_EQ(SweepStaleScratch(), 1);
  EXPECT_EQ(Entries(), 5);
}

TEST_F(ScratchTest, UnwritableTmpdirIsOneClearError) {
  setenv("TMPDIR", (root_ / "missing").c_str(), 1);
  auto scratch = ScratchDir::Create("cluster");
  ASSERT_FALSE(scratch.ok());
  EXPECT_NE(scratch.status().message().find("set TMPDIR"), std::string::npos) << scratch.status();
}

}  // namespace
}  // namespace psbench
