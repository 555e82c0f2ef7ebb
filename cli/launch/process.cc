#include "cli/launch/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "inputs/input_file.h"

namespace psbench {
namespace {

// How many processes the kernel's out-of-memory killer has killed on this host (in any
// cgroup) since boot: /proc/vmstat's oom_kill (Linux 4.13 on); -1 where it is not said.
int64_t OomKills() {
  auto text = ReadInputFile("/proc/vmstat", "/proc/vmstat", 1 << 20, "");
  if (!text.ok()) return -1;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    int64_t n = 0;
    if (absl::ConsumePrefix(&line, "oom_kill ") && absl::SimpleAtoi(line, &n)) return n;
  }
  return -1;
}

// The count when psbench started its first child: a later SIGKILL may have been the OOM
// killer's (a process over its cgroup's or the host's memory dies with no word of why).
int64_t& OomKillsAtFirstChild() {
  static int64_t at_start = OomKills();
  return at_start;
}

}  // namespace

absl::StatusOr<ChildProcess> ChildProcess::Start(const std::string& name,
                                                 const std::vector<std::string>& argv,
                                                 const Io& io) {
  if (argv[0].find('/') != std::string::npos && access(argv[0].c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("cannot run ", argv[0], ": ", strerror(errno)));
  }
  int out[2] = {-1, -1}, err_out[2] = {-1, -1}, in[2] = {-1, -1}, exec_error[2] = {-1, -1};
  auto close_all = [&] {
    for (int fd : {out[0], out[1], err_out[0], err_out[1], in[0], in[1], exec_error[0], exec_error[1]}) {
      if (fd >= 0) close(fd);
    }
  };
  const bool capture_stderr = io.capture_stdout && io.capture_stderr && !io.stderr_to_stdout;
  if ((io.capture_stdout && pipe2(out, O_CLOEXEC) != 0) ||
      (capture_stderr && pipe2(err_out, O_CLOEXEC) != 0) || (io.hold_stdin && pipe2(in, O_CLOEXEC) != 0) ||
      pipe2(exec_error, O_CLOEXEC) != 0) {
    int err = errno;
    close_all();
    return absl::InternalError(absl::StrCat("pipe: ", strerror(err)));
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  OomKillsAtFirstChild();
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close_all();
    return absl::InternalError(absl::StrCat("fork: ", strerror(err)));
  }
  if (pid == 0) {
    // Dies with the launcher, so no run leaves processes behind.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    if (io.capture_stdout) dup2(out[1], STDOUT_FILENO);
    if (io.capture_stdout && io.stderr_to_stdout) dup2(out[1], STDERR_FILENO);
    if (capture_stderr) dup2(err_out[1], STDERR_FILENO);
    if (io.hold_stdin) {
      dup2(in[0], STDIN_FILENO);
    } else if (int null = open("/dev/null", O_RDONLY); null >= 0) {
      dup2(null, STDIN_FILENO);
    }
    execvp(args[0], args.data());
    int err = errno;  // tell the parent why (the pipe closes on a successful exec)
    (void)!write(exec_error[1], &err, sizeof err);
    _exit(127);
  }
  close(exec_error[1]);
  exec_error[1] = -1;
  int err = 0;
  ssize_t got = read(exec_error[0], &err, sizeof err);
  ChildProcess child;
  child.name_ = name;
  child.pid_ = pid;
  if (got == static_cast<ssize_t>(sizeof err)) {
    child.Stop(SIGKILL, absl::ZeroDuration());
    close_all();
    return absl::NotFoundError(absl::StrCat("cannot run ", argv[0], ": ", strerror(err)));
  }
  if (io.capture_stdout) {
    close(out[1]);
    child.stdout_fd_ = out[0];
  }
  if (capture_stderr) {
    close(err_out[1]);
    child.stderr_fd_ = err_out[0];
  } else {
    child.stderr_ended_ = true;
  }
  if (io.hold_stdin) {
    close(in[0]);
    child.stdin_fd_ = in[1];
  }
  close(exec_error[0]);
  return child;
}

ChildProcess::ChildProcess(ChildProcess&& o) noexcept { *this = std::move(o); }

ChildProcess& ChildProcess::operator=(ChildProcess&& o) noexcept {
  std::swap(name_, o.name_);
  std::swap(pid_, o.pid_);
  std::swap(stdout_fd_, o.stdout_fd_);
  std::swap(stdin_fd_, o.stdin_fd_);
  std::swap(stderr_fd_, o.stderr_fd_);
  std::swap(buffered_, o.buffered_);
  std::swap(stderr_buffered_, o.stderr_buffered_);
  std::swap(stdout_ended_, o.stdout_ended_);
  std::swap(stderr_ended_, o.stderr_ended_);
  std::swap(status_, o.status_);
  return *this;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !status_) Stop(SIGKILL, absl::ZeroDuration());
  if (stdout_fd_ >= 0) close(stdout_fd_);
  if (stdin_fd_ >= 0) close(stdin_fd_);
  if (stderr_fd_ >= 0) close(stderr_fd_);
}

absl::StatusOr<std::string> ChildProcess::ReadLine(absl::Time deadline) {
  auto out = ReadOutput(deadline);
  if (!out.ok()) return out.status();
  return std::move(out->text);
}

absl::StatusOr<ChildProcess::Output> ChildProcess::ReadOutput(absl::Time deadline) {
  struct Pipe {
    int fd;
    std::string& buffered;
    bool& ended;
    bool from_stderr;
  };
  Pipe pipes[2] = {{stdout_fd_, buffered_, stdout_ended_, false},
                   {stderr_fd_, stderr_buffered_, stderr_ended_, true}};
  while (true) {
    // A whole line first (stdout's before stderr's); the rest of a closed pipe's last line.
    for (Pipe& p : pipes) {
      if (auto nl = p.buffered.find('\n'); nl != std::string::npos) {
        Output line{p.buffered.substr(0, nl), p.from_stderr};
        p.buffered.erase(0, nl + 1);
        return line;
      }
      if (p.ended && !p.buffered.empty()) return Output{std::exchange(p.buffered, {}), p.from_stderr};
    }
    if (stdout_ended_ && stderr_ended_) return absl::UnavailableError("exited before answering");
    // A deadline already past still takes what is there (a zero-timeout poll).
    int64_t left_ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
    pollfd fds[2];
    nfds_t n_fds = 0;
    for (const Pipe& p : pipes) {
      if (!p.ended) fds[n_fds++] = {p.fd, POLLIN, 0};
    }
    int rc = poll(fds, n_fds, static_cast<int>(std::min<int64_t>(left_ms, 1 << 30)));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) return absl::DeadlineExceededError("timed out");
    for (nfds_t i = 0; i < n_fds; ++i) {
      if (fds[i].revents == 0) continue;
      Pipe& p = fds[i].fd == stdout_fd_ ? pipes[0] : pipes[1];
      char buf[4096];
      ssize_t n = read(p.fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        p.ended = true;
      } else {
        p.buffered.append(buf, static_cast<size_t>(n));
      }
    }
  }
}

bool ChildProcess::CloseStdin() {
  if (stdin_fd_ < 0) return false;
  close(stdin_fd_);
  stdin_fd_ = -1;
  return true;
}

std::optional<int> ChildProcess::Poll() {
  if (status_ || pid_ <= 0) return status_;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) status_ = WIFEXITED(st) ? WEXITSTATUS(st) : kKilledBySignal + WTERMSIG(st);
  return status_;
}

int ChildProcess::Stop(int sig, absl::Duration grace) {
  if (auto s = Poll()) return *s;
  kill(pid_, sig);
  absl::Time deadline = absl::Now() + grace;
  while (absl::Now() < deadline) {
    if (auto s = Poll()) return *s;
    absl::SleepFor(absl::Milliseconds(5));
  }
  if (auto s = Poll()) return *s;
  kill(pid_, SIGKILL);
  int st = 0;
  waitpid(pid_, &st, 0);
  status_ = WIFEXITED(st) ? WEXITSTATUS(st) : kKilledBySignal + WTERMSIG(st);
  return *status_;
}

std::string ChildProcess::Describe(int status) {
  if (status > kKilledBySignal) {
    const int sig = status - kKilledBySignal;
    const char* name = sigabbrev_np(sig);
    std::string text = absl::StrCat("killed by SIG", name ? name : absl::StrCat(sig));
    const int64_t before = OomKillsAtFirstChild();
    const int64_t now = sig == SIGKILL && before >= 0 ? OomKills() : -1;
    if (now > before) {
      absl::StrAppend(&text, " (the kernel's out-of-memory killer killed ", now - before, " process",
                      now - before == 1 ? "" : "es", " on this host meanwhile: out of memory?)");
    }
    return text;
  }
  return absl::StrCat("exited with status ", status);
}

void AdoptOrphans() { prctl(PR_SET_CHILD_SUBREAPER, 1); }

namespace {

// Our children, from /proc (waitpid cannot list them without reaping).
std::vector<pid_t> ChildrenOfSelf() {
  std::vector<pid_t> out;
  pid_t self = getpid();
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/stat");
    std::stringstream stat;
    stat << in.rdbuf();
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    std::string text = stat.str();
    size_t close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 1));
    char state = 0;
    long ppid = 0;
    if (rest >> state >> ppid && ppid == self) out.push_back(static_cast<pid_t>(pid));
  }
  closedir(proc);
  return out;
}

}  // namespace

int ReapOrphans(absl::Duration grace) {
  int reaped = 0;
  bool killed = false;
  absl::Time deadline = absl::Now() + grace;
  while (true) {
    int st = 0;
    pid_t r = waitpid(-1, &st, WNOHANG);
    if (r > 0) {
      ++reaped;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return reaped;  // ECHILD: none left
    if (!killed && absl::Now() >= deadline) {
      for (pid_t pid : ChildrenOfSelf()) kill(pid, SIGKILL);
      killed = true;
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
}

absl::Status CheckProgramFlag(const std::string& flag, const std::string& command,
                              const std::string& hint) {
  std::vector<std::string> words = absl::StrSplit(command, ' ', absl::SkipEmpty());
  if (words.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty; ", hint));
  }
  auto runnable = [](const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
  };
  const std::string& program = words[0];
  bool found = false;
  if (program.find('/') != std::string::npos) {
    found = runnable(program);
  } else if (const char* path = getenv("PATH")) {
    for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      if (runnable(absl::StrCat(dir, "/", program))) {
        found = true;
        break;
      }
    }
  }
  if (found) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", command, ": ", program,
                                                 program.find('/') != std::string::npos
                                                     ? " is not an executable file"
                                                     : " is not on $PATH",
                                                 "; ", hint));
}

}  // namespace psbench
