// The conformance suite (conformance.h) over grpc+mpi: each case one job of a real mpirun whose
// PS and worker ranks run their parts (mpi_ranks.cc). Named as the in-process ones are:
// Transports/ConformanceTest.CASE/grpc_mpi. The cases that need PS and workers in one process
// say why (Case::in_process_only) and are not run here.
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "tests/conformance/conformance.h"
#include "tests/integration/run_helpers.h"

namespace psbench::testing::conformance {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class MpiJobRun final : public IntegrationTest {
 public:
  explicit MpiJobRun(const Case& c) : case_(c) {}

  void TestBody() override {
    const std::string ranks = BinPath("conformance_mpi_ranks");
    RunResult r = RunCommand({PSBENCH_MPIEXEC, "--allow-run-as-root", "--oversubscribe", "--bind-to",
                              "none", "--tag-output", "-np", std::to_string(case_.servers), ranks,
                              case_.name, "ps", "--gtest_color=no", ":", "-np", std::to_string(case_.workers),
                              ranks, case_.name, "worker", "--gtest_color=no"},
                             seconds(150));
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    // Every rank ran its one test and passed it: none filtered out, none lost.
    EXPECT_EQ(Count(r.out, "[  PASSED  ] 1 test."), static_cast<size_t>(case_.servers + case_.workers))
        << r.Describe();
    EXPECT_EQ(Count(r.out, "FAILED"), 0u) << r.Describe();
  }

 private:
  const Case& case_;
};

const bool registered = [] {
  for (const Case& c : Cases()) {
    if (!c.in_process_only.empty()) continue;
    ::testing::RegisterTest("Transports/ConformanceTest", absl::StrCat(c.name, "/grpc_mpi").c_str(),
                            nullptr, "grpc_mpi", __FILE__, __LINE__,
                            [&c]() -> ::testing::Test* { return new MpiJobRun(c); });
  }
  return true;
}();

}  // namespace
}  // namespace psbench::testing::conformance
