// Bad input: every binary and every psbench command refuses it before doing anything, with
// exit status 2 and exactly one line on stderr that names the problem, within a bound, and
// leaves nothing behind: no process (the test reaps every orphan) and nothing in $TMPDIR.
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <sys/stat.h>

#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"

namespace psbench::testing {
namespace {

enum class Tool { kWorker, kRun, kPs, kTrain, kSsh, kMpirun, kSlurm, kReport };

struct BadInput {
  std::string name;                   // test name suffix
  Tool tool;
  Argv args;                          // "$DIR" stands for the test's temporary directory
  std::vector<std::string> keywords;  // the stderr line must contain every one ("$DIR" too)
  std::string program = "";           // the line's prefix, when not the tool's own
};

const char* ToolName(Tool tool) {
  switch (tool) {
    case Tool::kWorker: return "psbench-worker";
    case Tool::kRun: return "psbench run";
    case Tool::kTrain: return "psbench train";
    case Tool::kSsh: return "psbench ssh";
    case Tool::kMpirun: return "psbench mpirun";
    case Tool::kSlurm: return "psbench slurm";
    case Tool::kReport: return "psbench report";
    case Tool::kPs: break;
  }
  return "psbench-ps";
}

// How gtest shows a case (also in ctest's test names): the tool and its flags.
void PrintTo(const BadInput& c, std::ostream* os) {
  *os << ToolName(c.tool);
  for (std::string a : c.args) {
    for (size_t at; (at = a.find("$DIR/")) != std::string::npos;) a.erase(at, 5);
    *os << " " << a;
  }
}

std::string Expand(std::string text, const std::string& dir) {
  for (size_t at; (at = text.find("$DIR")) != std::string::npos;) text.replace(at, 4, dir);
  return text;
}

// Exit 2, one line on stderr starting with "<program>: " and holding every keyword, nothing
// on stdout.
void ExpectUsageError(const RunResult& r, const std::string& program,
                      const std::vector<std::string>& keywords) {
  ExpectOneLineFailure(r, 2, program, keywords);
  std::vector<std::string> lines = r.ErrLines();
  if (lines.size() != 1) return;  // reported above
  EXPECT_GT(lines[0].size(), program.size() + 2) << r.Describe();
  EXPECT_EQ(r.out, "") << "nothing on stdout\n" << r.Describe();
}

class BadInputTest : public IntegrationTest, public ::testing::WithParamInterface<BadInput> {
 protected:
  void SetUp() override {
    IntegrationTest::SetUp();
    tmp_.Write("invalid.json", "{\"groups\": [1, 2,");
    tmp_.Write("object.json", R"({"model": "none", "layers": 3})");
    tmp_.Write("groups-not-list.json", R"({"groups": 5})");
    tmp_.Write("mixed.json", "[[10, 20], 30]");
    tmp_.Write("string.json", "\"10K\"");
    tmp_.Write("empty.json", "[]");
    tmp_.Write("negative.json", "[10, 1024, -5]");
    tmp_.Write("negative-tensor.json", R"([{"name": "w", "bytes": -1}])");
    tmp_.Write("huge.json", "[2147483648]");
    tmp_.Write("valid.json", "[10, 1024]");
    tmp_.Write("trace.tmp", "[10, 1024]");
    tmp_.Write("one-tensor.json", "[4096]");
    tmp_.Write("two-mib.json", "[[1048576], [1048576]]");
    {
      std::string bytes = "[[1]";  // 300 one-byte groups: 300 bytes, and a page each
      for (int i = 1; i < 300; ++i) bytes += ",[1]";
      tmp_.Write("one-byte-groups.json", bytes + "]");
    }
    tmp_.Write("hosts", "127.0.0.1 slots=4\n");
    tmp_.Write("one-host", "127.0.0.1\n");
    tmp_.Write("empty-hosts", "# nothing here\n");
    tmp_.Write("bad-slots", "node1 slots=x\n");
    tmp_.Write("zero-slots", "node1 slots=0\n");
    tmp_.Write("huge-slots", "node1 slots=5000\n");
    tmp_.Write("many-slots", "127.0.0.1 slots=400\n");
    tmp_.Write("two-words", "node1 node2\n");
    tmp_.Write("records.jsonl", "{\"kind\": \"latency\"}\n");
    tmp_.Write("not-json.jsonl", "hello\n");
    tmp_.Write("empty.jsonl", "");
    tmp_.Write("not-executable", "#!/bin/sh\n");
    // --hdr-out's files: a trace under one of their names, another name (a link) of a trace,
    // a report input where a page's plots go.
    tmp_.Write("w.3.corrected.hgrm", "[10, 1024]");
    ASSERT_EQ(::symlink("valid.json", (tmp_.path() + "/link.lag.hgrm").c_str()), 0);
    ASSERT_EQ(::mkdir((tmp_.path() + "/plots_files").c_str(), 0700), 0);
    tmp_.Write("plots_files/plots.json", "{\"kind\": \"latency\"}\n");
    // A FIFO with no writer: reading it would wait forever.
    ASSERT_EQ(::mkfifo((tmp_.path() + "/fifo.json").c_str(), 0600), 0);
    // Whatever the command writes to $TMPDIR lands here, and must be gone when it exits.
    ASSERT_EQ(::mkdir(scratch_.c_str(), 0700), 0);
    if (const char* old = getenv("TMPDIR")) saved_tmpdir_ = old;
    setenv("TMPDIR", scratch_.c_str(), 1);
  }
  void TearDown() override {
    if (saved_tmpdir_) {
      setenv("TMPDIR", saved_tmpdir_->c_str(), 1);
    } else {
      unsetenv("TMPDIR");
    }
    IntegrationTest::TearDown();
  }

  TempDir tmp_;
  const std::string scratch_ = tmp_.path() + "/tmpdir";
  std::optional<std::string> saved_tmpdir_;
  // Where a worker would connect if it wrongly accepted the input: refused, so such a bug
  // shows up as the wrong message, not as a hang.
  ClosedPort nobody_;
};

TEST_P(BadInputTest, ExitsTwoWithOneLineNamingTheProblem) {
  const BadInput& c = GetParam();
  Argv args;
  std::string program;
  switch (c.tool) {
    case Tool::kWorker:
      program = "psbench-worker";
      args = WorkerArgv(nobody_.address(), {"--connect-timeout=2s", "--benchmark=latency",
                                            "--warmup=0s", "--iterations=3"});
      break;
    case Tool::kRun:
      program = "psbench";
      args = RunArgv({"--benchmark=latency", "--warmup=0s", "--iterations=3"});
      break;
    case Tool::kPs:
      program = "psbench-ps";
      args = PsArgv({"--listen=127.0.0.1", "--port=0"});
      break;
    case Tool::kTrain:
      program = "psbench";  // the flag parser names the binary
      args = {BinPath("psbench"), "train", "--model=tiny", "--batch=2", "--steps=1"};
      break;
    // A cluster command that wrongly accepted its input would start /bin/false, not hang.
    case Tool::kSsh:
    case Tool::kMpirun:
      program = "psbench";
      args = {BinPath("psbench"), c.tool == Tool::kSsh ? "ssh" : "mpirun", "--hostfile=$DIR/hosts",
              c.tool == Tool::kSsh ? "--ssh=/bin/false" : "--mpirun=/bin/false",
              "--benchmark=latency", "--warmup=0s", "--iterations=3", "--connect-timeout=2s"};
      break;
    case Tool::kSlurm:
      program = "psbench";
      args = {BinPath("psbench"), "slurm", "--srun=/bin/false", "--benchmark=latency",
              "--warmup=0s", "--iterations=3"};
      break;
    case Tool::kReport:
      program = "psbench report";
      args = {BinPath("psbench"), "report"};
      break;
  }
  if (!c.program.empty()) program = c.program;
  for (const auto& a : c.args) args.push_back(a);
  for (auto& a : args) a = Expand(a, tmp_.path());
  std::vector<std::string> keywords;
  for (const auto& k : c.keywords) keywords.push_back(Expand(k, tmp_.path()));
  ExpectUsageError(RunCommand(args, seconds(30)), program, keywords);
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(scratch_)) left.push_back(e.path());
  EXPECT_TRUE(left.empty()) << "left in $TMPDIR: " << ::testing::PrintToString(left);
}

// Cases that mean the same for psbench-worker and psbench run (the scenario flags).
const std::vector<BadInput> kScenarioCases = {
    {"UnknownScheme", {}, {"--scheme=zipf"}, {"--scheme=zipf", "unknown scheme"}},
    // JSON holds UTF-8 only: the records and each worker's scenario would name another file.
    {"TracePathNotUtf8", {}, {"--scheme=trace", "--trace=$DIR/t\xff.json"}, {"--trace=", "is not UTF-8 text"}},
    {"UnknownFlag", {}, {"--no-such-flag=1"}, {"unknown flag", "--no-such-flag"}},
    {"FlagWithoutValue", {}, {"--iterations"}, {"--iterations", "needs a value"}},
    {"UnknownBenchmark", {}, {"--benchmark=echo"}, {"--benchmark=echo"}},
    {"UnknownMode", {}, {"--mode=fast"}, {"--mode=fast"}},
    {"UnknownTransport", {}, {"--transport=rdma"}, {"--transport=rdma"}},
    {"MediumOutsideMedium", {}, {"--medium=2M"}, {"--medium", "Medium"}},
    {"SmallZero", {}, {"--small=0"}, {"--small", "Small"}},
    {"LargeAboveTenMiB", {}, {"--large=11M"}, {"--large", "Large"}},
    {"SizeTypo", {}, {"--small=10X"}, {"--small=10X", "suffix"}},
    {"NegativeSize", {}, {"--medium=-4K"}, {"--medium"}},
    {"RandomWithOneCategory", {}, {"--scheme=random", "--categories=L"},
     {"--scheme=random", "categories"}},
    // Recorded as config.small=5 while it changed nothing.
    {"SizeOfACategoryLeftOut", {}, {"--categories=M,L", "--small=5"},
     {"--small sizes category S, which --categories=M,L leaves out"}},
    {"SkewWithOneCategory", {}, {"--scheme=skew", "--categories=M"},
     {"--scheme=skew", "categories"}},
    {"SkewBiasNotChosen", {}, {"--scheme=skew", "--skew-bias=small", "--categories=M,L"},
     {"--skew-bias=small", "--categories=M,L"}},
    {"UnknownSkewBias", {}, {"--skew-bias=huge"}, {"--skew-bias=huge"}},
    {"UnknownCategory", {}, {"--categories=S,X"}, {"--categories=S,X"}},
    {"RepeatedCategory", {}, {"--categories=S,S"}, {"--categories=S,S", "twice"}},
    {"EmptyCategories", {}, {"--categories="}, {"--categories"}},
    {"ZeroBuffers", {}, {"--buffers=0"}, {"--buffers"}},
    {"TooManyBuffers", {}, {"--buffers=100001"}, {"--buffers"}},
    {"SweepMaxBelowMin", {}, {"--sizes=4K:1K"}, {"--sizes=4K:1K", "MAX"}},
    {"SweepNotMinMax", {}, {"--sizes=abc"}, {"--sizes=abc"}},
    {"SweepWithScheme", {}, {"--sizes=1:4K", "--scheme=skew"}, {"--sizes", "--scheme"}},
    {"MissingTraceFile", {}, {"--scheme=trace", "--trace=$DIR/missing.json"},
     {"$DIR/missing.json", "cannot open"}},
    {"TraceIsNotJson", {}, {"--scheme=trace", "--trace=$DIR/invalid.json"},
     {"$DIR/invalid.json", "not valid JSON"}},
    {"TraceObjectOfWrongShape", {}, {"--scheme=trace", "--trace=$DIR/object.json"},
     {"$DIR/object.json", "'groups'", "'params'"}},
    {"TraceGroupsNotAList", {}, {"--scheme=trace", "--trace=$DIR/groups-not-list.json"},
     {"$DIR/groups-not-list.json", "'groups' must be a list"}},
    {"TraceMixesGroupsAndSizes", {}, {"--scheme=trace", "--trace=$DIR/mixed.json"},
     {"$DIR/mixed.json", "entry 1"}},
    {"TraceIsAString", {}, {"--scheme=trace", "--trace=$DIR/string.json"}, {"$DIR/string.json"}},
    {"TraceIsEmpty", {}, {"--scheme=trace", "--trace=$DIR/empty.json"},
     {"$DIR/empty.json", "no tensors"}},
    {"TraceNegativeSize", {}, {"--scheme=trace", "--trace=$DIR/negative.json"},
     {"$DIR/negative.json", "entry 2", "-5"}},
    {"TraceNegativeTensorBytes", {}, {"--scheme=trace", "--trace=$DIR/negative-tensor.json"},
     {"$DIR/negative-tensor.json", "entry 0", "'bytes'"}},
    {"TraceTensorAboveOneGiB", {}, {"--scheme=trace", "--trace=$DIR/huge.json"},
     {"$DIR/huge.json", "2147483648"}},
    {"TraceSchemeWithoutFile", {}, {"--scheme=trace"}, {"--scheme=trace", "--trace"}},
    // Only a regular file of bounded size is read, and an output never lands on an input.
    {"TraceIsADirectory", {}, {"--scheme=trace", "--trace=$DIR"}, {"$DIR", "is a directory"}},
    {"TraceIsADevice", {}, {"--scheme=trace", "--trace=/dev/zero"},
     {"/dev/zero", "is a character device, not a regular file"}},
    {"TraceIsAFifo", {}, {"--scheme=trace", "--trace=$DIR/fifo.json"},
     {"$DIR/fifo.json", "is a FIFO"}},
    {"TraceOverInputLimit", {}, {"--scheme=trace", "--trace=$DIR/valid.json", "--max-input-size=4"},
     {"$DIR/valid.json", "is 10 bytes, over the 4 bytes limit", "--max-input-size"}},
    {"MaxInputSizeNotASize", {}, {"--max-input-size=lots"}, {"--max-input-size", "lots"}},
    {"TracePayloadsOverMemory", {},
     {"--scheme=trace", "--trace=$DIR/two-mib.json", "--max-payload-memory=1M"},
     {"2MiB", "--max-payload-memory=1MiB"}},
    // It counts what the payloads take, not the bytes they name: 300 bytes took 1.2 MB.
    {"TinyPayloadsOverMemory", {},
     {"--scheme=trace", "--trace=$DIR/one-byte-groups.json", "--max-payload-memory=1M"},
     {"take 1200KiB of memory at once (300 payloads)", "--max-payload-memory=1MiB"}},
    {"ZeroPayloadMemory", {}, {"--max-payload-memory=0"}, {"--max-payload-memory=0", "give a byte count"}},
    {"JsonOverTheTrace", {}, {"--scheme=trace", "--trace=$DIR/valid.json", "--json=$DIR/valid.json"},
     {"--json=$DIR/valid.json would write over --trace=$DIR/valid.json"}},
    {"HdrOutOverTheTrace", {}, {"--load=constant:100", "--scheme=trace", "--trace=$DIR/w.3.corrected.hgrm", "--hdr-out=$DIR/w"},
     {"--hdr-out=$DIR/w would write $DIR/w.3.corrected.hgrm over --trace=$DIR/w.3.corrected.hgrm"}},
    {"TraceWithoutTraceScheme", {}, {"--trace=$DIR/negative.json"}, {"--trace", "--scheme=trace"}},
    {"ZeroIterations", {}, {"--iterations=0"}, {"--iterations"}},
    {"NegativeWarmupIterations", {}, {"--warmup-iterations=-1"}, {"--warmup-iterations"}},
    {"NegativeWarmup", {}, {"--warmup=-1s"}, {"--warmup"}},
    {"DurationAndIterations", {}, {"--duration=1s"}, {"--duration", "--iterations"}},
    {"ZeroWindow", {}, {"--window=0"}, {"--window"}},
    {"ZeroOutstanding", {}, {"--outstanding=0"}, {"--outstanding"}},
    {"ZeroRpcTimeout", {}, {"--rpc-timeout=0s"}, {"--rpc-timeout"}},
    // "inf" parses as a duration: a run that would never end, or a record of no number.
    {"InfiniteWarmup", {}, {"--warmup=inf"}, {"--warmup is infinite: give a finite time"}},
    {"InfiniteRpcTimeout", {}, {"--rpc-timeout=inf"}, {"--rpc-timeout is infinite: give a finite time"}},
    {"UnwritableJson", {}, {"--json=$DIR/no/such/dir/out.jsonl"}, {"--json", "$DIR/no/such/dir"}},
    {"RdmaMtuNotIb", {}, {"--transport=grpc+verbs", "--rdma-mtu=1500"}, {"--rdma-mtu=1500", "4096"}},
    {"RdmaZeroQueueDepth", {}, {"--rdma-queue-depth=0"}, {"--rdma-queue-depth=0"}},
    {"RdmaTinySlot", {}, {"--rdma-slot-size=1K"}, {"--rdma-slot-size", "4KiB"}},
    {"RdmaUnknownPoll", {}, {"--rdma-poll=spin"}, {"--rdma-poll=spin", "busy", "event"}},
    {"RdmaPortOutOfRange", {}, {"--rdma-port=300"}, {"--rdma-port=300"}},
    // Flags that would change nothing about the run are refused, saying where they apply.
    {"ModeOnVerbs", {}, {"--transport=grpc+verbs", "--mode=serialized"}, {"--mode", "applies to grpc only"}},
    {"ModeOnMpi", {}, {"--transport=grpc+mpi", "--mode=non-serialized"}, {"--mode", "applies to grpc only"}},
    {"TxZerocopyOnVerbs", {}, {"--transport=grpc+verbs", "--grpc-tx-zerocopy=16K"},
     {"--grpc-tx-zerocopy", "applies to grpc only"}},
    {"TxZerocopyOverOneGiB", {}, {"--grpc-tx-zerocopy=2G"}, {"--grpc-tx-zerocopy=2GiB", "at most 1GiB"}},
    {"TxZerocopyNotASize", {}, {"--grpc-tx-zerocopy=lots"}, {"--grpc-tx-zerocopy=lots"}},
    {"GrpcApiOnMpi", {}, {"--transport=grpc+mpi", "--grpc-api=callback"}, {"--grpc-api", "applies to grpc only"}},
    {"GrpcApiUnknown", {}, {"--grpc-api=sync"}, {"--grpc-api=sync", "cq or callback"}},
    {"RdmaFlagOnGrpc", {}, {"--rdma-device=rxe0"}, {"--rdma-device", "applies to grpc+verbs only"}},
    {"WindowWithLatency", {}, {"--window=4"}, {"--window", "--benchmark=bandwidth"}},
    {"OutstandingWithLatency", {}, {"--outstanding=4"}, {"--outstanding", "--benchmark=throughput"}},
    {"BatchWithoutTrainer", {}, {"--batch=4"}, {"--batch", "applies to --trainer only"}},
    {"LayoutWithoutTrainer", {}, {"--layout=nhwc"}, {"--layout", "applies to --trainer only"}},
    {"StepsWithLatency", {}, {"--steps=4"}, {"--steps", "--benchmark=updates"}},
    {"WindowWithUpdates", {}, {"--benchmark=updates", "--window=4"}, {"--window", "--benchmark=bandwidth"}},
    {"SkewBiasWithUniform", {}, {"--skew-bias=small"}, {"--skew-bias", "--scheme=skew"}},
    {"BuffersWithTrace", {}, {"--scheme=trace", "--trace=$DIR/negative.json", "--buffers=3"},
     {"--buffers", "--scheme=trace"}},
};

std::vector<BadInput> ForTool(Tool tool, const std::vector<BadInput>& cases) {
  std::vector<BadInput> out = cases;
  for (auto& c : out) c.tool = tool;
  return out;
}

const std::vector<BadInput> kWorkerCases = {
    {"CpuOutOfRange", Tool::kWorker, {"--cpu=99"}, {"--cpu=99"}},
    {"CpuRangeOfThree", Tool::kWorker, {"--cpu=0-1-9"}, {"--cpu=0-1-9", "is not a CPU list"}},
    {"PsMissing", Tool::kWorker, {"--ps="}, {"--ps"}},
    {"PsWithoutPort", Tool::kWorker, {"--ps=localhost"}, {"--ps", "'localhost' is not HOST:PORT"}},
    {"PsPortZero", Tool::kWorker, {"--ps=127.0.0.1:0"}, {"--ps", "port '0' is not in 1-65535"}},
    {"PsPortTooLarge", Tool::kWorker, {"--ps=127.0.0.1:65536"}, {"port '65536' is not in 1-65535"}},
    {"PsPortNotANumber", Tool::kWorker, {"--ps=127.0.0.1:http"}, {"port 'http' is not in 1-65535"}},
    {"PsBareIpv6", Tool::kWorker, {"--ps=::1:5000"}, {"'::1:5000'", "brackets: [::1]:5000"}},
    {"PsUnclosedBracket", Tool::kWorker, {"--ps=[::1:5000"}, {"'[::1:5000'", "no ']'"}},
    {"PsNameDoesNotResolve", Tool::kWorker, {"--benchmark=throughput", "--ps=no-such-ps.invalid:5000"},
     {"--ps: 'no-such-ps.invalid:5000': cannot resolve no-such-ps.invalid"}},
    {"PsListedTwice", Tool::kWorker, {"--benchmark=throughput", "--ps=127.0.0.1:5000,127.0.0.1:5000"},
     {"--ps lists 127.0.0.1:5000 twice"}},
    {"PsTwoSpellingsOfOne", Tool::kWorker,
     {"--benchmark=throughput", "--ps=127.0.0.1:5000,127.1:5000"},
     {"127.0.0.1:5000 and 127.1:5000 are the same PS"}},
    {"LatencyWithTwoPs", Tool::kWorker, {"--ps=127.0.0.1:1,127.0.0.1:2"},
     {"--benchmark=latency", "one PS"}},
    {"BandwidthWithTwoPs", Tool::kWorker,
     {"--benchmark=bandwidth", "--ps=127.0.0.1:1,127.0.0.1:2"},
     {"--benchmark=bandwidth", "one PS"}},
    {"WorkerIndexOutOfRange", Tool::kWorker, {"--num-workers=2", "--worker-index=2"},
     {"--worker-index"}},
    // Several workers on a point-to-point benchmark waited at a barrier, then failed (exit 1).
    {"PointToPointWithWorkers", Tool::kWorker, {"--num-workers=2"},
     {"--benchmark=latency is point to point, but --num-workers=2; launch one"}},
    {"NumWorkersHuge", Tool::kWorker, {"--benchmark=throughput", "--num-workers=1000000"},
     {"--num-workers must be in [1, 65536]"}},
    {"RunIdEmpty", Tool::kWorker, {"--run-id="}, {"--run-id must be 1 to 256 bytes (got 0)"}},
    {"RunIdTooLong", Tool::kWorker, {"--run-id=" + std::string(300, 'r')}, {"--run-id must be 1 to 256 bytes (got 300)"}},
    {"UnreadableScenario", Tool::kWorker, {"--scenario=$DIR/missing.json"}, {"--scenario"}},
    // Written as the run goes, where a failed write went unsaid.
    {"ProgressFileInNoDirectory", Tool::kWorker, {"--progress-file=$DIR/no/such/p"}, {"--progress-file=", "cannot write"}},
    {"ProgressFileIsADirectory", Tool::kWorker, {"--progress-file=$DIR"}, {"--progress-file=", "is a directory"}},
    // Renamed over, these became regular files (as root, /dev/null too).
    {"ProgressFileIsAFifo", Tool::kWorker, {"--progress-file=$DIR/fifo.json"}, {"--progress-file=", "is not a regular file"}},
    {"ProgressFileIsADevice", Tool::kWorker, {"--progress-file=/dev/null"}, {"--progress-file=/dev/null", "is not a regular file"}},
    // FILE.tmp is written and renamed over FILE: it must not be an input, nor --json.
    {"ProgressTmpIsTheTrace", Tool::kWorker, {"--scheme=trace", "--trace=$DIR/trace.tmp", "--progress-file=$DIR/trace"},
     {"--progress-file=$DIR/trace.tmp would write over --trace=$DIR/trace.tmp"}},
    {"ProgressTmpIsTheJson", Tool::kWorker, {"--json=$DIR/p.tmp", "--progress-file=$DIR/p"},
     {"--progress-file=$DIR/p.tmp would write over --json=$DIR/p.tmp"}},
    {"PositionalArgument", Tool::kWorker, {"extra"}, {"unexpected argument 'extra'"}},
};

const std::vector<BadInput> kRunCases = {
    // Its workers were refused after 20 s, exit 1.
    {"MaxConnectionsBelowWorkers", Tool::kRun, {"--benchmark=throughput", "--num-workers=2", "--max-connections=1"},
     {"--max-connections=1 is below the run's 2 workers"}},
    {"WorkerCpuOutOfRange", Tool::kRun, {"--worker-cpu=99"}, {"--worker-cpu=99"}},
    {"PsCpuOutOfRange", Tool::kRun, {"--ps-cpu=99"}, {"--ps-cpu=99"}},
    {"PsCpuRangeOfThree", Tool::kRun, {"--ps-cpu=1-1-0"}, {"--ps-cpu=1-1-0", "is not a CPU list"}},
    {"CpuIsNotARunFlag", Tool::kRun, {"--cpu=0"}, {"unknown flag", "--cpu"}},
    {"LatencyWithTwoPs", Tool::kRun, {"--num-ps=2"}, {"--benchmark=latency", "--num-ps"}},
    {"LatencyWithTwoWorkers", Tool::kRun, {"--num-workers=2"}, {"--num-workers"}},
    {"ZeroPs", Tool::kRun, {"--benchmark=throughput", "--num-ps=0"}, {"--num-ps"}},
    {"TraceOfFewerTensorsThanPs", Tool::kRun,
     {"--benchmark=throughput", "--num-ps=2", "--scheme=trace", "--trace=$DIR/one-tensor.json"},
     {"the trace has 1 tensor for 2 PS", "each PS needs at least one"}},
    {"ExtraArgument", Tool::kRun, {"extra"}, {"unexpected argument 'extra'"}},
    {"LabelWithANewline", Tool::kRun, {"--label=ipoib\nrdma"}, {"--label", "control characters"}},
    {"LabelNotUtf8", Tool::kRun, {"--label=ipoib\xff"}, {"--label", "UTF-8 text"}},
    // psbench report --compare=A,B could never select it.
    {"LabelWithAComma", Tool::kRun, {"--label=ib,rdma"}, {"--label=ib,rdma: no commas"}},
    {"PsThreadsOnCallbackApi", Tool::kRun, {"--grpc-api=callback", "--ps-threads=2"},
     {"--ps-threads", "--grpc-api=cq only"}},
    {"PsThreadsOnVerbs", Tool::kRun, {"--transport=grpc+verbs", "--ps-threads=2"},
     {"--ps-threads", "applies to grpc only"}},
    {"MpirunWithoutMpi", Tool::kRun, {"--mpirun=mpirun"}, {"--mpirun", "applies to grpc+mpi only"}},
    {"ModeInListOnVerbs", Tool::kRun, {"--transports=grpc,grpc+verbs/serialized"},
     {"'grpc+verbs/serialized'", "no wire modes"}},
    {"ModeWithoutModeTransports", Tool::kRun, {"--transports=grpc+verbs,grpc+mpi", "--mode=serialized"},
     {"--mode", "applies to grpc only"}},
    {"TrainerWithBenchmark", Tool::kRun, {"--trainer=tiny"}, {"--benchmark", "does not apply to --trainer"}},
    {"ZeroRepetitions", Tool::kRun, {"--repetitions=0"}, {"--repetitions must be in [1, 1000]"}},
    {"RepetitionsNotANumber", Tool::kRun, {"--repetitions=many"}, {"--repetitions", "many"}},
    {"RepetitionsOfUpdates", Tool::kRun, {"--benchmark=updates", "--repetitions=2"},
     {"--repetitions", "payload benchmarks only", "--benchmark=updates"}},
    // Found before anything starts: the payload alone is over the limit the PS will have.
    {"PayloadOverMaxMessageSize", Tool::kRun, {"--sizes=8M:8M", "--max-message-size=4M"},
     {"8MiB payload", "the PS's --max-message-size=4MiB"}},
    // The framing makes the message a few bytes larger: found before anything starts too,
    // not when a sweep reaches that size (which threw away the sizes measured before it).
    {"MessageOverMaxMessageSize", Tool::kRun, {"--sizes=1M:4M", "--max-message-size=4M"},
     {"a 4MiB payload makes a 4194328-byte message", "the PS's --max-message-size=4MiB"}},
    {"SerializedMessageOverMaxMessageSize", Tool::kRun,
     {"--sizes=4194300:4194300", "--max-message-size=4M", "--mode=serialized"},
     {"4194305-byte message", "the PS's --max-message-size=4MiB"}},
    // A serialized message of many one-byte buffers: a PS would refuse to parse it.
    {"SerializedPayloadOfTinyBuffers", Tool::kRun,
     {"--buffers=20000", "--categories=S", "--small=1", "--mode=serialized"},
     {"worker 0 (pid ", "20000 buffers in a 60000-byte serialized message would take a PS about 1.5 MiB", "--mode=non-serialized"}},
    {"HdrOutOverTheJson", Tool::kRun, {"--load=constant:100", "--hdr-out=$DIR/h", "--json=$DIR/h.lag.hgrm"},
     {"--hdr-out=$DIR/h would write $DIR/h.lag.hgrm over --json=$DIR/h.lag.hgrm"}},
    {"HdrOutOverTheTraceByALink", Tool::kRun,
     {"--load=constant:100", "--scheme=trace", "--trace=$DIR/valid.json", "--hdr-out=$DIR/link"},
     {"--hdr-out=$DIR/link would write $DIR/link.lag.hgrm over --trace=$DIR/valid.json"}},
    {"HdrOutIsStdout", Tool::kRun, {"--load=constant:100", "--hdr-out=-"}, {"--hdr-out=-: give the start of a file name"}},
    {"HdrOutIsADirectory", Tool::kRun, {"--load=constant:100", "--hdr-out=$DIR/"}, {"--hdr-out=$DIR/", "not a directory"}},
};

// psbench train takes the flags that change what is timed, and no other.
const std::vector<BadInput> kTrainCases = {
    {"LaunchFlag", Tool::kTrain, {"--num-ps=2"}, {"unknown flag", "--num-ps"}},
    {"PeakGflopsNotFinite", Tool::kTrain, {"--peak-gflops=inf"}, {"--peak-gflops=inf must be 0 (estimate) or in"},
     "psbench train"},
    {"PeakGflopsNotANumber", Tool::kTrain, {"--peak-gflops=nan"}, {"--peak-gflops=nan must be 0 (estimate) or in"},
     "psbench train"},
    // Its fraction was infinite: "inf %" printed, and a record no report would read.
    {"PeakGflopsNearZero", Tool::kTrain, {"--peak-gflops=1e-310"}, {"--peak-gflops=1e-310 must be 0 (estimate) or in [0.001, 1e9]"},
     "psbench train"},
    {"ScenarioFlag", Tool::kTrain, {"--transport=grpc"}, {"unknown flag", "--transport"}},
    {"PsTrainingFlag", Tool::kTrain, {"--sync"}, {"unknown flag", "--sync"}},
    {"RdmaFlag", Tool::kTrain, {"--rdma-device=rxe0"}, {"unknown flag", "--rdma-device"}},
    {"TlsFlag", Tool::kTrain, {"--tls-cert=x"}, {"unknown flag", "--tls-cert"}},
    {"TrainerOfRun", Tool::kTrain, {"--trainer=tiny"}, {"unknown flag", "--trainer"}},
    {"WriteTraceToDash", Tool::kTrain, {"--write-trace=-"}, {"--write-trace=-: give a file name"}, "psbench train"},
};

// psbench ssh and psbench mpirun: the host file and the slots it gives, checked before any
// process starts anywhere.
const std::vector<BadInput> kClusterCases = {
    {"NoHostfile", {}, {"--hostfile="}, {"needs --hostfile=FILE (or $PBS_NODEFILE)"}},
    {"HostfileMissing", {}, {"--hostfile=$DIR/missing"}, {"--hostfile=$DIR/missing", "cannot open"}},
    {"HostfileIsAFifo", {}, {"--hostfile=$DIR/fifo.json"}, {"$DIR/fifo.json", "is a FIFO"}},
    {"HostfileIsADirectory", {}, {"--hostfile=$DIR"}, {"--hostfile=$DIR", "is a directory"}},
    {"HostfileIsADevice", {}, {"--hostfile=/dev/zero"}, {"/dev/zero", "character device"}},
    {"HostfileOverInputLimit", {}, {"--max-input-size=4"}, {"$DIR/hosts", "over the 4 bytes limit"}},
    {"HostfileListsNoHost", {}, {"--hostfile=$DIR/empty-hosts"}, {"$DIR/empty-hosts", "lists no host"}},
    {"HostfileBadSlots", {}, {"--hostfile=$DIR/bad-slots"}, {"line 1", "'slots=x'", "[1, 4096]"}},
    {"HostfileZeroSlots", {}, {"--hostfile=$DIR/zero-slots"}, {"line 1", "'slots=0'"}},
    {"HostfileTooManySlots", {}, {"--hostfile=$DIR/huge-slots"}, {"line 1", "'slots=5000'"}},
    // The workers a run takes, whether given or one per slot after the PS.
    {"SlotsGiveTooManyWorkers", {}, {"--hostfile=$DIR/many-slots", "--benchmark=throughput"},
     {"gives 400 slots: 399 workers after the PS, over the 256 a run takes"}},
    {"HostfileTwoHostsOnALine", {}, {"--hostfile=$DIR/two-words"}, {"line 1", "'node2'"}},
    {"OneSlotIsTooFew", {}, {"--hostfile=$DIR/one-host"}, {"1 PS + 1 workers need 2 slots", "gives 1"}},
    {"PsTakeEverySlot", {}, {"--num-ps=4"}, {"4 PS + 1 workers need 5 slots", "gives 4"}},
    {"MoreWorkersThanSlots", {}, {"--benchmark=throughput", "--num-workers=9"}, {"need 10 slots", "gives 4"}},
    {"ZeroPs", {}, {"--num-ps=0"}, {"--num-ps must be in [1, 64]"}},
    {"JsonOverTheHostfile", {}, {"--json=$DIR/hosts"}, {"--json=$DIR/hosts would write over --hostfile=$DIR/hosts"}},
    {"JsonIsADirectory", {}, {"--json=$DIR"}, {"--json=$DIR", "Is a directory"}},
    {"EmptyPsInterface", {}, {"--ps-interface="}, {"--ps-interface is empty"}},
    {"EmptyRemoteBinDir", {}, {"--remote-bin-dir="}, {"--remote-bin-dir=''", "absolute path"}},
    {"RelativeRemoteBinDir", {}, {"--remote-bin-dir=build/bin"}, {"--remote-bin-dir='build/bin'", "absolute path"}},
    {"SrunFlag", {}, {"--srun=srun"}, {"--srun", "psbench slurm flags"}},
    {"DuplicateTransports", {}, {"--transports=grpc,grpc"}, {"--transports=grpc,grpc", "listed twice"}},
    {"ClusterUnknownScheme", {}, {"--scheme=zipf"}, {"--scheme=zipf", "unknown scheme"}},
    {"ClusterUnknownFlag", {}, {"--no-such-flag=1"}, {"unknown flag", "--no-such-flag"}},
    {"ClusterTraceIsAFifo", {}, {"--scheme=trace", "--trace=$DIR/fifo.json"}, {"$DIR/fifo.json", "is a FIFO"}},
    {"ClusterPayloadOverMaxMessageSize", {}, {"--sizes=8M:8M", "--max-message-size=4M"},
     {"8MiB payload", "--max-message-size=4MiB"}},
};

const std::vector<BadInput> kSshCases = {
    {"SshEmpty", Tool::kSsh, {"--ssh="}, {"--ssh is empty"}},
    {"SshNotExecutable", Tool::kSsh, {"--ssh=$DIR/not-executable -p 22"},
     {"$DIR/not-executable is not an executable file"}},
    {"SshNotOnPath", Tool::kSsh, {"--ssh=no-such-ssh -p 22"}, {"no-such-ssh is not on $PATH"}},
    {"MpirunFlag", Tool::kSsh, {"--mpirun=mpirun"}, {"--mpirun", "psbench ssh does not start mpirun"}},
};

const std::vector<BadInput> kMpirunCases = {
    {"MpirunEmpty", Tool::kMpirun, {"--mpirun="}, {"--mpirun is empty", "openmpi-bin", "--mpirun=PATH"}},
    {"MpirunMissing", Tool::kMpirun, {"--mpirun=$DIR/missing"}, {"$DIR/missing is not an executable file"}},
    {"MpirunIsADirectory", Tool::kMpirun, {"--mpirun=$DIR"}, {"is not an executable file"}},
    {"MpirunNotOnPath", Tool::kMpirun, {"--mpirun=no-such-mpirun"}, {"no-such-mpirun is not on $PATH"}},
    {"SshFlag", Tool::kMpirun, {"--ssh=ssh"}, {"--ssh is a psbench ssh flag"}},
};

const std::vector<BadInput> kSlurmCases = {
    {"OutsideAnAllocation", Tool::kSlurm, {}, {"inside a Slurm allocation", "SLURM_JOB_ID"}},
    {"SlurmUnknownFlag", Tool::kSlurm, {"--no-such-flag=1"}, {"unknown flag", "--no-such-flag"}},
    {"SlurmZeroPs", Tool::kSlurm, {"--num-ps=0"}, {"--num-ps"}},
    {"SlurmUnknownScheme", Tool::kSlurm, {"--scheme=zipf"}, {"--scheme=zipf"}},
    {"SlurmHostfileFlag", Tool::kSlurm, {"--hostfile=$DIR/hosts"}, {"--hostfile"}},
};

// psbench report: its inputs are bounded regular files of JSON Lines, its outputs land on
// none of them, nor on each other.
const std::vector<BadInput> kReportCases = {
    {"NoInput", Tool::kReport, {}, {"give one or more JSON Lines files"}},
    {"InputMissing", Tool::kReport, {"$DIR/missing.jsonl"}, {"'$DIR/missing.jsonl'", "cannot open"}},
    {"InputIsAFifo", Tool::kReport, {"$DIR/fifo.json"}, {"'$DIR/fifo.json'", "is a FIFO"}},
    {"InputIsADirectory", Tool::kReport, {"$DIR"}, {"'$DIR'", "is a directory"}},
    {"InputIsADevice", Tool::kReport, {"/dev/zero"}, {"'/dev/zero'", "character device"}},
    {"InputOverLimit", Tool::kReport, {"$DIR/records.jsonl", "--max-input-size=4"},
     {"$DIR/records.jsonl", "over the 4 bytes limit", "--max-input-size"}},
    {"InputEmpty", Tool::kReport, {"$DIR/empty.jsonl"}, {"$DIR/empty.jsonl", "empty, no records"}},
    {"InputNotJsonLines", Tool::kReport, {"$DIR/not-json.jsonl"}, {"$DIR/not-json.jsonl:1", "not a JSON object"}},
    {"NoRecordToTabulate", Tool::kReport, {"$DIR/records.jsonl"}, {"no record psbench report can tabulate"}},
    {"InputGivenTwice", Tool::kReport, {"$DIR/records.jsonl", "$DIR/records.jsonl"},
     {"are the same file", "give each once"}},
    // Each made a file named "-".
    {"MarkdownToDash", Tool::kReport, {"$DIR/records.jsonl", "--markdown=-"}, {"--markdown=-: give a file name"}},
    {"CsvToDash", Tool::kReport, {"$DIR/records.jsonl", "--csv=-"}, {"--csv=-: give a file name"}},
    {"HtmlToDash", Tool::kReport, {"$DIR/records.jsonl", "--html=-"}, {"--html=-: give a file name"}},
    {"MarkdownOverInput", Tool::kReport, {"$DIR/records.jsonl", "--markdown=$DIR/records.jsonl"},
     {"--markdown=$DIR/records.jsonl would write over the report input"}},
    {"HtmlOverInput", Tool::kReport, {"$DIR/records.jsonl", "--html=$DIR/records.jsonl"},
     {"--html=$DIR/records.jsonl would write over the report input"}},
    {"CsvOverInput", Tool::kReport, {"$DIR/records.jsonl", "--csv=$DIR/records.jsonl"},
     {"--csv=$DIR/records.jsonl would write over the report input"}},
    {"HtmlOverMarkdown", Tool::kReport, {"$DIR/records.jsonl", "--markdown=$DIR/r.md", "--html=$DIR/r.md"},
     {"--html=$DIR/r.md would write over --markdown=$DIR/r.md"}},
    {"HtmlPlotsOverInput", Tool::kReport, {"$DIR/plots_files/plots.json", "--html=$DIR/plots.html"},
     {"--html=$DIR/plots.html writes its plots into $DIR/plots_files/, which holds the report input "
      "$DIR/plots_files/plots.json"}},
    {"HtmlPlotsOverMarkdown", Tool::kReport, {"$DIR/records.jsonl", "--html=$DIR/q.html", "--markdown=$DIR/q_files/plots.json"},
     {"--html=$DIR/q.html writes its plots into $DIR/q_files/, which holds --markdown=$DIR/q_files/plots.json"}},
    {"HtmlInAMissingDirectory", Tool::kReport, {"$DIR/records.jsonl", "--html=$DIR/missing/page.html"},
     {"--html=$DIR/missing/page.html: no directory $DIR/missing"}},
    {"HtmlIsADirectory", Tool::kReport, {"$DIR/records.jsonl", "--html=$DIR"}, {"--html=$DIR: is a directory"}},
    {"EmptyMarkdown", Tool::kReport, {"$DIR/records.jsonl", "--markdown="}, {"--markdown needs a file name"}},
    {"EmptyHtml", Tool::kReport, {"$DIR/records.jsonl", "--html="}, {"--html needs a file name"}},
    {"EmptyCsv", Tool::kReport, {"$DIR/records.jsonl", "--csv="}, {"--csv needs a file name"}},
    {"ReportUnknownFlag", Tool::kReport, {"$DIR/records.jsonl", "--no-such-flag"},
     {"unknown flag", "--no-such-flag"}, "psbench"},
    {"RunFlag", Tool::kReport, {"$DIR/records.jsonl", "--benchmark=latency"}, {"unknown flag", "--benchmark"},
     "psbench"},
};

const std::vector<BadInput> kPsCases = {
    {"PortOutOfRange", Tool::kPs, {"--port=99999"}, {"--port=99999"}},
    {"ListenNoSuchInterface", Tool::kPs, {"--listen=nosuch0"}, {"--listen=nosuch0", "interface"}},
    {"ListenEmpty", Tool::kPs, {"--listen="}, {"--listen", "empty"}},
    {"ZeroThreads", Tool::kPs, {"--threads=0"}, {"--threads"}},
    {"CpuOutOfRange", Tool::kPs, {"--cpu=99"}, {"--cpu=99"}},
    {"NegativeFaultRate", Tool::kPs, {"--fault-corrupt-every=-1"}, {"--fault-corrupt-every"}},
    {"WorkerFlag", Tool::kPs, {"--benchmark=latency"}, {"unknown flag", "--benchmark"}},
    {"UnknownTransport", Tool::kPs, {"--transport=rdma"}, {"rdma"}},
    {"RdmaMtuNotIb", Tool::kPs, {"--transport=grpc+verbs", "--rdma-mtu=1000"}, {"--rdma-mtu=1000"}},
    {"RdmaUnknownPoll", Tool::kPs, {"--rdma-poll=spin"}, {"--rdma-poll=spin"}},
    {"RdmaTinySlot", Tool::kPs, {"--rdma-slot-size=100"}, {"--rdma-slot-size"}},
    {"RdmaFlagOnGrpc", Tool::kPs, {"--rdma-device=rxe0"}, {"--rdma-device", "applies to grpc+verbs only"}},
    {"ThreadsOnVerbs", Tool::kPs, {"--transport=grpc+verbs", "--threads=2"}, {"--threads", "applies to grpc only"}},
    {"ThreadsOnCallbackApi", Tool::kPs, {"--grpc-api=callback", "--threads=2"}, {"--threads", "--grpc-api=cq only"}},
    {"BusyPollOnCallbackApi", Tool::kPs, {"--grpc-api=callback", "--busy-poll"}, {"--busy-poll", "--grpc-api=cq only"}},
    {"TxZerocopyOnMpi", Tool::kPs, {"--transport=grpc+mpi", "--grpc-tx-zerocopy=1K"},
     {"--grpc-tx-zerocopy", "applies to grpc only"}},
    {"TxZerocopyOverOneGiB", Tool::kPs, {"--grpc-tx-zerocopy=2G"}, {"--grpc-tx-zerocopy=2GiB", "at most 1GiB"}},
    {"GrpcApiOnVerbs", Tool::kPs, {"--transport=grpc+verbs", "--grpc-api=callback"},
     {"--grpc-api", "applies to grpc only"}},
    {"GrpcApiUnknown", Tool::kPs, {"--grpc-api=Callback"}, {"--grpc-api=Callback", "cq or callback"}},
};

std::string CaseName(const ::testing::TestParamInfo<BadInput>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Worker, BadInputTest,
                         ::testing::ValuesIn(ForTool(Tool::kWorker, kScenarioCases)), CaseName);
INSTANTIATE_TEST_SUITE_P(Run, BadInputTest,
                         ::testing::ValuesIn(ForTool(Tool::kRun, kScenarioCases)), CaseName);
INSTANTIATE_TEST_SUITE_P(WorkerOnly, BadInputTest, ::testing::ValuesIn(kWorkerCases), CaseName);
INSTANTIATE_TEST_SUITE_P(RunOnly, BadInputTest, ::testing::ValuesIn(kRunCases), CaseName);
INSTANTIATE_TEST_SUITE_P(Ps, BadInputTest, ::testing::ValuesIn(kPsCases), CaseName);
INSTANTIATE_TEST_SUITE_P(Train, BadInputTest, ::testing::ValuesIn(kTrainCases), CaseName);
INSTANTIATE_TEST_SUITE_P(Ssh, BadInputTest, ::testing::ValuesIn(ForTool(Tool::kSsh, kClusterCases)),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Mpirun, BadInputTest,
                         ::testing::ValuesIn(ForTool(Tool::kMpirun, kClusterCases)), CaseName);
INSTANTIATE_TEST_SUITE_P(SshOnly, BadInputTest, ::testing::ValuesIn(kSshCases), CaseName);
INSTANTIATE_TEST_SUITE_P(MpirunOnly, BadInputTest, ::testing::ValuesIn(kMpirunCases), CaseName);
INSTANTIATE_TEST_SUITE_P(Slurm, BadInputTest, ::testing::ValuesIn(kSlurmCases), CaseName);
INSTANTIATE_TEST_SUITE_P(Report, BadInputTest, ::testing::ValuesIn(kReportCases), CaseName);

// --- cases that need a process or a socket ----------------------------------------------------

class BadInputProcessTest : public IntegrationTest {};

TEST_F(BadInputProcessTest, RunWithoutCommand) {
  ExpectUsageError(RunCommand({BinPath("psbench")}, seconds(10)), "psbench", {"missing command"});
  ExpectUsageError(RunCommand({BinPath("psbench"), "bench"}, seconds(10)), "psbench",
                   {"unknown command 'bench'"});
}

// The tour (no --benchmark) includes the skew scheme, so its bias must be among the categories.
TEST_F(BadInputProcessTest, TourChecksEverySchemeItWillRun) {
  ExpectUsageError(RunCommand(RunArgv({"--skew-bias=small", "--categories=M,L", "--warmup=0s",
                                       "--duration=0.1s"}),
                              seconds(60)),
                   "psbench", {"--skew-bias=small", "--categories=M,L"});
}

TEST_F(BadInputProcessTest, UnreachablePsIsNamed) {
  ClosedPort nobody;
  const Argv flags = {"--benchmark=latency", "--connect-timeout=1s", "--iterations=3"};
  RunResult r = RunCommand(WorkerArgv(nobody.address(), flags), seconds(20));
  ExpectUsageError(r, "psbench-worker", {nobody.address(), "1s"});
  EXPECT_LT(r.seconds, 10) << "gives up after --connect-timeout";
}

TEST_F(BadInputProcessTest, UnreachableSecondPsIsTheOneNamed) {
  auto ps = PsServer::Start();
  ASSERT_TRUE(ps);
  ClosedPort nobody;
  RunResult r = RunCommand(WorkerArgv(ps->address() + "," + nobody.address(),
                                      {"--benchmark=throughput", "--connect-timeout=1s",
                                       "--iterations=3"}),
                           seconds(20));
  ExpectUsageError(r, "psbench-worker", {nobody.address()});
  EXPECT_EQ(r.err.find(ps->address()), std::string::npos) << "names only the unreachable PS";
  EXPECT_EQ(ps->process().Stop(SIGTERM), 0);
}

// $PBS_NODEFILE is the host list as much as --hostfile is: --json naming it used to append a
// record to it, and the next run read that record as a host.
TEST_F(BadInputProcessTest, JsonOverPbsNodefile) {
  TempDir dir;
  const std::string hosts = dir.Write("nodes", "localhost\nlocalhost\n");
  setenv("PBS_NODEFILE", hosts.c_str(), 1);
  RunResult r = RunCommand({BinPath("psbench"), "ssh", "--ssh=/bin/false", "--benchmark=latency",
                            "--iterations=3", "--json=" + hosts},
                           seconds(20));
  unsetenv("PBS_NODEFILE");
  ExpectUsageError(r, "psbench", {"--json=" + hosts + " would write over $PBS_NODEFILE " + hosts});
  EXPECT_EQ(ReadFile(hosts), "localhost\nlocalhost\n");
}

// scontrol's own error lines went straight to the terminal before psbench's: one line only.
TEST_F(BadInputProcessTest, ScontrolFailureIsOneLine) {
  TempDir dir;
  const std::string scontrol = dir.Write("scontrol", "#!/bin/sh\nfor i in 1 2 3 4; do echo \"scontrol: error $i\" >&2; done\nexit 1\n");
  chmod(scontrol.c_str(), 0755);
  RunResult r = RunCommand({"/usr/bin/env", "PATH=" + dir.path() + ":/usr/bin:/bin", "SLURM_JOB_ID=1",
                            "SLURM_JOB_NODELIST=node[", BinPath("psbench"), "slurm", "--srun=/bin/false",
                            "--benchmark=latency", "--iterations=3"},
                           seconds(30));
  ExpectUsageError(r, "psbench", {"cannot expand SLURM_JOB_NODELIST=node[", "exited with status 1: scontrol: error 1"});
}

// An interface name resolves to that interface's address.
TEST_F(BadInputProcessTest, PsListensOnANamedInterface) {
  auto ps = PsServer::Start({"--listen=lo"});
  ASSERT_TRUE(ps);  // its first line names 127.0.0.1
  EXPECT_EQ(ps->process().Stop(SIGTERM), 0);
}

TEST_F(BadInputProcessTest, PsPortInUse) {
  auto first = PsServer::Start();
  ASSERT_TRUE(first);
  const std::string port = std::to_string(first->port());
  ExpectUsageError(RunCommand(PsArgv({"--listen=127.0.0.1", "--port=" + port}), seconds(20)),
                   "psbench-ps", {"in use", "127.0.0.1", port});
  ExpectUsageError(RunCommand(PsArgv({"--listen=0.0.0.0", "--port=" + port}), seconds(20)),
                   "psbench-ps", {"in use", port});
  EXPECT_TRUE(first->process().Running()) << "the first PS keeps serving";
  EXPECT_EQ(first->process().Stop(SIGTERM), 0);
}

bool HostHasRdmaDevice() {
  std::error_code ec;
  return std::filesystem::exists("/sys/class/infiniband", ec) &&
         !std::filesystem::is_empty("/sys/class/infiniband", ec);
}

// Without RDMA hardware (this machine, CI) grpc+verbs says so in one line; the same binaries
// run for real on Soft-RoCE in ctest -L rdma.
TEST_F(BadInputProcessTest, VerbsPsWithoutRdmaDevice) {
  if (HostHasRdmaDevice()) GTEST_SKIP() << "this host has an RDMA device";
  ExpectUsageError(
      RunCommand(PsArgv({"--listen=127.0.0.1", "--transport=grpc+verbs"}), seconds(20)),
      "psbench-ps", {"no RDMA device found: ibv_get_device_list returned 0"});
}

// The same found by a PS that psbench run started: exit 2 and the PS's own words, once.
TEST_F(BadInputProcessTest, RunKeepsThePsOwnWordsAndExitTwo) {
  if (HostHasRdmaDevice()) GTEST_SKIP() << "this host has an RDMA device";
  ExpectUsageError(RunCommand(RunArgv({"--transport=grpc+verbs", "--benchmark=latency",
                                       "--iterations=3", "--warmup=0s"}),
                              seconds(30)),
                   "psbench", {"PS 0 (pid ", "exited with status 2 before it listened: ", "no RDMA device found"});
}

TEST_F(BadInputProcessTest, VerbsWorkerAgainstAGrpcPs) {
  auto ps = PsServer::Start();
  ASSERT_TRUE(ps);
  RunResult r = RunCommand(WorkerArgv(ps->address(), {"--transport=grpc+verbs", "--iterations=1"}),
                           seconds(30));
  EXPECT_NE(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.err.find("not grpc+verbs"), std::string::npos) << r.Describe();
  EXPECT_EQ(ps->process().Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace psbench::testing
