// The sshd fixture itself: a key-only sshd on loopback that runs commands and, when stopped,
// leaves neither itself nor any session or remote command behind.
#include <signal.h>
#include <unistd.h>

#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"
#include "tests/ssh/sshd_fixture.h"

namespace psbench::testing {
namespace {

class SshdTest : public IntegrationTest {};

TEST_F(SshdTest, RunsARemoteCommand) {
  auto sshd = Sshd::Start();
  ASSERT_TRUE(sshd);
  RunResult r = RunCommand(sshd->SshArgv("127.0.0.1", "echo remote $((6 * 7))"), seconds(30));
  EXPECT_EQ(r.exit_code, 0) << r.Describe() << "\n--- sshd ---\n" << sshd->Log();
  EXPECT_EQ(r.out, "remote 42\n") << r.Describe();
  // The one string for --ssh= runs the same way through a shell.
  RunResult viash = RunCommand({"/bin/sh", "-c", sshd->SshCommand() + " 127.0.0.1 echo ok"}, seconds(30));
  EXPECT_EQ(viash.out, "ok\n") << viash.Describe();
}

TEST_F(SshdTest, OnlyTheTestsKeyGetsIn) {
  auto sshd = Sshd::Start();
  ASSERT_TRUE(sshd);
  TempDir other;
  RunResult k = RunCommand({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other.File("k")});
  ASSERT_EQ(k.exit_code, 0) << k.Describe();
  Argv argv = sshd->SshArgv("127.0.0.1", "true");
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == "-i") argv[i + 1] = other.File("k");
  }
  RunResult r = RunCommand(argv, seconds(30));
  EXPECT_EQ(r.exit_code, 255) << "ssh's own failure\n" << r.Describe();
  EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.Describe();
}

TEST_F(SshdTest, StopEndsSessionsAndTheirCommands) {
  auto sshd = Sshd::Start();
  ASSERT_TRUE(sshd);
  const pid_t daemon = sshd->pid();
  // A session that would outlive the test if nothing ended it.
  Process client(sshd->SshArgv("127.0.0.1", "exec sleep 300"));
  std::optional<ProcInfo> sleeper;
  auto deadline = Clock::now() + seconds(20);
  while (!sleeper && Clock::now() < deadline) {
    for (const ProcInfo& p : sshd->Sessions()) {
      if (p.comm == "sleep") sleeper = p;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_TRUE(sleeper) << "no remote sleep under sshd\n" << sshd->Log();
  sshd->Stop();
  EXPECT_FALSE(Alive(sleeper->pid)) << "remote command left running";
  EXPECT_FALSE(Alive(daemon)) << "sshd left running";
  // The client sees its connection closed and exits by itself.
  auto st = client.Wait(seconds(10));
  EXPECT_TRUE(st) << "ssh client still running after sshd stopped";
}

}  // namespace
}  // namespace psbench::testing
