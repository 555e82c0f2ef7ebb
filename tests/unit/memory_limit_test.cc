// ProcessMemoryLimit over trees laid out as the kernel lays out /proc and /sys/fs/cgroup:
// cgroup v2, v1's memory controller, both at once (hybrid), a container whose cgroup is the
// root of its mount, and files that say nothing usable. A real cgroup is the integration
// test's (bad_input_test: MemoryCgroupTest).
#include "bench/memory_limit.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace psbench {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kHost = uint64_t{64} << 30;
constexpr uint64_t kGiB = uint64_t{1} << 30;

class MemoryLimitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/psbench-memory-limit-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    root_ = pattern;
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(root_ + path).parent_path());
    std::ofstream(root_ + path) << text;
  }
  MemoryLimit Read() { return ProcessMemoryLimit(root_, kHost); }

  std::string root_;
};

constexpr char kV2Mount[] =
    "24 1 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw\n";
constexpr char kV1Mounts[] =
    "30 25 0:26 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "31 25 0:27 / /sys/fs/cgroup/memory rw,nosuid shared:12 - cgroup cgroup rw,memory\n";

TEST_F(MemoryLimitTest, NoCgroupFilesLeaveTheHostsMemory) {
  MemoryLimit m = Read();
  EXPECT_EQ(m.bytes, kHost);
  EXPECT_EQ(m.host_bytes, kHost);
  EXPECT_EQ(m.source, "host");
}

TEST_F(MemoryLimitTest, V2TakesTheTightestLimitOnTheWayToTheRoot) {
  Write("/proc/self/mountinfo", kV2Mount);
  Write("/proc/self/cgroup", "0::/slurm/job_7/step_0\n");
  Write("/sys/fs/cgroup/slurm/job_7/step_0/memory.max", "max\n");
  Write("/sys/fs/cgroup/slurm/job_7/memory.max", std::to_string(4 * kGiB) + "\n");
  Write("/sys/fs/cgroup/slurm/memory.max", std::to_string(32 * kGiB) + "\n");
  MemoryLimit m = Read();
  EXPECT_EQ(m.bytes, 4 * kGiB);
  EXPECT_EQ(m.source, "cgroup v2 /slurm/job_7");
}

TEST_F(MemoryLimitTest, V2UnlimitedEverywhereIsTheHost) {
  Write("/proc/self/mountinfo", kV2Mount);
  Write("/proc/self/cgroup", "0::/user.slice\n");
  Write("/sys/fs/cgroup/user.slice/memory.max", "max\n");
  EXPECT_EQ(Read().source, "host");
}

TEST_F(MemoryLimitTest, ALimitOverTheHostsMemoryIsNoLimit) {
  Write("/proc/self/mountinfo", kV2Mount);
  Write("/proc/self/cgroup", "0::/big\n");
  Write("/sys/fs/cgroup/big/memory.max", std::to_string(2 * kHost) + "\n");
  EXPECT_EQ(Read().bytes, kHost);
}

TEST_F(MemoryLimitTest, V1MemoryControllerAndItsUnlimitedValue) {
  Write("/proc/self/mountinfo", kV1Mounts);
  Write("/proc/self/cgroup", "5:cpu,cpuacct:/\n4:memory:/docker/abc\n1:name=systemd:/docker/abc\n");
  Write("/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", std::to_string(kGiB) + "\n");
  Write("/sys/fs/cgroup/memory/docker/memory.limit_in_bytes", "9223372036854771712\n");
  Write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  MemoryLimit m = Read();
  EXPECT_EQ(m.bytes, kGiB);
  EXPECT_EQ(m.source, "cgroup v1 memory /docker/abc");
}

TEST_F(MemoryLimitTest, HybridTakesTheSmallerOfBothHierarchies) {
  Write("/proc/self/mountinfo",
        std::string(kV1Mounts) +
            "32 25 0:28 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate\n");
  Write("/proc/self/cgroup", "4:memory:/job\n0::/job\n");
  Write("/sys/fs/cgroup/memory/job/memory.limit_in_bytes", std::to_string(8 * kGiB) + "\n");
  Write("/sys/fs/cgroup/unified/job/memory.max", std::to_string(2 * kGiB) + "\n");
  MemoryLimit m = Read();
  EXPECT_EQ(m.bytes, 2 * kGiB);
  EXPECT_EQ(m.source, "cgroup v2 /job");
}

TEST_F(MemoryLimitTest, AContainersOwnCgroupAtTheRootOfItsMount) {
  // The mount's root is the container's cgroup; /proc/self/cgroup names the same path.
  Write("/proc/self/mountinfo",
        "600 550 0:30 /kubepods/pod1/c1 /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw\n");
  Write("/proc/self/cgroup", "0::/kubepods/pod1/c1\n");
  Write("/sys/fs/cgroup/memory.max", std::to_string(3 * kGiB) + "\n");
  MemoryLimit m = Read();
  EXPECT_EQ(m.bytes, 3 * kGiB);
  EXPECT_EQ(m.source, "cgroup v2 /kubepods/pod1/c1");
}

TEST_F(MemoryLimitTest, GarbageIsNoLimitNotACrash) {
  Write("/proc/self/mountinfo", std::string(kV2Mount) + "garbage - \n - - -\n\n");
  Write("/proc/self/cgroup", "nonsense\n0::relative/path\n0::/a\n::\n9:memory:/outside\n");
  Write("/sys/fs/cgroup/a/memory.max", "-5\n");
  EXPECT_EQ(Read().source, "host");
  Write("/sys/fs/cgroup/a/memory.max", "12abc\n");
  EXPECT_EQ(Read().source, "host");
}

TEST_F(MemoryLimitTest, APathOutsideTheMountIsNotRead) {
  Write("/proc/self/mountinfo",
        "600 550 0:30 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup rw\n");
  Write("/proc/self/cgroup", "0::/other/pod\n");
  Write("/sys/fs/cgroup/memory.max", std::to_string(kGiB) + "\n");
  EXPECT_EQ(Read().source, "host");
}

TEST_F(MemoryLimitTest, ALineCutShortIsSkipped) {
  // The super options missing (a file cut at its size cap, or an empty source field).
  Write("/proc/self/mountinfo", "31 25 0:27 / /sys/fs/cgroup/memory rw - cgroup src\n");
  Write("/proc/self/cgroup", "4:memory:/a\n");
  Write("/sys/fs/cgroup/memory/a/memory.limit_in_bytes", std::to_string(kGiB) + "\n");
  EXPECT_EQ(Read().source, "host");
}

TEST_F(MemoryLimitTest, AMountPointWithASpace) {
  // mountinfo writes a space in a path as \040.
  Write("/proc/self/mountinfo", "40 24 0:22 /job /job\\040cgroup rw - cgroup2 cgroup2 rw\n");
  Write("/proc/self/cgroup", "0::/job/step\n");
  Write("/job cgroup/step/memory.max", std::to_string(kGiB) + "\n");
  MemoryLimit m = Read();
  EXPECT_EQ(m.bytes, kGiB);
  EXPECT_EQ(m.source, "cgroup v2 /job/step");
}

TEST_F(MemoryLimitTest, OfTwoMountsTheOneShowingMoreAncestors) {
  // The hierarchy at its root and, bound again, at the job's cgroup: only the first shows the
  // job's parent, whose limit is the tighter.
  Write("/proc/self/mountinfo",
        "40 24 0:22 /users/u1 /job rw - cgroup2 cgroup2 rw\n" + std::string(kV2Mount));
  Write("/proc/self/cgroup", "0::/users/u1/step\n");
  Write("/job/step/memory.max", std::to_string(2 * kGiB) + "\n");
  Write("/sys/fs/cgroup/users/u1/step/memory.max", std::to_string(2 * kGiB) + "\n");
  Write("/sys/fs/cgroup/users/memory.max", std::to_string(kGiB) + "\n");
  MemoryLimit m = Read();
  EXPECT_EQ(m.bytes, kGiB);
  EXPECT_EQ(m.source, "cgroup v2 /users");
}

TEST_F(MemoryLimitTest, ACgroupOutsideTheNamespaceIsNotRead) {
  Write("/proc/self/mountinfo", kV2Mount);
  Write("/proc/self/cgroup", "0::/../elsewhere\n");
  Write("/sys/fs/elsewhere/memory.max", std::to_string(kGiB) + "\n");
  EXPECT_EQ(Read().source, "host");
}

TEST(ProcessMemoryLimit, ThisProcessHasOneNoLargerThanTheHost) {
  MemoryLimit m = ProcessMemoryLimit();
  EXPECT_GT(m.bytes, 0u);
  EXPECT_LE(m.bytes, m.host_bytes);
  EXPECT_FALSE(m.source.empty());
}

}  // namespace
}  // namespace psbench
