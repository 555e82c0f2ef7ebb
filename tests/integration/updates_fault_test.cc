// No lost update with a worker killed mid-run (label faults): three workers push through two
// PS asynchronously; worker 2 is SIGKILLed once the PS has applied some of its steps. The
// survivors must still find every parameter exact against what each PS reports it applied,
// and that report must say exactly what happened: every step of the survivors once, a prefix
// of worker 2's steps, nothing twice. The PS's report at exit is the one the last survivor
// checked the final parameters against.
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"
#include "transports/transport.h"

namespace psbench::testing {
namespace {

constexpr int kWorkers = 3;
constexpr int kSteps = 4000;
constexpr int kVictim = 2;

// Worker `w`'s applied count in the PS's GetInfo report (0 before the run starts).
uint64_t AppliedOf(Client& client, size_t ps, int w) {
  auto info = client.GetInfo(ps);
  if (!info.ok() || info->updates.empty()) return 0;
  Json report = Json::parse(info->updates);
  if (report["workers"].size() <= static_cast<size_t>(w)) return 0;
  return report["workers"][w]["applied"].get<uint64_t>();
}

class UpdatesFaultTest : public IntegrationTest {};

TEST_F(UpdatesFaultTest, AsyncWorkerKilledMidRunThePsAccountsForExactlyWhatItApplied) {
  auto ps0 = PsServer::Start();
  auto ps1 = PsServer::Start();
  ASSERT_TRUE(ps0 && ps1);
  TempDir tmp;
  // A small model (2 x 16 B, 2 x 4 KiB) so that steps are quick and the run is long in steps.
  std::vector<std::unique_ptr<Process>> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.push_back(std::make_unique<Process>(WorkerArgv(
        ps0->address() + "," + ps1->address(),
        {"--benchmark=updates", "--async", "--steps=" + std::to_string(kSteps), "--buffers=4",
         "--categories=S,M", "--small=16", "--medium=4K", "--num-workers=" + std::to_string(kWorkers),
         "--worker-index=" + std::to_string(w), "--run-id=killed", "--quiet",
         "--json=" + tmp.File("w" + std::to_string(w) + ".jsonl")})));
  }
  // Watch PS 0's account of the victim; kill it once 20 of its steps are in.
  ClientOptions options;
  options.servers = {ps0->address()};
  auto client = MakeClient("grpc", options);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->Connect().ok());
  const auto give_up = Clock::now() + seconds(60);
  while (AppliedOf(**client, 0, kVictim) < 20 && Clock::now() < give_up && workers[kVictim]->Running()) {
    std::this_thread::sleep_for(milliseconds(2));
  }
  ASSERT_TRUE(workers[kVictim]->Running()) << "the victim ended before it was killed: "
                                           << workers[kVictim]->Stderr();
  workers[kVictim]->Signal(SIGKILL);
  EXPECT_EQ(workers[kVictim]->Wait(seconds(5)), 128 + SIGKILL);
  for (int w = 0; w < kWorkers; ++w) {
    if (w != kVictim) {
      ASSERT_TRUE(workers[w]->Running()) << "survivor " << w << " was already done";
    }
  }
  client->reset();

  // The survivors finish and find every parameter exact against the PS's account.
  Json last_snapshot[2];
  for (int w = 0; w < kWorkers; ++w) {
    if (w == kVictim) continue;
    auto status = workers[w]->Wait(seconds(120));
    ASSERT_TRUE(status) << "survivor " << w << " still running";
    EXPECT_EQ(*status, 0) << workers[w]->Stderr();
    std::vector<Json> records = ReadJsonLines(tmp.File("w" + std::to_string(w) + ".jsonl"));
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0]["result"], "exact") << records[0].dump();
    EXPECT_EQ(records[0]["mismatches"], 0);
    for (size_t p = 0; p < 2; ++p) {
      const Json& applied = records[0]["placement"][p]["applied"];
      if (last_snapshot[p].is_null() || applied["updates"] > last_snapshot[p]["updates"]) {
        last_snapshot[p] = applied;
      }
    }
  }
  EXPECT_FALSE(std::filesystem::exists(tmp.File("w2.jsonl")) &&
               !ReadJsonLines(tmp.File("w2.jsonl")).empty())
      << "the victim wrote no record";

  // What each PS says it applied: the survivors' every step once, a prefix of the victim's.
  uint64_t victim_applied[2] = {0, 0};
  PsServer* servers[2] = {ps0.get(), ps1.get()};
  for (size_t p = 0; p < 2; ++p) {
    Json report = StopAndReadAppliedUpdates(*servers[p]);
    ASSERT_EQ(report["workers"].size(), 3u) << report.dump();
    EXPECT_FALSE(report["sync"].get<bool>());
    for (int w = 0; w < kWorkers; ++w) {
      const Json& rw = report["workers"][w];
      EXPECT_TRUE(rw["duplicates"].empty()) << report.dump();
      if (w != kVictim) {
        EXPECT_EQ(rw["applied"], kSteps) << report.dump();
        EXPECT_EQ(rw["steps"], "0-" + std::to_string(kSteps - 1));
      }
    }
    const Json& victim = report["workers"][kVictim];
    victim_applied[p] = victim["applied"].get<uint64_t>();
    // PS 0 was watched to 20; PS 1 may be one step behind if the kill fell between the two.
    EXPECT_GE(victim_applied[p], p == 0 ? 20u : 19u) << report.dump();
    EXPECT_LT(victim_applied[p], static_cast<uint64_t>(kSteps)) << report.dump();
    EXPECT_EQ(victim["steps"], "0-" + std::to_string(victim_applied[p] - 1))
        << "the victim's steps go out in order, one at a time: " << report.dump();
    EXPECT_EQ(report["updates"], 2 * kSteps + victim_applied[p]);
    // The final parameters were checked against this very account by the last survivor.
    EXPECT_EQ(last_snapshot[p], report) << "PS " << p;
  }
  // Killed between its exchanges with the two PS, or between steps.
  EXPECT_LE(std::max(victim_applied[0], victim_applied[1]) - std::min(victim_applied[0], victim_applied[1]), 1u);
}

}  // namespace
}  // namespace psbench::testing
