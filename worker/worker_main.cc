// psbench-worker: connects to one or more PS, runs a benchmark, prints the table and appends
// one JSON record per result.
#include <fstream>
#include <memory>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/cli.h"
#include "bench/report.h"
#include "bench/runner.h"
#include "bench/scenario_flags.h"
#include "bench/sysinfo.h"
#include "payloads/payload.h"
#include "transports/transport.h"

ABSL_FLAG(std::string, ps, "", "PS addresses, host:port[,host:port...]");
ABSL_FLAG(int, num_workers, 1, "workers in this run (throughput: all start together)");
ABSL_FLAG(int, worker_index, 0, "this worker's index in [0, --num-workers)");
ABSL_FLAG(std::string, run_id, "run", "names this run's start barrier on PS 0");
ABSL_FLAG(std::string, scenario, "", "read the scenario from this JSON file instead of flags");
ABSL_FLAG(std::string, cpu, "", "pin the worker process to these CPUs (e.g. 1 or 0-3)");
ABSL_FLAG(std::string, json, "", "append one JSON record per result to this file");
ABSL_FLAG(bool, quiet, false, "print no table (errors still go to stderr)");

namespace psbench {
namespace {

constexpr char kProgram[] = "psbench-worker";
constexpr char kUsage[] =
    "psbench-worker --ps=HOST:PORT[,...] --benchmark=latency|bandwidth|throughput [flags]\n"
    "Sends payloads to psbench-ps processes and measures latency, bandwidth or PS throughput.";

absl::StatusOr<Scenario> LoadScenario() {
  std::string path = absl::GetFlag(FLAGS_scenario);
  if (path.empty()) {
    auto s = ScenarioFromFlags();
    if (!s.ok()) return s.status();
    s->ps = absl::StrSplit(absl::GetFlag(FLAGS_ps), ',', absl::SkipEmpty());
    s->num_workers = absl::GetFlag(FLAGS_num_workers);
    s->worker_index = absl::GetFlag(FLAGS_worker_index);
    s->run_id = absl::GetFlag(FLAGS_run_id);
    return s;
  }
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--scenario=", path, ": cannot open"));
  auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat("--scenario=", path, ": not valid JSON"));
  }
  return ScenarioFromJson(j);
}

int Main(int argc, char** argv) {
  auto positional = ParseFlagsOrExit(argc, argv, kUsage, {"worker/", "bench/scenario_flags"});
  if (!positional.empty()) Die(kProgram, "unexpected argument '" + positional[0] + "'", kExitUsage);
  if (std::string cpu = absl::GetFlag(FLAGS_cpu); !cpu.empty()) {
    if (absl::Status s = PinProcess(cpu); !s.ok()) Die(kProgram, s, kExitUsage);
  }
  auto scenario = LoadScenario();
  if (!scenario.ok()) Die(kProgram, scenario.status(), kExitUsage);
  if (absl::Status s = ValidateScenario(*scenario); !s.ok()) Die(kProgram, s, kExitUsage);
  if (scenario->ps.empty()) Die(kProgram, "--ps is required (host:port of each PS)", kExitUsage);
  for (const auto& a : scenario->ps) {
    if (a.rfind(':') == std::string::npos || a.back() == ':') {
      Die(kProgram, absl::StrCat("--ps: '", a, "' is not host:port"), kExitUsage);
    }
  }
  auto plans = scenario->Plans();
  if (!plans.ok()) Die(kProgram, plans.status(), kExitUsage);
  std::string json_path = absl::GetFlag(FLAGS_json);
  if (!json_path.empty()) {
    // Fail before measuring, not after.
    if (absl::Status s = AppendJsonLines(json_path, {}); !s.ok()) Die(kProgram, s, kExitUsage);
  }

  ClientOptions options;
  options.servers = scenario->ps;
  options.mode = scenario->mode;
  options.validate = scenario->validate;
  options.connect_timeout = scenario->connect_timeout;
  options.rpc_timeout = scenario->rpc_timeout;
  options.busy_poll = scenario->busy_poll;
  auto client = MakeClient(scenario->transport, options);
  if (!client.ok()) Die(kProgram, client.status(), kExitUsage);
  if (absl::Status s = (*client)->Connect(); !s.ok()) Die(kProgram, s, kExitUsage);

  std::vector<std::string> command(argv, argv + argc);
  TablePrinter table;
  // Payloads live as long as the client: the transport may reference their memory.
  std::vector<std::unique_ptr<Payload>> payloads;
  for (size_t p = 0; p < plans->size(); ++p) {
    const PayloadPlan& plan = (*plans)[p];
    std::vector<int> ids;
    std::vector<uint64_t> bytes;
    for (size_t i = 0; i < plan.payloads.size(); ++i) {
      auto sizes = plan.Sizes(i);
      payloads.push_back(std::make_unique<Payload>(sizes, scenario->payload.seed + i));
      auto id = (*client)->Register(*payloads.back());
      if (!id.ok()) Die(kProgram, id.status(), kExitUsage);
      ids.push_back(*id);
      bytes.push_back(plan.Bytes(i));
    }
    if (scenario->num_workers > 1) {
      std::string name = absl::StrCat(scenario->run_id, "/plan-", p);
      absl::Time deadline = absl::Now() + scenario->connect_timeout + absl::Seconds(30);
      if (absl::Status s = (*client)->Barrier(name, scenario->num_workers, deadline); !s.ok()) {
        Die(kProgram, s, kExitRuntime);
      }
    }
    auto m = RunBenchmark(*scenario, **client, ids, bytes);
    if (!m.ok()) {
      std::string what = m.status().code() == absl::StatusCode::kDataLoss
                             ? "validation failed: "
                             : "benchmark failed: ";
      Die(kProgram, absl::StrCat(what, m.status().message()), kExitRuntime);
    }
    nlohmann::json record = MakeRecord(*scenario, plan, *m);
    record["command"] = command;
    if (!absl::GetFlag(FLAGS_quiet)) table.Print(record);
    if (!json_path.empty()) {
      if (absl::Status s = AppendJsonLines(json_path, {record}); !s.ok()) {
        Die(kProgram, s, kExitRuntime);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace psbench

int main(int argc, char** argv) { return psbench::Main(argc, argv); }
