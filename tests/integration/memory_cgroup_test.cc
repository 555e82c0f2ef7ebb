// A run inside a memory cgroup, as a Slurm job with ConstrainRAMSpace or a container runs:
// payloads over half the cgroup's limit are refused at start with one line naming the limit
// (before, the worker allocated them and the kernel's OOM killer ended it with SIGKILL), and
// every record says what the process could use. Needs a memory cgroup it can create (root,
// and a writable cgroup v1 memory hierarchy or cgroup v2 with the memory controller); it
// skips with "no writable memory cgroup:" otherwise, which tests/check_suites.sh allows only
// where it cannot make one itself.
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"

namespace psbench::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Room for three sanitized processes (the ASan pass runs this test too).
constexpr uint64_t kLimit = uint64_t{1} << 30;
constexpr long kCgroupMagic = 0x27e0eb, kCgroup2Magic = 0x63677270;  // linux/magic.h

// A memory cgroup of its own with kLimit; Remove() takes it away once its processes are gone.
class MemoryCgroup {
 public:
  // Empty `dir()` and the reasons in `why()` when none could be made.
  MemoryCgroup() {
    const std::string name = "psbench-test-" + std::to_string(getpid());
    for (const char* base : {"/sys/fs/cgroup/memory", "/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
      struct statfs fs {};
      if (statfs(base, &fs) != 0 || (fs.f_type != kCgroupMagic && fs.f_type != kCgroup2Magic)) {
        why_ += std::string(base) + ": not a cgroup filesystem; ";
        continue;
      }
      const bool v1 = fs.f_type == kCgroupMagic;
      if (v1 && !std::filesystem::exists(std::string(base) + "/memory.limit_in_bytes")) {
        why_ += std::string(base) + ": not the memory hierarchy; ";
        continue;
      }
      const std::string dir = std::string(base) + "/" + name;
      if (mkdir(dir.c_str(), 0755) != 0) {
        why_ += std::string(base) + ": " + std::strerror(errno) + "; ";
        continue;
      }
      const std::string file = dir + (v1 ? "/memory.limit_in_bytes" : "/memory.max");
      std::ofstream(file) << kLimit;
      std::string read_back;
      std::getline(std::ifstream(file), read_back);
      if (read_back == std::to_string(kLimit)) {
        dir_ = dir;
        return;
      }
      why_ += file + ": the limit did not take (no memory controller here); ";
      rmdir(dir.c_str());
    }
  }
  ~MemoryCgroup() { Remove(); }
  void Remove() {
    if (dir_.empty()) return;
    EXPECT_EQ(rmdir(dir_.c_str()), 0) << "removing " << dir_ << ": " << std::strerror(errno);
    dir_.clear();
  }
  const std::string& dir() const { return dir_; }
  const std::string& why() const { return why_; }

  // `argv` run from inside the cgroup (a shell moves itself in, then becomes the command).
  Argv Inside(const Argv& argv) const {
    Argv out = {"/bin/sh", "-c", "echo $$ > \"$0/cgroup.procs\" && exec \"$@\"", dir_};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }

 private:
  std::string dir_;
  std::string why_;
};

class MemoryCgroupTest : public IntegrationTest {};

TEST_F(MemoryCgroupTest, PayloadsOverHalfTheLimitAreRefusedAndRecordsSayTheLimit) {
  if (geteuid() != 0) GTEST_SKIP() << "no writable memory cgroup: not root";
  TempDir tmp;
  // This process's own limit must be above the test's, or the test's would not be the one seen.
  const std::string outside = tmp.File("outside.jsonl");
  RunResult before = RunCommand(
      RunArgv({"--benchmark=latency", "--sizes=1K:1K", "--iterations=2", "--warmup=0s", "--json=" + outside}),
      seconds(60));
  ASSERT_EQ(before.exit_code, 0) << before.Describe();
  const uint64_t own = Json::parse(Lines(ReadFile(outside)).at(0))["environment"]["memory"]["limit_bytes"];
  ASSERT_GT(own, 2 * kLimit) << "this test needs more than " << 2 * kLimit << " bytes of memory";
  MemoryCgroup cgroup;
  if (cgroup.dir().empty()) GTEST_SKIP() << "no writable memory cgroup: " << cgroup.why();
  // 600 MiB fit in the host's memory, not in half of 1 GiB.
  RunResult refused = RunCommand(
      cgroup.Inside(RunArgv({"--benchmark=latency", "--sizes=600M:600M", "--iterations=1", "--warmup=0s"})),
      seconds(60));
  ExpectOneLineFailure(refused, 2, "psbench",
                       {"--max-payload-memory=512MiB", "half of this process's memory limit, 1GiB in cgroup",
                        "psbench-test-"});
  const std::string json = tmp.File("records.jsonl");
  RunResult ok = RunCommand(cgroup.Inside(RunArgv({"--benchmark=latency", "--sizes=1K:1K", "--iterations=5",
                                                   "--warmup=0s", "--json=" + json})),
                            seconds(60));
  EXPECT_EQ(ok.exit_code, 0) << ok.Describe();
  for (const std::string& line : Lines(ReadFile(json))) {
    Json memory = Json::parse(line)["environment"]["memory"];
    EXPECT_EQ(memory["limit_bytes"], kLimit) << line;
    EXPECT_NE(memory["limit_source"].get<std::string>().find("psbench-test-"), std::string::npos) << line;
    EXPECT_EQ(memory["host_bytes"], Json::parse(Lines(ReadFile(outside)).at(0))["environment"]["memory"]["host_bytes"]);
  }
  EXPECT_FALSE(Lines(ReadFile(json)).empty()) << ok.Describe();
  ExpectNoChildrenLeft();  // every process of the cgroup has exited: it can go
  cgroup.Remove();
}

// Past the default budget on purpose, a worker over the cgroup's limit is killed by the
// kernel with no word of why; psbench names the likely cause beside the signal.
TEST_F(MemoryCgroupTest, AWorkerTheOomKillerKillsIsSaidToBeOutOfMemory) {
  if (geteuid() != 0) GTEST_SKIP() << "no writable memory cgroup: not root";
  MemoryCgroup cgroup;
  if (cgroup.dir().empty()) GTEST_SKIP() << "no writable memory cgroup: " << cgroup.why();
  RunResult killed = RunCommand(cgroup.Inside(RunArgv({"--benchmark=latency", "--sizes=900M:900M",
                                                       "--max-payload-memory=4G", "--iterations=1",
                                                       "--warmup=0s"})),
                                seconds(120));
  EXPECT_EQ(killed.exit_code, 1) << killed.Describe();
  EXPECT_THAT(killed.err, HasSubstr("killed by SIGKILL (the kernel's out-of-memory killer killed "))
      << killed.Describe();
  EXPECT_THAT(killed.err, Not(HasSubstr("its messages are above"))) << "a SIGKILL leaves no last words";
  ExpectNoChildrenLeft();
  cgroup.Remove();
}

}  // namespace
}  // namespace psbench::testing
