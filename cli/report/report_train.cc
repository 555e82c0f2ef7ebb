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
    const Record& r = *rec;
    std::string key = absl::StrCat(r.Series(), "\n", r.RunId(), "\n", r.model.value_or(""), "\n", r.batch.value_or(0));
    if (!runs.contains(key)) order.push_back(key);
    Run& run = runs[key];
    run.series = r.Series();
    run.model = r.model.value_or("");
    run.sync = r.sync ? (*r.sync ? "sync" : "async") : "?";
    run.batch = static_cast<double>(r.batch.value_or(0));
    run.workers = static_cast<double>(r.num_workers.value_or(1));
    run.ps = static_cast<double>(r.num_ps.value_or(1));
    run.images += r.images_per_s.value_or(0);
    for (auto [stats, list] : {std::pair{&r.step, &run.step}, {&r.compute, &run.compute}, {&r.communication, &run.comm}}) {
      if (*stats) list->push_back((*stats)->mean_s * 1e3);
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
  t.notes.push_back("images/s of forward and of forward+backward; share of the processor's peak for "
                    "the math used (the CPU's measured FP32, a GPU's from its properties).");
  t.columns = {"host",  "model",   "engine",           "math",
               "layout", "batch", "threads", "forward images/s", "fwd+bwd images/s", "fwd+bwd % of peak"};
  for (const Record* rec : timing) {
    const Record& r = *rec;
    // A missing pass or figure prints as "-".
    auto figure = [](const std::optional<double>& v, double scale, int digits) {
      return v ? Fixed(scale * *v, digits) : std::string("-");
    };
    const StepStats none;
    const StepStats& fwd = r.forward ? *r.forward : none;
    const StepStats& train = r.forward_backward ? *r.forward_backward : none;
    t.rows.push_back({r.EnvironmentText("host"), r.model.value_or(""), r.engine.value_or(""), r.math.value_or("fp32"),
                      r.layout.value_or("-"), std::to_string(r.batch.value_or(0)), std::to_string(r.threads.value_or(0)),
                      figure(fwd.images_per_s, 1, 2), figure(train.images_per_s, 1, 2),
                      figure(train.fraction_of_peak, 100, 1)});
  }
  return t;
}

}  // namespace psbench::report::internal
