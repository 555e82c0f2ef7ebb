#include "cli/launch/demux.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"

namespace psbench {
namespace {

// Open MPI's --tag-output tags each chunk it forwards, not each line: a long line arrives in
// chunks, "[1,3]<stdout>:{...[1,3]<stdout>:...}", and chunks of other ranks (and of their
// stderr, "[1,3]<stderr>:") may come between. So the stream is cut at every tag, each piece
// appended to its rank's line of that stream, and the line is complete at its newline.
class MpirunTags final : public Demux {
 public:
  std::vector<ProcessGroup::Line> Take(const std::string& line) override {
    std::vector<ProcessGroup::Line> out;
    static const std::string kTagEnds[2] = {"]<stdout>:", "]<stderr>:"};
    // The next tag at or after `from`: "[" JOB "," RANK "]<stdout>:" (or <stderr>), digits only.
    struct Tag {
      size_t open = std::string::npos, after = std::string::npos;
      int rank = -1, stream = 0;
    };
    auto next_tag = [&line](size_t from) {
      Tag best;
      for (int stream = 0; stream < 2; ++stream) {
        const std::string& tag_end = kTagEnds[stream];
        for (size_t end = line.find(tag_end, from); end != std::string::npos;
             end = line.find(tag_end, end + 1)) {
          if (best.open != std::string::npos && end > best.open) break;
          size_t open = line.rfind('[', end);
          if (open == std::string::npos || open < from) continue;
          size_t comma = line.find(',', open);
          auto digits = [&](size_t a, size_t b) {
            return a < b && std::all_of(line.begin() + a, line.begin() + b, absl::ascii_isdigit);
          };
          int rank = -1;
          if (comma < end && digits(open + 1, comma) && digits(comma + 1, end) &&
              absl::SimpleAtoi(line.substr(comma + 1, end - comma - 1), &rank)) {
            if (best.open == std::string::npos || open < best.open) {
              best = {open, end + tag_end.size(), rank, stream};
            }
            break;
          }
        }
      }
      return best;
    };
    std::pair<int, int> current{-1, 0};
    std::string untagged;
    size_t at = 0;
    while (at <= line.size()) {
      Tag tag = next_tag(at);
      bool found = tag.open != std::string::npos;
      std::string piece = line.substr(at, (found ? tag.open : line.size()) - at);
      if (current.first >= 0) partial_[current] += piece;
      else untagged += piece;
      if (!found) break;
      current = {tag.rank, tag.stream};
      at = tag.after;
    }
    if (!untagged.empty()) out.push_back({-1, untagged, false});
    if (current.first >= 0) {  // the newline ends the line whose piece came last
      out.push_back({current.first, std::move(partial_[current]), current.second == 1});
      partial_.erase(current);
    }
    return out;
  }

  std::vector<ProcessGroup::Line> Flush() override {
    std::vector<ProcessGroup::Line> out;
    for (auto& [key, text] : partial_) out.push_back({key.first, std::move(text), key.second == 1});
    partial_.clear();
    return out;
  }

 private:
  std::map<std::pair<int, int>, std::string> partial_;  // (rank, 0 stdout | 1 stderr) -> the line so far
};

// srun --label: see SrunLabelDemux.
class SrunLabels final : public Demux {
 public:
  std::vector<ProcessGroup::Line> Take(const std::string& line) override { return Split(line, false); }
  std::vector<ProcessGroup::Line> TakeStderr(const std::string& line) override { return Split(line, true); }

  std::vector<ProcessGroup::Line> Flush() override {
    std::vector<ProcessGroup::Line> out;
    for (auto& [key, text] : partial_) out.push_back({key.first, std::move(text), key.second});
    partial_.clear();
    return out;
  }

 private:
  std::vector<ProcessGroup::Line> Split(const std::string& line, bool from_stderr) {
    constexpr size_t kChunk = 1024;  // srun's (Slurm 22.05's) MAX_MSG_LEN for labelled output
    // A line longer than this is passed on in pieces of this size rather than held without bound.
    constexpr size_t kMaxLine = 64 << 20;
    absl::string_view rest = absl::StripLeadingAsciiWhitespace(line);
    const size_t colon = rest.find(": ");
    int task = -1;
    if (colon == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, colon), &task) || task < 0) {
      return {{-1, line}};  // srun's own words
    }
    const absl::string_view chunk = rest.substr(colon + 2);
    const std::pair<int, bool> key = {task, from_stderr};
    std::string& so_far = partial_[key];
    so_far.append(chunk.data(), chunk.size());
    if (chunk.size() == kChunk && so_far.size() < kMaxLine) return {};
    std::vector<ProcessGroup::Line> out = {{task, std::move(so_far), from_stderr}};
    partial_.erase(key);
    return out;
  }

  std::map<std::pair<int, bool>, std::string> partial_;  // (task, stderr) -> its line so far
};

}  // namespace

std::unique_ptr<Demux> MpirunTagDemux() { return std::make_unique<MpirunTags>(); }

std::unique_ptr<Demux> SrunLabelDemux() { return std::make_unique<SrunLabels>(); }

}  // namespace psbench
