#include "worker/trainer/trace.h"

#include <fstream>

#include "absl/strings/str_cat.h"

namespace psbench::trainer {

void GradientTrace::Start() {
  start_ = std::chrono::steady_clock::now();
  std::fill(ready_s_.begin(), ready_s_.end(), -1.0);
  order_.clear();
}

void GradientTrace::Ready(int param) {
  ready_s_[param] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  order_.push_back(param);
}

nlohmann::json GradientTrace::ToJson() const {
  const Model& model = net_.model();
  std::vector<int> rank(ready_s_.size(), -1);
  for (size_t i = 0; i < order_.size(); ++i) rank[order_[i]] = static_cast<int>(i);
  nlohmann::json params = nlohmann::json::array();
  int64_t total = 0;
  for (size_t i = 0; i < net_.params().size(); ++i) {
    const ParamInfo& p = net_.params()[i];
    const int64_t bytes = p.count * int64_t{sizeof(float)};
    total += bytes;
    params.push_back({{"name", p.name},
                      {"bytes", bytes},
                      {"elements", p.count},
                      {"grad_ready_order", rank[i]},
                      {"ready_us", ready_s_[i] * 1e6}});
  }
  const Shape in = model.layers[0].out;
  return {{"model", model.name},
          {"input_shape", {net_.batch(), in.c, in.h, in.w}},
          {"num_classes", model.num_classes},
          {"source", absl::StrCat("psbench trainer, ", net_.description())},
          {"param_order",
           "model order (forward); grad_ready_order = order in which backward produced the "
           "gradient (0 = first); ready_us = microseconds from the start of the backward pass; "
           "bytes are the logical float32 sizes (no layout padding)"},
          {"num_tensors", params.size()},
          {"total_params", model.parameter_count()},
          {"total_bytes", total},
          {"params", params}};
}

absl::Status GradientTrace::Write(const std::string& path) const {
  std::ofstream out(path, std::ios::trunc);
  if (!out) return absl::InvalidArgumentError(absl::StrCat("--write-trace=", path, ": cannot open for writing"));
  out << ToJson().dump(1) << "\n";
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("--write-trace=", path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace psbench::trainer
