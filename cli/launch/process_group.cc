#include "cli/launch/process_group.h"

#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "bench/cli.h"

namespace psbench {
namespace {

// Waits until one of `children`'s stdout is readable or `deadline`; false on the deadline.
bool WaitReadable(const std::vector<ChildProcess*>& children, absl::Time deadline) {
  std::vector<pollfd> fds;
  for (ChildProcess* c : children) {
    if (c->HasBufferedLine()) return true;
    fds.push_back({c->stdout_fd(), POLLIN, 0});
  }
  int64_t ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
  return poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(ms, 1 << 30))) > 0;
}

class ChildGroup : public ProcessGroup {
 public:
  ChildGroup(std::vector<ChildProcess> children, StatusDescriber describe)
      : children_(std::move(children)), open_(children_.size(), true),
        describe_(describe ? std::move(describe) : StatusDescriber(&ChildProcess::Describe)) {}

  absl::StatusOr<std::optional<Line>> ReadLine(absl::Time deadline) override {
    while (true) {
      std::vector<ChildProcess*> open;
      for (size_t i = 0; i < children_.size(); ++i) {
        if (open_[i]) open.push_back(&children_[i]);
      }
      if (open.empty()) return std::nullopt;
      bool readable = WaitReadable(open, deadline);
      // Take from every readable member without waiting, round robin from the next one.
      for (size_t k = 0; k < children_.size(); ++k) {
        size_t i = (next_ + k) % children_.size();
        if (!open_[i]) continue;
        auto line = children_[i].ReadLine(absl::Now());
        if (line.ok()) {
          next_ = i + 1;
          Line out{static_cast<int>(i), *std::move(line)};
          if (KeepFatal(out)) break;  // and wait for the next line
          return out;
        }
        if (line.status().code() == absl::StatusCode::kUnavailable) open_[i] = false;
      }
      if (!readable && absl::Now() >= deadline) return absl::DeadlineExceededError("timed out");
    }
  }

  std::optional<int> Poll() override {
    int worst = 0;
    for (size_t i = 0; i < children_.size(); ++i) {
      auto st = children_[i].Poll();
      if (!st) return std::nullopt;
      if (*st != 0 && !failed_) failed_ = Failure{static_cast<int>(i), describe_(*st)};
      worst = std::max(worst, *st);
    }
    return worst;
  }

  std::optional<Failure> FailedMember() const override { return failed_; }
  std::optional<int> MemberStatus(size_t i) override { return children_.at(i).Poll(); }
  std::string MemberName(size_t i) const override {
    return absl::StrCat(children_.at(i).name(), " (pid ", children_.at(i).pid(), ")");
  }
  bool StopStatusIsMembers() const override { return true; }
  std::string DescribeStatus(int status) const override { return describe_(status); }

  bool AllExited() {
    return std::all_of(children_.begin(), children_.end(), [](ChildProcess& c) { return c.Poll().has_value(); });
  }

  int Stop(int sig, absl::Duration grace) override {
    // First the end of their stdin: over ssh a signal reaches only the local client (which
    // then exits 255), while the remote process sees its input end, stops cleanly and ssh
    // passes its exit status on.
    absl::Time deadline = absl::Now() + grace;
    bool closed = false;
    for (auto& c : children_) closed |= c.CloseStdin();
    absl::Time polite = absl::Now() + grace / 2;
    while (closed && absl::Now() < polite && !AllExited()) absl::SleepFor(absl::Milliseconds(5));
    for (auto& c : children_) {
      if (!c.Poll()) kill(c.pid(), sig);
    }
    int worst = 0;
    for (auto& c : children_) {
      // Stop sends `sig` once more (harmless), waits out the rest of the grace, then SIGKILL.
      worst = std::max(worst, c.Stop(sig, std::max(absl::ZeroDuration(), deadline - absl::Now())));
    }
    return worst;
  }

 private:
  std::vector<ChildProcess> children_;
  std::vector<bool> open_;
  StatusDescriber describe_;
  size_t next_ = 0;
  std::optional<Failure> failed_;
};

class LauncherGroup : public ProcessGroup {
 public:
  LauncherGroup(ChildProcess launcher, std::unique_ptr<Demux> demux, std::vector<std::string> names,
                FailureNamer name_failure, MemberExits member_exits)
      : launcher_(std::move(launcher)), demux_(std::move(demux)), names_(std::move(names)),
        name_failure_(std::move(name_failure)), member_exits_(std::move(member_exits)) {}

  absl::StatusOr<std::optional<Line>> ReadLine(absl::Time deadline) override {
    while (ready_.empty()) {
      if (closed_) return std::nullopt;
      auto line = launcher_.ReadOutput(deadline);
      if (!line.ok()) {
        if (line.status().code() != absl::StatusCode::kUnavailable) return line.status();
        closed_ = true;
        for (Line& l : demux_->Flush()) Deliver(std::move(l));
        continue;
      }
      for (Line& l : line->from_stderr ? demux_->TakeStderr(line->text) : demux_->Take(line->text)) {
        Deliver(std::move(l));
      }
    }
    Line next = std::move(ready_.front());
    ready_.pop_front();
    return next;
  }

  // The launcher's status, or worse, a member's it reported: srun's worker step and mpirun's
  // wrapped ranks run on, and end well, when one member fails.
  std::optional<int> Poll() override {
    auto st = launcher_.Poll();
    if (!st) return st;
    int worst = *st;
    for (const auto& [member, status] : exits_) worst = std::max(worst, status);
    return worst;
  }
  std::optional<int> MemberStatus(size_t i) override {
    if (!member_exits_) return std::nullopt;
    if (auto it = exits_.find(static_cast<int>(i)); it != exits_.end()) return it->second;
    // The launcher said nothing of this member, and has ended: it ended well.
    if (closed_ && launcher_.Poll().has_value()) return 0;
    return std::nullopt;
  }
  std::optional<Failure> FailedMember() const override {
    if (auto named = name_failure_ ? name_failure_(own_text_) : std::nullopt) return named;
    return first_exit_;
  }
  std::string MemberName(size_t i) const override {
    return i < names_.size() ? names_[i] : absl::StrCat("member ", i);
  }
  bool StopStatusIsMembers() const override { return false; }
  int Stop(int sig, absl::Duration grace) override {
    // First the end of its stdin, where it has one (srun's PS step, whose tasks exit when it
    // ends): what srun then reports is the members' own clean ending.
    if (launcher_.CloseStdin()) {
      const absl::Time polite = absl::Now() + grace / 2;
      while (!launcher_.Poll() && absl::Now() < polite) absl::SleepFor(absl::Milliseconds(5));
      grace /= 2;
    }
    return launcher_.Stop(sig, grace);
  }
  // srun and mpirun pass on a task killed by signal N as their own exit status 128 + N, as a
  // shell does (psbench's programs never exit above 2 themselves).
  std::string DescribeStatus(int status) const override {
    if (status > 128 && status <= 128 + SIGRTMAX) status = kKilledBySignal + status - 128;
    return ChildProcess::Describe(status);
  }

 private:
  // One member's complete line: read for what it says of the members, then queued.
  void Deliver(Line l) {
    // The launcher's own words, kept (bounded) for naming the member that failed.
    if (l.member < 0 && own_text_.size() < (1 << 20)) absl::StrAppend(&own_text_, l.text, "\n");
    if (member_exits_) {
      auto exits = member_exits_(l);
      for (auto [member, status] : exits) {
        exits_.emplace(member, status);
        if (status != 0 && !first_exit_) first_exit_ = Failure{member, ChildProcess::Describe(status)};
      }
      if (l.member >= 0 && !exits.empty()) return;  // a rank wrapper's report, not the member's
    }
    if (KeepFatal(l)) return;
    ready_.push_back(std::move(l));
  }

  ChildProcess launcher_;
  std::unique_ptr<Demux> demux_;
  std::vector<std::string> names_;
  FailureNamer name_failure_;
  MemberExits member_exits_;
  std::map<int, int> exits_;  // member -> exit status the launcher reported
  std::optional<Failure> first_exit_;  // the first of them that was not 0
  std::string own_text_;
  std::deque<Line> ready_;
  bool closed_ = false;
};

}  // namespace

const std::optional<ProcessGroup::Fatal>& ProcessGroup::FatalOf(size_t i) const {
  static const std::optional<Fatal> kNone;
  return i < fatal_.size() ? fatal_[i] : kNone;
}

bool ProcessGroup::KeepFatal(const Line& line) {
  // "#fatal CODE MESSAGE" on a member's stdout; a member's first one counts.
  constexpr size_t kMaxMembers = 1 << 16;
  if (line.member < 0 || line.from_stderr || !absl::StartsWith(line.text, kFatalLinePrefix)) return false;
  absl::string_view rest = absl::string_view(line.text).substr(strlen(kFatalLinePrefix));
  const size_t space = rest.find(' ');
  int code = 0;
  if (space == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, space), &code)) return false;
  const size_t member = static_cast<size_t>(line.member);
  if (member >= kMaxMembers) return false;
  if (fatal_.size() <= member) fatal_.resize(member + 1);
  if (!fatal_[member]) fatal_[member] = Fatal{code, std::string(rest.substr(space + 1))};
  if (first_fatal_ < 0) first_fatal_ = static_cast<int>(member);
  return true;
}

std::unique_ptr<ProcessGroup> GroupOfChildren(std::vector<ChildProcess> children,
                                              StatusDescriber describe) {
  return std::make_unique<ChildGroup>(std::move(children), std::move(describe));
}

std::unique_ptr<ProcessGroup> GroupBehindLauncher(ChildProcess launcher, std::unique_ptr<Demux> demux,
                                                  std::vector<std::string> member_names,
                                                  FailureNamer name_failure, MemberExits member_exits) {
  return std::make_unique<LauncherGroup>(std::move(launcher), std::move(demux),
                                         std::move(member_names), std::move(name_failure),
                                         std::move(member_exits));
}

}  // namespace psbench
