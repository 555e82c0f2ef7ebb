// kExchange over grpc+mpi at the transport seam, under a real mpirun: one PS rank with a test
// handler and worker ranks with real clients (mpi_exchange_ranks.cc). Each case is one MPI job
// whose ranks check what they see and print "ok" or what failed.
#include <string>

#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"

namespace psbench::testing {
namespace {

class MpiExchangeTest : public IntegrationTest {
 protected:
  // `mpirun -np 1 mpi_exchange_ranks ps CASE : -np W mpi_exchange_ranks worker CASE`, bounded.
  static RunResult RunCase(const std::string& test_case, int workers) {
    const std::string ranks = BinPath("mpi_exchange_ranks");
    return RunCommand({PSBENCH_MPIEXEC, "--allow-run-as-root", "--oversubscribe", "--bind-to",
                       "none", "-np", "1", ranks, "ps", test_case, ":", "-np",
                       std::to_string(workers), ranks, "worker", test_case},
                      seconds(120));
  }

  static void ExpectAllOk(const RunResult& r, int workers) {
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    EXPECT_NE(r.out.find("ps: ok"), std::string::npos) << r.Describe();
    for (int w = 0; w < workers; ++w) {
      EXPECT_NE(r.out.find("worker " + std::to_string(w) + ": ok"), std::string::npos)
          << r.Describe();
    }
    EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.Describe();
  }
};

// The handler answers at once (each float plus one); the reply lands in the reply payload's
// buffers; the PS counts the exchanges; three steps with new request bytes, validated.
TEST_F(MpiExchangeTest, ImmediateAnswerLandsInTheReplyPayload) {
  ExpectAllOk(RunCase("immediate", 1), 1);
}

// Three worker ranks; the handler holds each step's requests until all three are in, then
// answers from a thread of its own (the progress thread posts the replies).
TEST_F(MpiExchangeTest, SynchronousStepAnswersEveryWorkerLater) {
  ExpectAllOk(RunCase("sync", 3), 3);
}

TEST_F(MpiExchangeTest, WithoutHandlerExchangesFailAndThePsServesOn) {
  ExpectAllOk(RunCase("nohandler", 1), 1);
}

TEST_F(MpiExchangeTest, HandlerErrorIsPrefixedWithThePsAddress) {
  ExpectAllOk(RunCase("error", 1), 1);
}

TEST_F(MpiExchangeTest, MismatchedOrUnknownPayloadsAreInvalidArgument) {
  ExpectAllOk(RunCase("invalid", 1), 1);
}

TEST_F(MpiExchangeTest, CorruptedRequestIsDataLoss) {
  ExpectAllOk(RunCase("corrupt", 1), 1);
}

// The PS stops while its handler holds both workers' exchanges: the workers get an error,
// every rank exits 0, and answers after the server is gone are harmless.
TEST_F(MpiExchangeTest, ShutdownCancelsHeldExchanges) {
  ExpectAllOk(RunCase("shutdown", 2), 2);
}

}  // namespace
}  // namespace psbench::testing
