#include "worker/train_worker.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <span>

#include "absl/strings/str_cat.h"
#include "bench/cli.h"
#include "bench/moved.h"
#include "bench/report.h"
#include "bench/sysinfo.h"
#include "fmt/format.h"
#include "payloads/payload.h"
#include "ps/ps_client.h"
#include "worker/trainer/init.h"
#include "worker/trainer/network.h"
#include "worker/trainer/timing.h"
#include "worker/trainer/trace.h"

namespace psbench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kWorkerProgram[] = "psbench-worker";

}  // namespace

int RunTrainWorker(const Scenario& scenario, Client& client, const TrainerSettings& settings,
                   const std::string& json_path, bool quiet,
                   const std::vector<std::string>& command, ProgressReporter& progress) {
  auto model = trainer::BuildModel(settings.model);
  if (!model.ok()) Die(kWorkerProgram, absl::StrCat("--trainer: ", model.status().message()), kExitUsage);
  auto math = trainer::ParseMath(settings.math);
  if (!math.ok()) Die(kWorkerProgram, math.status(), kExitUsage);
  auto layout = trainer::ParseLayout(settings.layout);
  if (!layout.ok()) Die(kWorkerProgram, layout.status(), kExitUsage);
  auto made = trainer::MakeNetwork(settings.engine, *model, settings.batch, settings.threads, *math, *layout);
  // A flag the engine cannot take is bad input; a machine without the device (no CUDA device
  // for --engine=gpu) a runtime failure, as for psbench train.
  if (!made.ok()) Die(kWorkerProgram, made.status(), ExitCodeFor(made.status()));
  trainer::Network& net = **made;
  const auto& params = net.params();

  // The PS client places the variables over the PS by bytes; the network computes with
  // the parameters where they arrive and writes its gradients where they leave from.
  std::vector<uint64_t> tensor_bytes;
  for (const auto& p : params) tensor_bytes.push_back(p.bytes);
  auto made_ps = PsClient::Create(client, tensor_bytes,
                                  {.run_id = scenario.run_id,
                                   .worker = static_cast<uint32_t>(scenario.worker_index),
                                   .num_workers = static_cast<uint32_t>(scenario.num_workers),
                                   .sync = settings.sync,
                                   .learning_rate = settings.learning_rate,
                                   .momentum = settings.momentum,
                                   .seed = scenario.payload.seed,
                                   .round_timeout = scenario.rpc_timeout + absl::Seconds(5),
                                   .buckets = {}});
  if (!made_ps.ok()) Die(kWorkerProgram, made_ps.status(), ExitCodeFor(made_ps.status()));
  PsClient& ps = **made_ps;
  // The network goes before the PS client's memory it is bound to (it unpins that memory).
  const std::unique_ptr<trainer::Network> owned_net = std::move(*made);
  const size_t num_ps = ps.num_ps();
  std::vector<float*> values(params.size()), grads(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    values[i] = ps.incoming(static_cast<int>(i));
    grads[i] = ps.outgoing(static_cast<int>(i));
  }
  if (absl::Status s = net.Bind(values, grads); !s.ok()) Die(kWorkerProgram, s, kExitRuntime);
  // One round with every PS; the network's parameters are then the PS's.
  auto exchange = [&](ExchangeHeader::Kind kind, uint64_t step) {
    if (absl::Status s = ps.Exchange(kind, step); !s.ok()) Die(kWorkerProgram, s, kExitRuntime);
    net.ParamsChanged();
  };

  // Every worker starts from the same seeded values; the first to arrive sets the PS, and
  // all continue from what the PS answers.
  auto moved_before = TakeMovedSnapshot(client);
  if (!moved_before.ok()) Die(kWorkerProgram, moved_before.status(), kExitRuntime);
  net.InitParams(scenario.payload.seed);
  for (size_t i = 0; i < params.size(); ++i) std::memcpy(grads[i], values[i], params[i].bytes);
  exchange(ExchangeHeader::kInit, 0);

  const trainer::Shape in = model->layers[0].out;
  trainer::SyntheticImages data(in, model->num_classes, scenario.payload.seed);
  std::vector<float> images(size_t(settings.batch) * in.elements());
  std::vector<int> labels(settings.batch);
  trainer::GradientTrace trace(net);
  std::vector<double> step_s, compute_s, comm_s, losses;
  // An engine computing outside host memory: gradient copies out, parameter copies in.
  std::vector<double> d2h_s, exposed_s, h2d_s;
  const int total_steps = settings.warmup_steps + settings.steps;
  uint64_t step_bytes = 0;  // what one step sends to the PS (and reads back)
  for (uint64_t b : tensor_bytes) step_bytes += b;
  LoopProgress().StartPhase(LoopCounters::kWarmup);
  for (int step = 0; step < total_steps; ++step) {
    if (step == settings.warmup_steps) LoopProgress().StartPhase(LoopCounters::kMeasure);
    // Worker w's slice of the global batch of this step: the same samples whatever the
    // number of workers, so W workers of batch B train like one of batch W x B.
    const uint64_t first = (uint64_t(step) * scenario.num_workers + scenario.worker_index) * settings.batch;
    data.Fill(first, settings.batch, images, labels);
    net.SetBatch(images, labels);
    const auto start = Clock::now();
    trace.StepStart();
    const double loss = net.Forward();
    net.Backward([&trace](int p) { trace.Ready(p); });
    trace.StepEnd();
    const auto computed = Clock::now();
    if (absl::Status s = ps.Exchange(ExchangeHeader::kStep, step); !s.ok()) Die(kWorkerProgram, s, kExitRuntime);
    const auto exchanged = Clock::now();
    net.ParamsChanged();
    const auto loaded = Clock::now();
    LoopProgress().Completed(step_bytes);
    if (step < settings.warmup_steps) continue;
    compute_s.push_back(std::chrono::duration<double>(computed - start).count());
    comm_s.push_back(std::chrono::duration<double>(exchanged - computed).count());
    step_s.push_back(std::chrono::duration<double>(loaded - start).count());
    d2h_s.push_back(net.staging().device_to_host_s);
    exposed_s.push_back(net.staging().exposed_s);
    h2d_s.push_back(std::chrono::duration<double>(loaded - exchanged).count());
    losses.push_back(loss);
  }
  auto moved_after = TakeMovedSnapshot(client);
  if (!moved_after.ok()) Die(kWorkerProgram, moved_after.status(), kExitRuntime);

  const double total_s = std::accumulate(step_s.begin(), step_s.end(), 0.0);
  Record record;
  record.kind = "train";
  record.model = model->name;
  record.extra["parameters"] = model->parameter_count();
  record.batch = settings.batch;
  record.engine = settings.engine;
  record.math = settings.math;
  if (!net.layout().empty()) record.layout = net.layout();
  record.extra["engine_description"] = net.description();
  record.transport = scenario.transport;
  if (TransportHonoursMode(scenario.transport)) record.mode = std::string(WireModeName(scenario.mode));
  record.tls = scenario.tls;
  record.validate = scenario.validate;
  record.sync = settings.sync;
  record.extra["learning_rate"] = settings.learning_rate;
  record.extra["momentum"] = settings.momentum;
  record.seed = scenario.payload.seed;
  record.num_ps = num_ps;
  record.num_workers = scenario.num_workers;
  record.worker_index = scenario.worker_index;
  record.run_id = scenario.run_id;
  record.extra["warmup_steps"] = settings.warmup_steps;
  record.steps = settings.steps;
  record.placement = ps.PlacementJson();
  record.images_per_s = settings.batch * step_s.size() / total_s;
  auto stats = [](const std::vector<double>& seconds) {
    const trainer::SecondsSummary s = trainer::Summarize(seconds);
    StepStats out;  // the timing fields; the rest stay unset
    out.mean_s = s.mean_s;
    out.median_s = s.median_s;
    out.min_s = s.min_s;
    out.max_s = s.max_s;
    return out;
  };
  record.step = stats(step_s);
  record.compute = stats(compute_s);
  record.communication = stats(comm_s);
  if (settings.engine != "cpu") {
    // compute holds the gradient copies the backward pass did not hide; the step is
    // compute + communication + parameters_to_device.
    auto seconds = [](const std::vector<double>& s) { return trainer::SecondsStats(s); };
    record.extra["gradients_to_host"] = seconds(d2h_s);
    record.extra["gradients_to_host_exposed"] = seconds(exposed_s);
    record.extra["parameters_to_device"] = seconds(h2d_s);
  }
  // The final parameters, canonical layout, model order: a hash of every byte (equal hashes:
  // bit-identical parameters) and per-tensor L2 norms, sums in double (runs that train alike
  // up to float rounding, W workers of batch B and one of batch W x B, compare these within a
  // tolerance).
  double sum = 0, sum_squares = 0;
  std::vector<uint64_t> hashes;
  nlohmann::json norms = nlohmann::json::array();
  for (size_t i = 0; i < params.size(); ++i) {
    const std::vector<float> values = net.ReadParam(static_cast<int>(i));
    double squares = 0;
    for (float v : values) {
      sum += v;
      squares += double{v} * v;
    }
    sum_squares += squares;
    norms.push_back(std::sqrt(squares));
    hashes.push_back(Checksum(std::as_bytes(std::span<const float>(values))));
  }
  record.extra["final_params"] = {{"hash", fmt::format("{:016x}", Checksum(std::as_bytes(std::span<const uint64_t>(hashes))))},
                                  {"sum", sum},
                                  {"sum_squares", sum_squares},
                                  {"norms", norms}};
  record.extra["moved"] = MovedJson(*moved_before, *moved_after, {ps.bytes_sent(), ps.bytes_received()});
  record.loss_first = losses.front();
  record.loss_last = losses.back();
  record.environment = Environment();
  record.command = command;
  progress.Stop();
  if (!quiet) {
    const std::string to_device =
        settings.engine == "cpu" ? "" : fmt::format(" + to device {:.1f}", 1e3 * trainer::Summarize(h2d_s).mean_s);
    fmt::print("{} worker {}/{} batch {} over {} ({}, {} PS): {:.2f} images/s; per step {:.1f} ms "
               "= compute {:.1f} + communication {:.1f}{} (means); loss {:.3f} -> {:.3f}\n",
               model->name, scenario.worker_index, scenario.num_workers, settings.batch,
               scenario.transport, settings.sync ? "sync" : "async", num_ps, *record.images_per_s,
               1e3 * record.step->mean_s, 1e3 * record.compute->mean_s, 1e3 * record.communication->mean_s,
               to_device, losses.front(), losses.back());
  }
  if (!json_path.empty()) {
    if (absl::Status s = AppendJsonLines(json_path, {record}); !s.ok()) Die(kWorkerProgram, s, kExitRuntime);
  }
  // Every worker of a run gets the same flags: worker 0 alone writes the trace, after the
  // record (a trace that cannot be written must not take the measurement with it).
  if (!settings.write_trace.empty() && scenario.worker_index == 0) {
    if (absl::Status s = trace.Write(settings.write_trace); !s.ok()) {
      Die(kWorkerProgram, absl::StrCat(s.message(), json_path.empty() ? "" : " (the record is saved)"), kExitRuntime);
    }
  }
  if (std::string why = MovedDisagreement(record.extra["moved"]); !why.empty()) {
    Die(kWorkerProgram, absl::StrCat("payload bytes not where the record says: ", why), kExitRuntime);
  }
  return 0;
}

}  // namespace psbench
