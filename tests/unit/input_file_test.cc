// ReadInputFile and CheckOutputSpares: only regular files of bounded size are
// read, nothing blocks, and an output is caught when it is an input under another name.
#include "inputs/input_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/run_helpers.h"

namespace psbench {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class InputFileTest : public ::testing::Test {
 protected:
  testing::TempDir tmp_;
};

TEST_F(InputFileTest, ReadsARegularFileWhole) {
  const std::string path = tmp_.Write("a.json", "[1, 2, 3]");
  absl::StatusOr<std::string> text = ReadInputFile(path, "trace file", 1024);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "[1, 2, 3]");
  // Exactly at the limit is within it.
  EXPECT_TRUE(ReadInputFile(path, "trace file", 9).ok());
}

TEST_F(InputFileTest, MissingFileKeepsItsErrnoAndNamesThePath) {
  absl::StatusOr<std::string> text = ReadInputFile(tmp_.File("none.json"), "trace file", 1024);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(text.status().message(),
            "trace file '" + tmp_.File("none.json") + "': cannot open: No such file or directory");
}

TEST_F(InputFileTest, RefusesWhatIsNotARegularFile) {
  struct Case {
    std::string path;
    std::string kind;
  };
  ASSERT_EQ(::mkfifo(tmp_.File("fifo").c_str(), 0600), 0);
  for (const Case& c : {Case{tmp_.path(), "a directory"}, Case{"/dev/zero", "a character device"},
                        Case{tmp_.File("fifo"), "a FIFO"}}) {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::string> text = ReadInputFile(c.path, "trace file", 1 << 20);
    // A FIFO without a writer must not block the open.
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2)) << c.path;
    EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument) << c.path;
    EXPECT_EQ(text.status().message(),
              "trace file '" + c.path + "': is " + c.kind + ", not a regular file");
    // A flag names its input as it was given.
    EXPECT_EQ(ReadInputFile(c.path, "--tls-ca", 1 << 20).status().message(),
              "--tls-ca=" + c.path + ": is " + c.kind + ", not a regular file");
  }
}

TEST_F(InputFileTest, RefusesAFileOverTheLimitBeforeReadingIt) {
  const std::string path = tmp_.Write("big.json", std::string(3 << 20, ' '));
  absl::StatusOr<std::string> text = ReadInputFile(path, "report input", 1 << 20);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(text.status().message(), "report input '" + path +
                                         "': is 3145728 bytes, over the 1 MiB limit (raise it "
                                         "with --max-input-size)");
  // A fixed limit names no flag.
  EXPECT_THAT(std::string(ReadInputFile(path, "--tls-ca", 1000, "").status().message()),
              HasSubstr("over the 1000 bytes limit"));
  EXPECT_THAT(std::string(ReadInputFile(path, "--tls-ca", 1000, "").status().message()),
              ::testing::Not(HasSubstr("raise")));
}

TEST_F(InputFileTest, AnOutputOverAnInputIsCaughtUnderAnyName) {
  const std::string in = tmp_.Write("in.jsonl", "{}\n");
  ASSERT_EQ(::link(in.c_str(), tmp_.File("hard.jsonl").c_str()), 0);
  ASSERT_EQ(::symlink(in.c_str(), tmp_.File("soft.jsonl").c_str()), 0);
  const std::vector<NamedPath> inputs = {{"--trace", in}};
  for (const std::string& out : {in, tmp_.File("hard.jsonl"), tmp_.File("soft.jsonl"),
                                 tmp_.path() + "/./in.jsonl"}) {
    absl::Status s = CheckOutputSpares("--json", out, inputs);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << out;
    EXPECT_THAT(std::string(s.message()), StartsWith("--json=" + out + " would write over --trace=" + in))
        << out;
  }
  EXPECT_TRUE(CheckOutputSpares("--json", tmp_.File("other.jsonl"), inputs).ok());
  EXPECT_TRUE(CheckOutputSpares("--json", "-", inputs).ok());
  EXPECT_TRUE(CheckOutputSpares("--json", "", inputs).ok());
}

TEST_F(InputFileTest, TwoOutputsNotYetWrittenAreCaughtByPath) {
  const std::string out = tmp_.File("new.md");
  absl::Status s = CheckOutputSpares("--csv", tmp_.path() + "/./new.md", {{"--markdown", out}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckOutputSpares("--csv", tmp_.File("new.csv"), {{"--markdown", out}}).ok());
}

// Relative names, one starting with a part that exists ("."), the other with none that does.
TEST_F(InputFileTest, TwoRelativeOutputsNotYetWrittenAreCaughtByPath) {
  const std::string cwd = std::filesystem::current_path().string();
  std::filesystem::current_path(tmp_.path());
  absl::Status s = CheckOutputSpares("--csv", "./new.md", {{"--markdown", "new.md"}});
  absl::Status other = CheckOutputSpares("--csv", "new.csv", {{"--markdown", "./new.md"}});
  std::filesystem::current_path(cwd);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(other.ok());
}

// An output checked before a run leaves nothing behind: a new file is created and removed, an
// existing one kept as it was, and a link to nothing yet kept a link (creating through it and
// removing the name made its target and took the user's link).
TEST_F(InputFileTest, CheckingAnOutputLeavesItAsItWas) {
  const std::string fresh = tmp_.File("fresh.json");
  EXPECT_TRUE(CheckOutputWritable("--write-trace", fresh).ok());
  EXPECT_FALSE(std::filesystem::exists(fresh));
  const std::string kept = tmp_.Write("kept.json", "data");
  EXPECT_TRUE(CheckOutputWritable("--write-trace", kept).ok());
  EXPECT_EQ(testing::ReadFile(kept), "data");
  const std::string link = tmp_.File("link.json");
  ASSERT_EQ(::symlink("target.json", link.c_str()), 0);
  EXPECT_TRUE(CheckOutputWritable("--write-trace", link).ok());
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_FALSE(std::filesystem::exists(tmp_.File("target.json")));
  const std::string nowhere = tmp_.File("nowhere.json");
  ASSERT_EQ(::symlink("no/such/dir/t.json", nowhere.c_str()), 0);
  EXPECT_THAT(std::string(CheckOutputWritable("--write-trace", nowhere).message()), HasSubstr("cannot write: No such file"));
  EXPECT_THAT(std::string(CheckOutputWritable("--write-trace", tmp_.path()).message()),
              StartsWith("--write-trace=" + tmp_.path() + ": cannot write: Is a directory"));
}

}  // namespace
}  // namespace psbench
