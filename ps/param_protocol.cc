#include "ps/param_protocol.h"

#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace psbench {

bool StepSet::Add(uint64_t step) {
  // The range starting at or before `step`, if any.
  auto next = ranges_.upper_bound(step);
  if (next != ranges_.begin()) {
    auto prev = std::prev(next);
    if (step <= prev->second) return false;
    if (prev->second + 1 == step) {  // extends prev (the usual case: steps in order)
      prev->second = step;
      if (next != ranges_.end() && next->first == step + 1) {
        prev->second = next->second;
        ranges_.erase(next);
      }
      ++size_;
      return true;
    }
  }
  if (next != ranges_.end() && next->first == step + 1) {
    const uint64_t last = next->second;
    ranges_.erase(next);
    ranges_[step] = last;
  } else {
    ranges_[step] = step;
  }
  ++size_;
  return true;
}

bool StepSet::Contains(uint64_t step) const {
  auto next = ranges_.upper_bound(step);
  return next != ranges_.begin() && step <= std::prev(next)->second;
}

std::string StepSet::ToString() const {
  std::string out;
  for (const auto& [first, last] : ranges_) {
    if (!out.empty()) out += ',';
    absl::StrAppend(&out, first);
    if (last != first) absl::StrAppend(&out, "-", last);
  }
  return out;
}

absl::StatusOr<StepSet> StepSet::Parse(const std::string& text) {
  StepSet set;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> ends = absl::StrSplit(item, absl::MaxSplits('-', 1));
    uint64_t first = 0, last = 0;
    if (!absl::SimpleAtoi(ends[0], &first) ||
        !absl::SimpleAtoi(ends.size() > 1 ? ends[1] : ends[0], &last) || last < first ||
        (!set.ranges_.empty() && first <= set.ranges_.rbegin()->second + 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("steps '", text, "': '", item, "' is not an ascending range FIRST[-LAST]"));
    }
    set.ranges_[first] = last;
    set.size_ += last - first + 1;
  }
  return set;
}

nlohmann::json UpdateReport::ToJson() const {
  nlohmann::json list = nlohmann::json::array();
  for (size_t w = 0; w < workers.size(); ++w) {
    list.push_back({{"worker", w},
                    {"applied", workers[w].applied},
                    {"steps", workers[w].steps.ToString()},
                    {"duplicates", workers[w].duplicates}});
  }
  return {{"run_id", run_id},
          {"sync", sync},
          {"num_workers", workers.size()},
          {"updates", updates},
          {"workers", list}};
}

absl::StatusOr<UpdateReport> UpdateReport::FromJson(const nlohmann::json& j) {
  try {
    UpdateReport r;
    r.run_id = j.at("run_id").get<uint64_t>();
    r.sync = j.at("sync").get<bool>();
    r.updates = j.at("updates").get<uint64_t>();
    r.workers.resize(j.at("num_workers").get<size_t>());
    for (const auto& w : j.at("workers")) {
      const size_t index = w.at("worker").get<size_t>();
      if (index >= r.workers.size())
        return absl::InvalidArgumentError(absl::StrCat("update report: worker ", index, " of ", r.workers.size()));
      auto steps = StepSet::Parse(w.at("steps").get<std::string>());
      if (!steps.ok()) return steps.status();
      r.workers[index].steps = *std::move(steps);
      r.workers[index].applied = w.at("applied").get<uint64_t>();
      r.workers[index].duplicates = w.at("duplicates").get<std::vector<uint64_t>>();
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("update report: ", e.what()));
  }
}

}  // namespace psbench
