// psbench across "hosts" that are network namespaces on one Ethernet segment (NetnsHosts): the
// PS listens on its host's address, workers dial it from other hosts, and a shaped or cut link
// shows that the benchmark measures the fabric it runs on. Needs root (CI runs as root).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"
#include "tests/netns/netns_hosts.h"

namespace psbench::testing {
namespace {

constexpr double kMbit = 1e6 / 8;  // bytes per second in one Mbit/s

// A psbench-ps inside a host, listening on that host's address.
struct HostPs {
  std::unique_ptr<Process> process;
  std::string address;  // ADDR:PORT as it printed it
};

class NetnsTest : public IntegrationTest {
 protected:
  void SetUp() override {
    IntegrationTest::SetUp();
    if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root (CI runs as root)";
  }

  void TearDown() override {
    // Processes inside the namespaces are gone by now (the test body's Process objects).
    const std::string base = NetnsHosts::kDefaultPrefix + std::string("-") + std::to_string(getpid()) + "-";
    hosts_.reset();
    for (const std::string& name : NetnsHosts::List()) {
      EXPECT_NE(name.rfind(base, 0), 0u) << "namespace left behind: " << name;
    }
    IntegrationTest::TearDown();
  }

  bool MakeHosts(int n) {
    hosts_ = NetnsHosts::Create(n);
    return hosts_ != nullptr;
  }

  // Starts psbench-ps in `host` with `flags` (no --listen given: its default) and reads its
  // first line. expect_address: the address it must name.
  HostPs StartPs(int host, const Argv& flags, const std::string& expect_address) {
    HostPs ps;
    ps.process = std::make_unique<Process>(hosts_->Exec(host, PsArgv(Concat({"--port=0"}, flags))));
    static const std::regex kListening(
        R"(psbench-ps listening on (\S+):(\d+) transport=grpc pid=(\d+) cpus=\S+( .*)?)");
    auto deadline = Clock::now() + seconds(20);
    while (Clock::now() < deadline) {
      std::string out = ps.process->Stdout();
      if (auto nl = out.find('\n'); nl != std::string::npos) {
        std::smatch m;
        std::string line = out.substr(0, nl);
        if (!std::regex_match(line, m, kListening)) {
          ADD_FAILURE() << "psbench-ps: unexpected first line '" << line << "'";
          return ps;
        }
        EXPECT_EQ(m[1], expect_address) << line;
        // ip netns exec execs the PS: the pid it prints is the one we started.
        EXPECT_EQ(std::stoi(m[3]), ps.process->pid()) << line;
        ps.address = std::string(m[1]) + ":" + std::string(m[2]);
        return ps;
      }
      if (auto st = ps.process->Poll()) {
        ADD_FAILURE() << "psbench-ps exited (" << *st << ") before listening: " << ps.process->Stderr();
        return ps;
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
    ADD_FAILURE() << "psbench-ps printed no 'listening' line within 20 s";
    return ps;
  }

  HostPs StartPs(int host) { return StartPs(host, {"--listen=" + hosts_->Address(host)}, hosts_->Address(host)); }

  // A worker in `host`, run to completion; its records (expects exit 0, empty stderr).
  std::vector<Json> RunWorker(int host, const std::string& ps, const Argv& flags) {
    std::string json = tmp_.File("w" + std::to_string(++runs_) + ".jsonl");
    RunResult r = RunCommand(hosts_->Exec(host, WorkerArgv(ps, Concat(flags, {"--json=" + json}))),
                             seconds(60));
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    EXPECT_EQ(r.err, "") << r.Describe();
    return ReadJsonLines(json);
  }

  // The one record of a one-size run.
  Json OneRecord(int host, const std::string& ps, const Argv& flags) {
    auto records = RunWorker(host, ps, flags);
    EXPECT_EQ(records.size(), 1u);
    return records.empty() ? Json::object() : records[0];
  }

  std::unique_ptr<NetnsHosts> hosts_;
  TempDir tmp_;
  int runs_ = 0;
};

// What every record of these runs must say about where the PS was: its host's address, never
// loopback, as the PS itself reported it.
void ExpectPsAddresses(const Json& r, const std::vector<std::string>& ps) {
  SCOPED_TRACE("record: " + r.dump().substr(0, 1500));
  ASSERT_EQ(r["config"]["ps"], Json(ps));
  ASSERT_EQ(r["placement"]["ps"].size(), ps.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_EQ(r["placement"]["ps"][i]["address"], ps[i]);
    EXPECT_EQ(ps[i].rfind("10.201.0.", 0), 0u) << ps[i];
    EXPECT_EQ(ps[i].find("127."), std::string::npos) << ps[i];
  }
  EXPECT_EQ(r.value("validate", false), true);
  EXPECT_EQ(r.value("transport", ""), "grpc");
}

// bytes = payload x operations, and each PS counted what the worker sent it (one worker).
void ExpectBytes(const Json& r, uint64_t payload, uint64_t ops) {
  EXPECT_EQ(r.value("payload_bytes", uint64_t{0}), payload);
  EXPECT_EQ(r.value("iterations", uint64_t{0}), ops);
  EXPECT_EQ(r.value("bytes", uint64_t{0}), payload * ops);
}

double P50Us(const Json& r) { return r["latency_us"].value("p50", 0.0); }

// --- the fixture itself -------------------------------------------------------------------------

TEST_F(NetnsTest, HostsReachEachOtherAndAreAllRemoved) {
  ASSERT_TRUE(MakeHosts(3));
  std::vector<std::string> made = hosts_->Namespaces();
  ASSERT_EQ(made.size(), 4u);  // switch + 3 hosts
  std::vector<std::string> listed = NetnsHosts::List();
  for (const std::string& name : made) {
    EXPECT_NE(std::find(listed.begin(), listed.end(), name), listed.end()) << name;
  }
  EXPECT_TRUE(hosts_->Reachable(2, hosts_->Address(1)));
  EXPECT_TRUE(hosts_->Reachable(1, hosts_->Address(2)));
  EXPECT_FALSE(hosts_->Reachable(1, "10.201.0.99", milliseconds(300))) << "no such host";
  hosts_.reset();
  listed = NetnsHosts::List();
  for (const std::string& name : made) {
    EXPECT_EQ(std::find(listed.begin(), listed.end(), name), listed.end()) << "left: " << name;
  }
}

TEST_F(NetnsTest, StaleNamespacesOfDeadOwnersAreRemoved) {
  // A pid that is certainly dead: a child that exited and was reaped.
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(waitpid(dead, nullptr, 0), dead);
  const std::string stale = std::string(NetnsHosts::kDefaultPrefix) + "-" + std::to_string(dead) + "-h0";
  // pid 1 is alive: its namespace belongs to a run still going and must survive.
  const std::string live =
      std::string(NetnsHosts::kDefaultPrefix) + "-1-t" + std::to_string(getpid());
  for (const std::string& name : {stale, live}) {
    RunResult r = RunCommand({IpBinary(), "netns", "add", name});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
  }
  ASSERT_TRUE(MakeHosts(1));
  std::vector<std::string> listed = NetnsHosts::List();
  EXPECT_EQ(std::find(listed.begin(), listed.end(), stale), listed.end()) << stale << " not removed";
  EXPECT_NE(std::find(listed.begin(), listed.end(), live), listed.end()) << live << " removed";
  RunCommand({IpBinary(), "netns", "delete", live});
  RunCommand({IpBinary(), "netns", "delete", stale});
}

// --- psbench across hosts -------------------------------------------------------------------------

TEST_F(NetnsTest, LatencyAndBandwidthFromAnotherHost) {
  ASSERT_TRUE(MakeHosts(2));
  HostPs ps = StartPs(0);
  ASSERT_FALSE(ps.address.empty());
  EXPECT_EQ(ps.address.rfind("10.201.0.1:", 0), 0u) << ps.address;

  Json lat = OneRecord(1, ps.address, {"--benchmark=latency", "--validate", "--sizes=4K:4K",
                                       "--warmup-iterations=5", "--iterations=50", "--quiet"});
  ExpectPsAddresses(lat, {ps.address});
  EXPECT_EQ(lat.value("benchmark", ""), "latency");
  ExpectBytes(lat, 4096, 50);
  EXPECT_GT(P50Us(lat), 0);

  Json bw = OneRecord(1, ps.address, {"--benchmark=bandwidth", "--validate", "--sizes=64K:64K",
                                      "--warmup-iterations=5", "--iterations=100", "--quiet"});
  ExpectPsAddresses(bw, {ps.address});
  EXPECT_EQ(bw.value("benchmark", ""), "bandwidth");
  ExpectBytes(bw, 65536, 100);
  ASSERT_EQ(bw["ps_counted"].size(), 1u);
  EXPECT_EQ(bw["ps_counted"][0].value("rpcs", uint64_t{0}), 100u);
  EXPECT_EQ(bw["ps_counted"][0].value("bytes", uint64_t{0}), 100u * 65536);
  EXPECT_EQ(ps.process->Stop(SIGTERM, seconds(10)), 0) << ps.process->Stderr();
}

// Throughput: NUM_PS PS on hosts [0, NUM_PS), 2 workers on the next two hosts, all at once.
class NetnsThroughputTest : public NetnsTest, public ::testing::WithParamInterface<int> {};

TEST_P(NetnsThroughputTest, TwoWorkersOnTwoHosts) {
  const int num_ps = GetParam();
  constexpr int kWorkers = 2;
  constexpr uint64_t kIterations = 40;  // per PS
  ASSERT_TRUE(MakeHosts(num_ps + kWorkers));
  std::vector<HostPs> servers;
  std::vector<std::string> addresses;
  for (int i = 0; i < num_ps; ++i) {
    servers.push_back(StartPs(i));
    ASSERT_FALSE(servers.back().address.empty());
    addresses.push_back(servers.back().address);
  }
  std::string ps_list;
  for (const auto& a : addresses) ps_list += (ps_list.empty() ? "" : ",") + a;
  std::vector<std::unique_ptr<Process>> workers;
  std::vector<std::string> files;
  for (int w = 0; w < kWorkers; ++w) {
    files.push_back(tmp_.File("tp" + std::to_string(w) + ".jsonl"));
    workers.push_back(std::make_unique<Process>(hosts_->Exec(
        num_ps + w,
        WorkerArgv(ps_list, {"--benchmark=throughput", "--validate", "--sizes=16K:16K",
                             "--num-workers=2", "--worker-index=" + std::to_string(w),
                             "--run-id=netns", "--warmup-iterations=5",
                             "--iterations=" + std::to_string(kIterations), "--quiet",
                             "--json=" + files.back()}))));
  }
  for (int w = 0; w < kWorkers; ++w) {
    auto st = workers[w]->Wait(seconds(60));
    ASSERT_TRUE(st) << "worker " << w << " still running";
    EXPECT_EQ(*st, 0) << workers[w]->Stderr();
    auto records = ReadJsonLines(files[w]);
    ASSERT_EQ(records.size(), 1u);
    const Json& r = records[0];
    ExpectPsAddresses(r, addresses);
    EXPECT_EQ(r.value("benchmark", ""), "throughput");
    EXPECT_EQ(r.value("workers", 0), kWorkers);
    EXPECT_EQ(r["rpc_per_ps"], Json(std::vector<uint64_t>(num_ps, kIterations)));
    ExpectBytes(r, 16384, kIterations * num_ps);
    EXPECT_GT(r.value("rpc_per_s", 0.0), 0);
  }
  for (auto& s : servers) EXPECT_EQ(s.process->Stop(SIGTERM, seconds(10)), 0) << s.process->Stderr();
}

INSTANTIATE_TEST_SUITE_P(Ps, NetnsThroughputTest, ::testing::Values(1, 2),
                         [](const auto& info) { return std::to_string(info.param) + "ps"; });

// The security default: a PS told nothing listens on loopback, and another host cannot reach
// it even at its host's address and the right port.
TEST_F(NetnsTest, LoopbackPsIsNotReachableFromAnotherHost) {
  ASSERT_TRUE(MakeHosts(2));
  HostPs ps = StartPs(0, {}, "127.0.0.1");
  ASSERT_FALSE(ps.address.empty());
  const std::string port = ps.address.substr(ps.address.rfind(':') + 1);
  const std::string dialed = hosts_->Address(0) + ":" + port;
  RunResult r = RunCommand(hosts_->Exec(1, WorkerArgv(dialed, {"--benchmark=latency", "--connect-timeout=2s",
                                                                "--iterations=3"})),
                           seconds(30));
  EXPECT_FALSE(r.timed_out) << r.Describe();
  // A PS that cannot be reached is a usage error (exit 2), as on loopback (bad_input_test).
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_LT(r.seconds, 8) << "gives up after --connect-timeout=2s\n" << r.Describe();
  ASSERT_EQ(r.ErrLines().size(), 1u) << r.Describe();
  EXPECT_EQ(r.err.rfind("psbench-worker: ", 0), 0u) << r.Describe();
  EXPECT_NE(r.err.find(dialed), std::string::npos) << "names the PS\n" << r.Describe();
  EXPECT_TRUE(ps.process->Running()) << "the PS is unaffected";
  EXPECT_EQ(ps.process->Stop(SIGTERM, seconds(10)), 0);
}

// --- a slower fabric ------------------------------------------------------------------------------

// 100 Mbit/s on the PS's link: the bandwidth benchmark cannot measure more (payload bytes only,
// so headers make it less), and measures clearly less than on the same link unshaped.
TEST_F(NetnsTest, BandwidthSeesAShapedLink) {
  ASSERT_TRUE(MakeHosts(2));
  HostPs ps = StartPs(0);
  ASSERT_FALSE(ps.address.empty());
  const Argv flags = {"--benchmark=bandwidth", "--validate", "--sizes=256K:256K",
                      "--warmup-iterations=4", "--quiet"};
  Json open = OneRecord(1, ps.address, Concat(flags, {"--iterations=120"}));
  ASSERT_EQ(hosts_->Shape(0, {.rate = "100mbit", .delay = ""}), "");
  Json shaped = OneRecord(1, ps.address, Concat(flags, {"--iterations=48"}));
  ExpectPsAddresses(shaped, {ps.address});
  ExpectBytes(shaped, 262144, 48);
  const double open_mbs = open.value("mb_per_s", 0.0), shaped_mbs = shaped.value("mb_per_s", 0.0);
  const double limit_mbs = 100 * kMbit / 1e6;  // 12.5 MB/s
  std::cout << "bandwidth 256 KiB: unshaped " << open_mbs << " MB/s, shaped to 100mbit "
            << shaped_mbs << " MB/s (limit " << limit_mbs << ")\n";
  RecordProperty("unshaped_mb_per_s", std::to_string(open_mbs));
  RecordProperty("shaped_mb_per_s", std::to_string(shaped_mbs));
  // The bucket's 32 KB burst over a run of about a second, and tc's rate rounding: 3 %.
  EXPECT_LE(shaped_mbs, limit_mbs * 1.03);
  EXPECT_GT(shaped_mbs, 0);
  EXPECT_LT(shaped_mbs, open_mbs / 2) << "the unshaped link must be clearly faster";
  EXPECT_EQ(ps.process->Stop(SIGTERM, seconds(10)), 0);
}

// Latency over a rate-limited link: each direction of a round trip carries the payload through
// a 100 Mbit/s bucket, so p50 >= 2 x (payload - burst) / rate, whatever the machine's load.
TEST_F(NetnsTest, LatencySeesAShapedLinksRate) {
  ASSERT_TRUE(MakeHosts(2));
  HostPs ps = StartPs(0);
  ASSERT_FALSE(ps.address.empty());
  const Argv flags = {"--benchmark=latency", "--validate", "--sizes=128K:128K",
                      "--warmup-iterations=3", "--iterations=30", "--quiet"};
  Json open = OneRecord(1, ps.address, flags);
  ASSERT_EQ(hosts_->Shape(0, {.rate = "100mbit", .delay = ""}), "");
  Json shaped = OneRecord(1, ps.address, flags);
  ExpectPsAddresses(shaped, {ps.address});
  ExpectBytes(shaped, 131072, 30);
  const double floor_us = 2 * (131072.0 - 32 * 1024) / (100 * kMbit) * 1e6;  // 15.7 ms
  std::cout << "latency 128 KiB p50: unshaped " << P50Us(open) << " us, shaped to 100mbit "
            << P50Us(shaped) << " us (floor " << floor_us << " us)\n";
  EXPECT_GE(P50Us(shaped), floor_us * 0.97);  // tc rounds the rate
  EXPECT_GT(P50Us(shaped), 1.5 * P50Us(open)) << "clearly above the unshaped p50";
  EXPECT_EQ(ps.process->Stop(SIGTERM, seconds(10)), 0);
}

// netem: 5 ms each way on the PS's link (and 100 Mbit/s) adds at least 10 ms to every round
// trip. Skipped where the kernel has no sch_netem (this check then has no fabric to measure).
TEST_F(NetnsTest, LatencySeesALinksDelay) {
  ASSERT_TRUE(MakeHosts(2));
  HostPs ps = StartPs(0);
  ASSERT_FALSE(ps.address.empty());
  const Argv flags = {"--benchmark=latency", "--validate", "--sizes=1K:1K",
                      "--warmup-iterations=5", "--iterations=40", "--quiet"};
  Json open = OneRecord(1, ps.address, flags);
  std::string why = hosts_->Shape(0, {.rate = "100mbit", .delay = "5ms"});
  if (why.rfind("no netem:", 0) == 0) {
    EXPECT_EQ(ps.process->Stop(SIGTERM, seconds(10)), 0);
    GTEST_SKIP() << why;
  }
  ASSERT_EQ(why, "");
  Json shaped = OneRecord(1, ps.address, flags);
  ExpectPsAddresses(shaped, {ps.address});
  ExpectBytes(shaped, 1024, 40);
  std::cout << "latency 1 KiB p50: unshaped " << P50Us(open) << " us, netem 5ms+100mbit "
            << P50Us(shaped) << " us\n";
  EXPECT_GE(shaped["latency_us"].value("min", 0.0), 10000) << "no round trip beats 2 x 5 ms";
  EXPECT_GE(P50Us(shaped), 10000);
  EXPECT_GT(P50Us(shaped), P50Us(open) + 5000) << "clearly above the unshaped p50";
  EXPECT_EQ(ps.process->Stop(SIGTERM, seconds(10)), 0);
}

// A cut cable mid-run: the PS stays up but nothing arrives; the worker fails within its
// --rpc-timeout, naming the PS, instead of hanging.
TEST_F(NetnsTest, CutLinkFailsTheWorkerWithinItsRpcTimeout) {
  ASSERT_TRUE(MakeHosts(2));
  HostPs ps = StartPs(0);
  ASSERT_FALSE(ps.address.empty());
  Process worker(hosts_->Exec(1, WorkerArgv(ps.address, {"--benchmark=bandwidth", "--sizes=64K:64K",
                                                         "--warmup=0s", "--duration=30s",
                                                         "--rpc-timeout=2s", "--quiet"})));
  std::this_thread::sleep_for(milliseconds(1500));
  ASSERT_TRUE(worker.Running()) << worker.Stderr();
  auto cut = Clock::now();
  ASSERT_TRUE(hosts_->SetLinkUp(0, false));
  auto status = worker.Wait(seconds(30));
  const double took = std::chrono::duration<double>(Clock::now() - cut).count();
  ASSERT_TRUE(status) << "worker still running 30 s after the cut";
  EXPECT_EQ(*status, 1) << worker.Stderr();
  EXPECT_LT(took, 8) << "--rpc-timeout=2s, plus a loaded machine";
  const std::string err = worker.Stderr();
  ASSERT_EQ(Lines(err).size(), 1u) << err;
  EXPECT_EQ(err.rfind("psbench-worker: ", 0), 0u) << err;
  EXPECT_NE(err.find(ps.address), std::string::npos) << "names the PS: " << err;
  EXPECT_TRUE(ps.process->Running()) << "the PS itself is fine";
  EXPECT_EQ(ps.process->Stop(SIGTERM, seconds(10)), 0);
}

}  // namespace
}  // namespace psbench::testing
