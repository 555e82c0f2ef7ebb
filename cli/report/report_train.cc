// The training tables: training through the PS (psbench run --trainer) and model timing
// (psbench train).
#include <map>

#include "absl/strings/str_cat.h"
#include "cli/report/report_internal.h"
#include "fmt/core.h"

namespace psbench::report::internal {

// "train" records (one per worker of psbench run --trainer or psbench-worker --trainer).
std::optional<Table> TrainTable(const std::vector<const Record*>& train) {
  if (train.empty()) return std::nullopt;
  struct Run {
    std::string series, model, sync;
    double batch = 0, workers = 0, ps = 0, images = 0;
    std::vector<double> step, compute, comm;
    int found = 0;
  };
  std::vector<std::string> order;
  std::map<std::string, Run> runs;
  for (const Record* rec : train) {
    const json& r = rec->json;
    std::string key = absl::StrCat(SeriesKey(r), "\n", Str(r, "run_id"), "\n", Str(r, "model"), "\n",
                                   Num(r, "batch").value_or(0));
    if (!runs.contains(key)) order.push_back(key);
    Run& run = runs[key];
    run.series = SeriesKey(r);
    run.model = Str(r, "model");
    run.sync = r.contains("sync") && r["sync"].is_boolean() ? (r["sync"].get<bool>() ? "sync" : "async") : "?";
    run.batch = Num(r, "batch").value_or(0);
    run.workers = Num(r, "num_workers").value_or(1);
    run.ps = Num(r, "num_ps").value_or(1);
    run.images += Num(r, "images_per_s").value_or(0);
    for (auto [name, list] : {std::pair{"step", &run.step}, {"compute", &run.compute}, {"communication", &run.comm}}) {
      if (auto v = Num(Obj(r, name), "mean_s")) list->push_back(*v * 1e3);
    }
    ++run.found;
  }
  Table t;
  t.id = "train";
  t.title = "Training (embedded trainer through the PS)";
  t.notes.push_back("images/s summed over the run's workers; step, compute and communication: mean per step over the workers, ms.");
  t.columns = {"series", "model", "batch", "workers", "PS", "SGD", "images/s", "step ms", "compute ms", "comm ms"};
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? std::string("-") : Fixed(s / v.size(), 1);
  };
  for (const std::string& key : order) {
    const Run& run = runs[key];
    std::string workers = fmt::format("{:.0f}", run.workers);
    if (run.found != static_cast<int>(run.workers)) workers += fmt::format(" ({} records)", run.found);
    t.rows.push_back({run.series, run.model, fmt::format("{:.0f}", run.batch), workers,
                      fmt::format("{:.0f}", run.ps), run.sync, Fixed(run.images, 2), mean(run.step),
                      mean(run.compute), mean(run.comm)});
  }
  return t;
}

std::optional<Table> TimingTable(const std::vector<const Record*>& timing) {
  if (timing.empty()) return std::nullopt;
  Table t;
  t.id = "train_timing";
  t.title = "Model timing (psbench train)";
  t.notes.push_back("images/s of forward and of forward+backward; share of the CPU's peak FP32 FLOP/s.");
  t.columns = {"host", "model", "engine", "batch", "threads", "forward images/s", "fwd+bwd images/s", "fwd+bwd % of peak"};
  for (const Record* rec : timing) {
    const json& r = rec->json;
    const json& fb = Obj(r, "forward_backward");
    auto fwd = Num(Obj(r, "forward"), "images_per_s");
    auto train = Num(fb, "images_per_s");
    auto peak = Num(fb, "fraction_of_peak");
    t.rows.push_back({Str(Obj(r, "environment"), "host"), Str(r, "model"), Str(r, "engine"),
                      fmt::format("{:.0f}", Num(r, "batch").value_or(0)),
                      fmt::format("{:.0f}", Num(r, "threads").value_or(0)), fwd ? Fixed(*fwd, 2) : "-",
                      train ? Fixed(*train, 2) : "-", peak ? Fixed(100 * *peak, 1) : "-"});
  }
  return t;
}

}  // namespace psbench::report::internal
