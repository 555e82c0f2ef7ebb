// The trainer through real PS processes (psbench run --trainer): synchronous data parallel
// training must train exactly like one worker with the whole batch, the loss must fall, the
// gradient trace must replay as a payload trace, and bad trainer flags must be refused.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "gtest/gtest.h"
#include "tests/integration/run_helpers.h"
#include "transports/transport.h"

namespace psbench::testing {
namespace {

class DistributedTrainingTest : public IntegrationTest {
 protected:
  std::string TempPath(const std::string& name) {
    return "/tmp/psbench-trainer-test-" + std::to_string(getpid()) + "-" + name;
  }
  // Runs `psbench run --trainer=...`; returns the per-worker records.
  std::vector<Json> Train(const Argv& flags, const std::string& name) {
    const std::string json = TempPath(name + ".jsonl");
    RunResult r = RunCommand(RunArgv(Concat({"--json=" + json}, flags)), seconds(240));
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    std::vector<Json> workers;
    for (const Json& rec : ReadJsonLines(json))
      if (rec["kind"] == "train") workers.push_back(rec);
    unlink(json.c_str());
    return workers;
  }
};

// Two workers of batch B against two PS end with the parameters of one worker of batch 2B:
// the PS averages the two batch means, which is the mean over the whole batch, and each
// worker trains on its half of the same samples. Summation order differs, hence the
// tolerance (float rounding, about 1e-7 relative per operation over 20 steps).
TEST_F(DistributedTrainingTest, SyncTwoWorkersMatchOneWorkerWithTheWholeBatch) {
  const Argv common = {"--trainer=tiny", "--num-ps=2", "--steps=20", "--warmup-steps=0",
                       "--learning-rate=0.01", "--sync"};
  auto one = Train(Concat(common, {"--num-workers=1", "--batch=4"}), "one");
  auto two = Train(Concat(common, {"--num-workers=2", "--batch=2"}), "two");
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(two.size(), 2u);
  const double sum = one[0]["final_params"]["sum"].get<double>();
  const double squares = one[0]["final_params"]["sum_squares"].get<double>();
  const Json& norms = one[0]["final_params"]["norms"];
  for (const Json& w : two) {
    EXPECT_NEAR(w["final_params"]["sum"].get<double>(), sum, 1e-5 * std::abs(sum)) << w.dump();
    EXPECT_NEAR(w["final_params"]["sum_squares"].get<double>(), squares, 1e-5 * squares) << w.dump();
    // Tensor by tensor: each norm within 1e-5 relative (not bit-identical: the sums run in
    // another order), so no tensor can be off while the totals agree.
    ASSERT_EQ(w["final_params"]["norms"].size(), norms.size());
    for (size_t t = 0; t < norms.size(); ++t) {
      const double want = norms[t].get<double>();
      EXPECT_NEAR(w["final_params"]["norms"][t].get<double>(), want, 1e-5 * want + 1e-12) << "tensor " << t;
    }
    EXPECT_EQ(w["num_workers"], 2);
    EXPECT_EQ(w["placement"].size(), 2u);
  }
  // Both workers hold the same parameters after the last synchronous step, to the bit.
  EXPECT_EQ(two[0]["final_params"]["hash"], two[1]["final_params"]["hash"]);
  EXPECT_EQ(two[0]["final_params"], two[1]["final_params"]);
  // And the task is learnt: far below chance (ln 10 = 2.3).
  EXPECT_LT(one[0]["loss_last"].get<double>(), 0.5);
}

// The transport moves bytes; it must not change the training: the same run over every
// transport that runs here (and both gRPC wire modes) ends with bit-identical parameters.
TEST_F(DistributedTrainingTest, EveryTransportTrainsIdentically) {
  const Argv common = {"--trainer=tiny", "--num-ps=2", "--num-workers=2", "--batch=4",
                       "--steps=10", "--warmup-steps=0", "--sync", "--validate"};
  std::vector<Argv> variants = {{"--transport=grpc", "--mode=non-serialized"},
                                {"--transport=grpc", "--mode=serialized"}};
  for (const std::string& t : TransportNames())
    if (t == "grpc+mpi") variants.push_back({"--transport=grpc+mpi"});
  Json reference;
  for (const Argv& v : variants) {
    auto workers = Train(Concat(common, v), "transport");
    ASSERT_EQ(workers.size(), 2u) << v[0];
    // Every tensor byte over the transport's own data plane, counted on both sides.
    EXPECT_EQ(ExpectAllMovedOver(workers, v[0].substr(std::string("--transport=").size())), 2u);
    for (const Json& w : workers) {
      if (reference.is_null()) reference = w["final_params"];
      // Every parameter byte (the hash), not just its sums.
      EXPECT_EQ(w["final_params"]["hash"], reference["hash"]) << w["transport"] << " " << w["mode"];
      EXPECT_EQ(w["final_params"], reference) << w["transport"] << " " << w["mode"];
    }
  }
}

// A different number of workers that does not split the batch the same way is not the same
// training: the check above can fail.
TEST_F(DistributedTrainingTest, DifferentGlobalBatchEndsElsewhere) {
  const Argv common = {"--trainer=tiny", "--num-ps=1", "--steps=5", "--warmup-steps=0", "--sync"};
  auto a = Train(Concat(common, {"--num-workers=1", "--batch=4"}), "a");
  auto b = Train(Concat(common, {"--num-workers=1", "--batch=2"}), "b");
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_GT(std::abs(a[0]["final_params"]["sum"].get<double>() - b[0]["final_params"]["sum"].get<double>()),
            1e-4 * std::abs(a[0]["final_params"]["sum"].get<double>()));
  EXPECT_NE(a[0]["final_params"]["hash"], b[0]["final_params"]["hash"]);
}

TEST_F(DistributedTrainingTest, AsyncTrainsAndReportsPerStepSplit) {
  auto workers = Train({"--trainer=tiny", "--num-ps=2", "--num-workers=2", "--batch=8",
                        "--steps=30", "--warmup-steps=1", "--async", "--mode=serialized"},
                       "async");
  ASSERT_EQ(workers.size(), 2u);
  for (const Json& w : workers) {
    EXPECT_FALSE(w["sync"].get<bool>());
    EXPECT_EQ(w["mode"], "serialized");
    EXPECT_GT(w["images_per_s"].get<double>(), 0);
    EXPECT_GT(w["compute"]["mean_s"].get<double>(), 0);
    EXPECT_GT(w["communication"]["mean_s"].get<double>(), 0);
    EXPECT_LT(w["loss_last"].get<double>(), w["loss_first"].get<double>());
  }
}

// A trace the trainer cannot write is refused before it trains (a million steps would take
// hours), by psbench train and psbench run alike. A named pipe is opened when the trace is
// written (opening it sooner would end its reader's input): no reader by then is waited for a
// bounded time, then refused.
TEST_F(DistributedTrainingTest, TraceItCannotWriteIsRefusedBeforeTraining) {
  const std::string dir = TempPath("no-such-dir");
  const std::string fifo = TempPath("trace.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const Argv train = {BinPath("psbench"), "train", "--model=tiny", "--batch=4", "--steps=1000000"};
  RunResult r = RunCommand(Concat(train, {"--write-trace=" + dir + "/t.json"}), seconds(30));
  ExpectOneLineFailure(r, 2, "psbench train", {"--write-trace=" + dir + "/t.json", "cannot write", "No such file"});
  r = RunCommand({BinPath("psbench"), "train", "--model=tiny", "--batch=4", "--steps=2", "--write-trace=" + fifo}, seconds(40));
  ExpectOneLineFailure(r, 2, "psbench train", {"--write-trace=" + fifo, "a named pipe no process reads"});
  r = RunCommand(RunArgv({"--trainer=tiny", "--steps=1000000", "--write-trace=" + dir + "/t.json"}), seconds(30));
  ExpectOneLineFailure(r, 2, "psbench", {"--write-trace=" + dir + "/t.json", "cannot write"});
  // The worker refuses it too (its own host's path, on a cluster).
  r = RunCommand(WorkerArgv("127.0.0.1:1", {"--trainer=tiny", "--steps=1000000", "--write-trace=" + dir + "/t.json"}),
                 seconds(30));
  ExpectOneLineFailure(r, 2, "psbench-worker", {"--write-trace=" + dir + "/t.json", "cannot write"});
  unlink(fifo.c_str());
}

// A trace that cannot be written once trained (a full disk) took the measured record with it.
TEST_F(DistributedTrainingTest, TraceWriteFailureKeepsTheRecord) {
  const std::string json = TempPath("records.jsonl");
  RunResult r = RunCommand({BinPath("psbench"), "train", "--model=tiny", "--batch=4", "--steps=2", "--warmup-steps=0",
                            "--write-trace=/dev/full", "--json=" + json},
                           seconds(60));
  ExpectOneLineFailure(r, 1, "psbench train", {"--write-trace=/dev/full", "No space left on device", "the record is saved"});
  EXPECT_EQ(ReadJsonLines(json).size(), 1u);
  std::remove(json.c_str());
  r = RunCommand(RunArgv({"--trainer=tiny", "--batch=4", "--steps=2", "--warmup-steps=0", "--num-workers=2",
                          "--write-trace=/dev/full", "--json=" + json}),
                 seconds(120));
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  std::vector<Json> records = ReadJsonLines(json);
  EXPECT_EQ(records.size(), 2u) << "each worker's, worker 0's too";
  std::remove(json.c_str());
}

// --engine=gpu ends alike under psbench train and psbench run, whatever this machine has: no
// GPU engine built (exit 2), no CUDA device (exit 1: run's worker said 2), or a GPU (exit 0).
TEST_F(DistributedTrainingTest, GpuEngineEndsAlikeUnderTrainAndRun) {
  RunResult train = RunCommand({BinPath("psbench"), "train", "--model=tiny", "--batch=2", "--steps=1",
                                "--warmup-steps=0", "--engine=gpu"},
                               seconds(120));
  RunResult run = RunCommand(RunArgv({"--trainer=tiny", "--batch=2", "--steps=1", "--warmup-steps=0", "--engine=gpu"}),
                             seconds(120));
  EXPECT_EQ(run.exit_code, train.exit_code) << train.Describe() << run.Describe();
  if (train.exit_code != 0) {
    EXPECT_NE(train.err.find("--engine=gpu"), std::string::npos) << train.Describe();
    EXPECT_NE(run.err.find("--engine=gpu"), std::string::npos) << run.Describe();
  }
}

// --write-trace records the gradients as psbench_trace does from PyTorch (psbench-trace/2),
// which the trace payload scheme replays.
TEST_F(DistributedTrainingTest, TraceReplaysAsPayloadTrace) {
  const std::string trace = TempPath("trace.json");
  Argv train = {BinPath("psbench"), "train", "--model=tiny", "--batch=4", "--steps=2",
                "--write-trace=" + trace};
  RunResult r = RunCommand(train, seconds(60));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("images/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("conv1"), std::string::npos) << r.out;  // the per-layer table
  Json j = Json::parse(ReadFile(trace));
  EXPECT_EQ(j["format"], "psbench-trace/2");
  ASSERT_EQ(j["tensors"].size(), 8u);  // 4 layers x (weights, bias)
  EXPECT_EQ(j["tensors"][0]["name"], "conv1/weights");
  EXPECT_EQ(j["tensors"][0]["bytes"], 16 * 3 * 3 * 3 * 4);
  EXPECT_EQ(j["tensors"][0]["dtype"], "float32");
  ASSERT_GE(j["steps"].size(), 2u) << "one per fwd+bwd iteration";
  for (const Json& step : j["steps"]) {
    const double compute = step["compute_us"].get<double>();
    EXPECT_GT(compute, 0);
    ASSERT_EQ(step["ready_us"].size(), 8u);
    std::vector<double> ready;
    for (const Json& r : step["ready_us"]) ready.push_back(r.get<double>());
    for (double r : ready) EXPECT_LE(r, compute + 0.01);
    // Backward runs from the classifier down: fc4's gradients are ready first, conv1's last.
    EXPECT_EQ(std::min_element(ready.begin(), ready.end()) - ready.begin(), 6);
    EXPECT_LT(ready[7], ready[0]);
  }
  auto ps = PsServer::Start();
  ASSERT_NE(ps, nullptr);
  RunResult replay = RunCommand(WorkerArgv(ps->address(), {"--benchmark=bandwidth", "--scheme=trace",
                                                           "--trace=" + trace, "--iterations=3",
                                                           "--warmup-iterations=1"}),
                                seconds(60));
  EXPECT_EQ(replay.exit_code, 0) << replay.Describe();
  // Timed, as a trace captured from PyTorch: each gradient (no buckets: each tensor alone)
  // sent when the trainer recorded it ready; every parameter exact.
  const std::string json = TempPath("timed.jsonl");
  RunResult timed = RunCommand(RunArgv({"--benchmark=updates", "--scheme=trace", "--trace=" + trace,
                                        "--replay=timed", "--steps=2", "--num-workers=2", "--num-ps=2",
                                        "--json=" + json}),
                               seconds(120));
  ASSERT_EQ(timed.exit_code, 0) << timed.Describe();
  std::vector<Json> records = ReadJsonLines(json);
  EXPECT_EQ(records.size(), 2u);
  for (const Json& rec : records) {
    EXPECT_EQ(rec["result"], "exact") << rec.dump();
    EXPECT_EQ(rec["replay"]["mode"], "timed");
    EXPECT_EQ(rec["replay"]["buckets"], 8) << "each tensor on its own";
    EXPECT_EQ(rec["replay"]["steps"].size(), 2u);
  }
  unlink(json.c_str());
  unlink(trace.c_str());
}

TEST_F(DistributedTrainingTest, BadTrainerFlagsAreRefused) {
  struct Case {
    Argv flags;
    std::string message;
  };
  const Case cases[] = {
      {{"--trainer=nope"}, "unknown model 'nope'"},
      {{"--trainer=tiny", "--batch=0"}, "--batch must be in [1, 4096]"},
      {{"--trainer=tiny", "--momentum=1.5"}, "--momentum must be in [0, 1)"},
      {{"--trainer=tiny", "--learning-rate=-1"}, "--learning-rate must be a positive number"},
      {{"--trainer=tiny", "--sync", "--async"}, "exclude each other"},
      {{"--trainer=tiny", "--benchmark=latency"}, "does not apply to --trainer"},
      {{"--trainer=tiny", "--steps=0"}, "--steps must be in"},
      {{"--trainer=tiny", "--math=tf32"}, "--math=tf32 needs --engine=gpu"},
      {{"--trainer=tiny", "--math=fp16"}, "--math: 'fp16' is not one of fp32, tf32, bf16"},
      {{"--trainer=tiny", "--layout=nhwc"}, "--layout=nhwc needs --engine=gpu"},
      {{"--trainer=tiny", "--engine=gpu", "--layout=chwn"}, "--layout: 'chwn' is not one of auto, nchw, nhwc"},
  };
  for (const Case& c : cases) {
    RunResult r = RunCommand(RunArgv(c.flags), seconds(60));
    EXPECT_EQ(r.exit_code, 2) << r.Describe();
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.Describe();
  }
  for (const Argv& flags : {Argv{"--batch=-3"}, Argv{"--layout=nchw"}, Argv{"--engine=gpu", "--layout=x"}}) {
    RunResult r = RunCommand(Concat({BinPath("psbench"), "train", "--model=tiny"}, flags), seconds(30));
    EXPECT_EQ(r.exit_code, 2) << r.Describe();
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.Describe();
  }
}

}  // namespace
}  // namespace psbench::testing
