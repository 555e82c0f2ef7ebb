#include "deploy/cluster/process_group.h"

#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <deque>
#include <utility>

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
  explicit ChildGroup(std::vector<ChildProcess> children)
      : children_(std::move(children)), open_(children_.size(), true) {}

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
          return Line{static_cast<int>(i), *std::move(line)};
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
      if (*st != 0 && !failed_) failed_ = static_cast<int>(i);
      worst = std::max(worst, *st);
    }
    return worst;
  }

  std::optional<int> FailedMember() const override { return failed_; }
  bool StopStatusIsMembers() const override { return true; }

  bool AllExited() {
    return std::all_of(children_.begin(), children_.end(), [](ChildProcess& c) { return c.Poll().has_value(); });
  }

  int Stop(int sig, absl::Duration grace) override {
    // First the end of their stdin: over ssh a signal reaches only the local client (which
    // then exits 255), while the remote process sees its input end, stops cleanly and ssh
    // passes its exit status on.
    absl::Time deadline = absl::Now() + grace;
    for (auto& c : children_) c.CloseStdin();
    absl::Time polite = absl::Now() + grace / 2;
    while (absl::Now() < polite && !AllExited()) absl::SleepFor(absl::Milliseconds(5));
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
  size_t next_ = 0;
  std::optional<int> failed_;
};

class LauncherGroup : public ProcessGroup {
 public:
  LauncherGroup(ChildProcess launcher, Demux demux)
      : launcher_(std::move(launcher)), demux_(std::move(demux)) {}

  absl::StatusOr<std::optional<Line>> ReadLine(absl::Time deadline) override {
    while (ready_.empty()) {
      if (closed_) return std::nullopt;
      auto line = launcher_.ReadLine(deadline);
      if (!line.ok()) {
        if (line.status().code() != absl::StatusCode::kUnavailable) return line.status();
        closed_ = true;
        continue;
      }
      for (Line& l : demux_(*line)) ready_.push_back(std::move(l));
    }
    Line next = std::move(ready_.front());
    ready_.pop_front();
    return next;
  }

  std::optional<int> Poll() override { return launcher_.Poll(); }
  std::optional<int> FailedMember() const override { return std::nullopt; }
  bool StopStatusIsMembers() const override { return false; }
  int Stop(int sig, absl::Duration grace) override { return launcher_.Stop(sig, grace); }

 private:
  ChildProcess launcher_;
  Demux demux_;
  std::deque<Line> ready_;
  bool closed_ = false;
};

}  // namespace

std::unique_ptr<ProcessGroup> GroupOfChildren(std::vector<ChildProcess> children) {
  return std::make_unique<ChildGroup>(std::move(children));
}

std::unique_ptr<ProcessGroup> GroupBehindLauncher(ChildProcess launcher, Demux demux) {
  return std::make_unique<LauncherGroup>(std::move(launcher), std::move(demux));
}

}  // namespace psbench
