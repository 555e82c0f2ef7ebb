// `psbench ssh` across separate network namespaces (NetnsHosts): an sshd on each of three
// "hosts", psbench ssh on a fourth, so every PS and worker is launched over a real network
// and talks to the others by their hosts' addresses, not loopback. Needs root.
// Registered in tests/CMakeLists.txt together with psbench ssh (deploy/cluster), label ssh:
//   psbench_test(NAME SOURCES ssh/NAME.cc ssh/sshd_fixture.cc [netns/netns_hosts.cc]
//                ${PSBENCH_INTEGRATION_HELPERS} LABELS ssh LINK nlohmann_json::nlohmann_json)
//   add_dependencies(NAME psbench-ps psbench-worker psbench)
#include <unistd.h>

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"
#include "tests/netns/netns_hosts.h"
#include "tests/ssh/sshd_fixture.h"

namespace psbench::testing {
namespace {

constexpr int kSshPort = 2222;  // each host is a namespace of its own: the same port is free on all
constexpr int kLogin = 3;       // the host psbench ssh runs on

class SshNetnsTest : public IntegrationTest {
 protected:
  void SetUp() override {
    IntegrationTest::SetUp();
    if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root (CI runs as root)";
    hosts_ = NetnsHosts::Create(4);
    ASSERT_TRUE(hosts_);
    for (int h = 0; h < kLogin; ++h) {
      Sshd::Options o;
      o.listen = hosts_->Address(h);
      o.port = kSshPort;
      o.wrap = hosts_->Exec(h, {});
      o.client_wrap = hosts_->Exec(kLogin, {});
      o.keys_from = sshd_.empty() ? nullptr : sshd_[0].get();
      sshd_.push_back(Sshd::Start(o));
      ASSERT_TRUE(sshd_.back()) << "sshd on host " << h;
    }
  }

  void TearDown() override {
    for (auto it = sshd_.rbegin(); it != sshd_.rend(); ++it) {  // the key owner last
      if (*it) {
        EXPECT_TRUE((*it)->Sessions().empty()) << "sshd sessions left on " << (*it)->listen();
        (*it)->Stop();
      }
    }
    sshd_.clear();
    const std::string base = std::string(NetnsHosts::kDefaultPrefix) + "-" + std::to_string(getpid()) + "-";
    hosts_.reset();
    for (const std::string& name : NetnsHosts::List()) {
      EXPECT_NE(name.rfind(base, 0), 0u) << "namespace left behind: " << name;
    }
    IntegrationTest::TearDown();
  }

  std::unique_ptr<NetnsHosts> hosts_;
  std::vector<std::unique_ptr<Sshd>> sshd_;
  TempDir tmp_;
};

TEST_F(SshNetnsTest, OnePsTwoWorkersOnThreeHosts) {
  const std::string hostfile = tmp_.Write(
      "hosts", hosts_->Address(0) + "\n" + hosts_->Address(1) + "\n" + hosts_->Address(2) + "\n");
  const std::string json = tmp_.File("out.jsonl");
  RunResult r = RunCommand(
      hosts_->Exec(kLogin, {BinPath("psbench"), "ssh", "--hostfile=" + hostfile,
                            "--ssh=" + sshd_[0]->SshCommand(),
                            "--remote-bin-dir=" + std::string(PSBENCH_BIN_DIR),
                            "--ps-interface=eth0", "--num-ps=1", "--benchmark=throughput",
                            "--validate", "--warmup-iterations=1", "--iterations=20",
                            "--connect-timeout=20s", "--json=" + json}),
      seconds(90));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 3u) << "2 workers + total\n" << r.Describe();
  std::set<int> workers;
  for (const Json& rec : records) {
    SCOPED_TRACE(rec.dump().substr(0, 1500));
    ASSERT_EQ(rec["placement"]["ps"].size(), 1u);
    // The PS listened on its host's eth0 and the workers dialed that, from other hosts.
    const std::string ps = rec["placement"]["ps"][0].value("address", "");
    EXPECT_EQ(ps.rfind(hosts_->Address(0) + ":", 0), 0u) << ps;
    EXPECT_EQ(rec.value("workers", 0), 2);
    if (rec.value("scope", "") == "worker") {
      workers.insert(rec.value("worker_index", -1));
      EXPECT_EQ(rec.value("iterations", 0), 20);
    }
  }
  EXPECT_EQ(workers, (std::set<int>{0, 1}));
  EXPECT_EQ(records.back().value("scope", ""), "total");
  // Each process came in through its own host's sshd.
  for (int h = 0; h < kLogin; ++h) {
    EXPECT_NE(sshd_[h]->Log().find("Accepted publickey"), std::string::npos)
        << "no login on host " << h << "\n" << sshd_[h]->Log();
  }
}

// --transports on hosts of their own: each entry is a fresh PS and worker, dialed over the
// namespaces' network, and the comparison record has both.
TEST_F(SshNetnsTest, TransportsComparesTwoModesAcrossHosts) {
  const std::string hostfile = tmp_.Write("hosts", hosts_->Address(0) + "\n" + hosts_->Address(1) + "\n");
  const std::string json = tmp_.File("out.jsonl");
  RunResult r = RunCommand(
      hosts_->Exec(kLogin, {BinPath("psbench"), "ssh", "--hostfile=" + hostfile,
                            "--ssh=" + sshd_[0]->SshCommand(),
                            "--remote-bin-dir=" + std::string(PSBENCH_BIN_DIR),
                            "--ps-interface=eth0", "--benchmark=latency", "--sizes=1K:4K",
                            "--transports=grpc/serialized,grpc", "--validate",
                            "--warmup-iterations=1", "--iterations=20", "--connect-timeout=20s",
                            "--json=" + json}),
      seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("grpc/non-serialized / grpc/serialized"), std::string::npos) << r.Describe();
  std::vector<Json> records = ReadJsonLines(json);
  ASSERT_EQ(records.size(), 3u + 3u + 3u) << "3 sizes per entry, then 3 comparison rows\n" << r.Describe();
  std::set<std::string> run_ids;
  for (size_t i = 0; i < 6; ++i) {
    const Json& rec = records[i];
    SCOPED_TRACE(rec.dump().substr(0, 1500));
    EXPECT_EQ(rec.value("mode", ""), i < 3 ? "serialized" : "non-serialized");
    EXPECT_EQ(rec.value("iterations", 0), 20);
    // The PS on host 0's eth0, the worker on host 1.
    EXPECT_EQ(rec["placement"]["ps"][0].value("address", "").rfind(hosts_->Address(0) + ":", 0), 0u);
    EXPECT_EQ(rec["cluster"]["worker_hosts"], Json::array({hosts_->Address(1)}));
    run_ids.insert(rec["config"].value("run_id", ""));
  }
  EXPECT_EQ(run_ids.size(), 2u) << "one fresh set of processes per entry";
  for (size_t i = 6; i < 9; ++i) {
    EXPECT_EQ(records[i].value("kind", ""), "comparison");
    EXPECT_EQ(records[i]["values"]["p50_us"].size(), 2u) << records[i].dump();
  }
}

}  // namespace
}  // namespace psbench::testing
