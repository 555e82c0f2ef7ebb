// A run inside a memory cgroup, as a Slurm job with ConstrainRAMSpace or a container runs:
// payloads over half the cgroup's limit are refused at start with one line naming the limit
// (before, the worker allocated them and the kernel's OOM killer ended it with SIGKILL), and
// every record says what the process could use. Needs a memory cgroup it can create (root,
// a writable cgroup v1 memory hierarchy or cgroup v2 with the memory controller).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"

namespace psbench::testing {
namespace {

// Room for three sanitized processes (the ASan pass runs this test too).
constexpr uint64_t kLimit = uint64_t{1} << 30;

// A memory cgroup of its own with kLimit, removed (once empty) on destruction.
class MemoryCgroup {
 public:
  // Empty `dir()` and a reason in `why()` when none could be made.
  MemoryCgroup() {
    const std::string name = "psbench-test-" + std::to_string(getpid());
    // v1's memory hierarchy, then v2 (its root enables memory for its children where the
    // controller is on at all).
    for (const char* base : {"/sys/fs/cgroup/memory", "/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
      const std::string limit_file = std::string(base) + (std::string(base) == "/sys/fs/cgroup/memory"
                                                               ? "/memory.limit_in_bytes" : "/memory.max");
      const std::string dir = std::string(base) + "/" + name;
      std::error_code ec;
      if (!std::filesystem::create_directory(dir, ec)) {
        why_ += std::string(base) + ": " + (ec ? ec.message() : "exists") + "; ";
        continue;
      }
      const std::string file = dir + limit_file.substr(limit_file.rfind('/'));
      std::ofstream(file) << kLimit;
      std::string read_back;
      std::getline(std::ifstream(file), read_back);
      if (read_back == std::to_string(kLimit)) {
        dir_ = dir;
        return;
      }
      why_ += file + ": could not set the limit; ";
      std::filesystem::remove(dir, ec);
    }
  }
  ~MemoryCgroup() {
    if (dir_.empty()) return;
    std::error_code ec;
    std::filesystem::remove(dir_, ec);  // rmdir: its processes have exited
    EXPECT_FALSE(ec) << "removing " << dir_ << ": " << ec.message();
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

TEST(MemoryCgroupTest, PayloadsOverHalfTheLimitAreRefusedAndRecordsSayTheLimit) {
  if (geteuid() != 0) GTEST_SKIP() << "no writable memory cgroup: not root";
  MemoryCgroup cgroup;
  if (cgroup.dir().empty()) GTEST_SKIP() << "no writable memory cgroup: " << cgroup.why();
  TempDir tmp;
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
  ASSERT_EQ(ok.exit_code, 0) << ok.Describe();
  std::vector<std::string> lines = Lines(ReadFile(json));
  ASSERT_FALSE(lines.empty());
  for (const std::string& line : lines) {
    Json memory = Json::parse(line)["environment"]["memory"];
    EXPECT_EQ(memory["limit_bytes"], kLimit) << line;
    EXPECT_NE(memory["limit_source"].get<std::string>().find("psbench-test-"), std::string::npos) << line;
    EXPECT_GT(memory["host_bytes"].get<uint64_t>(), kLimit) << line;
  }
}

}  // namespace
}  // namespace psbench::testing
