#include "worker/trainer/trace.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "inputs/input_file.h"

namespace psbench::trainer {

void GradientTrace::StepStart() {
  steps_.push_back({Clock::now(), 0, std::vector<double>(net_.params().size(), -1.0)});
  open_ = true;
}

void GradientTrace::Ready(int param) {
  if (!open_) return;
  Step& s = steps_.back();
  s.ready_s[param] = std::chrono::duration<double>(Clock::now() - s.start).count();
}

void GradientTrace::StepEnd() {
  if (!open_) return;
  Step& s = steps_.back();
  s.compute_s = std::chrono::duration<double>(Clock::now() - s.start).count();
  open_ = false;
}

nlohmann::json GradientTrace::ToJson() const {
  const Model& model = net_.model();
  // Microseconds, three decimals, as psbench_trace writes them.
  auto us = [](double s) { return std::round(s * 1e9) / 1e3; };
  nlohmann::json tensors = nlohmann::json::array();
  for (const ParamInfo& p : net_.params()) {
    tensors.push_back({{"name", p.name},
                       {"shape", {p.count}},
                       {"dtype", "float32"},
                       {"bytes", p.count * int64_t{sizeof(float)}}});
  }
  nlohmann::json steps = nlohmann::json::array();
  for (const Step& s : steps_) {
    if (open_ && &s == &steps_.back()) break;  // unfinished
    nlohmann::json ready = nlohmann::json::array();
    for (double r : s.ready_s) ready.push_back(r < 0 ? nlohmann::json() : nlohmann::json(us(r)));
    steps.push_back({{"start_us", us(std::chrono::duration<double>(s.start - steps_.front().start).count())},
                     {"compute_us", us(s.compute_s)},
                     {"ready_us", ready}});
  }
  const Shape in = model.layers[0].out;
  return {{"format", "psbench-trace/2"},
          {"source",
           {{"tool", "psbench train"},
            {"model", model.name},
            {"engine", net_.description()},
            {"input_shape", {net_.batch(), in.c, in.h, in.w}},
            {"time", "microseconds from the start of each step (its forward pass); compute = forward and "
                     "backward; ready = when backward produced the gradient; bytes are the logical "
                     "float32 sizes (no layout padding)"}}},
          {"tensors", tensors},
          {"steps", steps}};
}

absl::Status GradientTrace::Write(const std::string& path) const {
  if (absl::Status s = WriteOutputFile(path, ToJson().dump(1) + "\n"); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("--write-trace=", path, ": ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace psbench::trainer
