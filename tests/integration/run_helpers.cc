#include "tests/integration/run_helpers.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "absl/strings/escaping.h"

namespace psbench::testing {
namespace {

constexpr milliseconds kPollInterval(5);

int StatusCode(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

std::string Join(const Argv& argv) {
  std::string out;
  for (const auto& a : argv) out += (out.empty() ? "" : " ") + a;
  return out;
}

std::string Truncated(const std::string& text, size_t max = 6000) {
  if (text.size() <= max) return text;
  return text.substr(0, max / 2) + "\n[... " + std::to_string(text.size() - max) +
         " bytes ...]\n" + text.substr(text.size() - max / 2);
}

}  // namespace

// PSBENCH_BIN_DIR in the environment: the binaries were moved (a bundle on a GPU machine).
std::string BinPath(const std::string& name) {
  const char* moved = std::getenv("PSBENCH_BIN_DIR");
  return std::string(moved != nullptr && *moved != '\0' ? moved : PSBENCH_BIN_DIR) + "/" + name;
}

std::string SourcePath(const std::string& relative) {
  return std::string(PSBENCH_SOURCE_DIR) + "/" + relative;
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/psbench-it-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp(" << tmpl << "): " << std::strerror(errno);
  }
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::Write(const std::string& name, const std::string& content) const {
  std::string file = File(name);
  std::ofstream(file) << content;
  return file;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

Process::Process(const Argv& argv) : argv_(argv) {
  int out = open(dir_.File("stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int err = open(dir_.File("stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<char*> args;
  for (const auto& a : argv_) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(in, STDIN_FILENO);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    execv(args[0], args.data());
    static const char kMsg[] = "exec failed\n";
    (void)!write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
    _exit(127);
  }
  if (pid_ < 0) ADD_FAILURE() << "fork: " << std::strerror(errno);
  close(in);
  close(out);
  close(err);
}

Process::~Process() {
  // SIGTERM first, so that a psbench run stopped early still takes its children with it.
  if (pid_ > 0 && !status_) Stop(SIGTERM, seconds(2));
}

std::string Process::Command() const { return Join(argv_); }

std::optional<int> Process::Poll() {
  if (status_ || pid_ <= 0) return status_;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) status_ = StatusCode(st);
  return status_;
}

std::optional<int> Process::Wait(milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (!Poll() && Clock::now() < deadline) std::this_thread::sleep_for(kPollInterval);
  return Poll();
}

void Process::Signal(int sig) {
  if (pid_ > 0 && !Poll()) kill(pid_, sig);
}

int Process::Stop(int sig, milliseconds grace) {
  if (pid_ <= 0) return -1;
  Signal(sig);
  if (auto st = Wait(grace)) return *st;
  kill(pid_, SIGKILL);
  int st = 0;
  waitpid(pid_, &st, 0);
  status_ = StatusCode(st);
  return *status_;
}

std::string RunResult::Describe() const {
  std::ostringstream s;
  s << "command: " << command << "\n"
    << (timed_out ? "TIMED OUT, killed; " : "") << "exit code " << exit_code << " after "
    << seconds << " s\n--- stdout ---\n"
    << Truncated(out) << "--- stderr ---\n"
    << Truncated(err) << "--------------";
  return s.str();
}

RunResult RunCommand(const Argv& argv, milliseconds timeout) {
  RunResult r;
  r.command = Join(argv);
  auto start = Clock::now();
  Process p(argv);
  std::optional<int> status = p.Wait(timeout);
  if (!status) {
    r.timed_out = true;
    status = p.Stop(SIGTERM, seconds(3));
  }
  r.exit_code = *status;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.out = p.Stdout();
  r.err = p.Stderr();
  return r;
}

Argv WorkerArgv(const std::string& ps, const Argv& flags) {
  Argv argv = {BinPath("psbench-worker"), "--ps=" + ps};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return argv;
}

Argv RunArgv(const Argv& flags) {
  Argv argv = {BinPath("psbench"), "run"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return argv;
}

Argv PsArgv(const Argv& flags) {
  Argv argv = {BinPath("psbench-ps")};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return argv;
}

std::unique_ptr<PsServer> PsServer::Start(const Argv& flags) { return Start(flags, {}); }

std::unique_ptr<PsServer> PsServer::Start(const Argv& flags, const Argv& env) {
  // No --listen: a PS serves loopback unless told otherwise, which the first line shows.
  Argv args = {"--port=0"};
  args.insert(args.end(), flags.begin(), flags.end());
  std::unique_ptr<PsServer> ps(new PsServer);
  // env(1) execs the PS in its own place: the pid stays the one the first line names.
  ps->process_ = std::make_unique<Process>(env.empty() ? PsArgv(args)
                                                       : Concat(Concat({"/usr/bin/env"}, env), PsArgv(args)));
  static const std::regex kListening(
      R"(psbench-ps listening on 127\.0\.0\.1:(\d+) transport=grpc pid=(\d+) cpus=\S+ host=\S+)");
  auto deadline = Clock::now() + seconds(20);
  while (Clock::now() < deadline) {
    std::string out = ps->process_->Stdout();
    if (auto nl = out.find('\n'); nl != std::string::npos) {
      std::string line = out.substr(0, nl);
      std::smatch m;
      if (!std::regex_match(line, m, kListening)) {
        ADD_FAILURE() << "psbench-ps: unexpected first line '" << line << "'";
        return nullptr;
      }
      if (std::stoi(m[2]) != ps->process_->pid()) {
        ADD_FAILURE() << "psbench-ps reports pid " << m[2] << ", its pid is "
                      << ps->process_->pid();
        return nullptr;
      }
      ps->port_ = std::stoi(m[1]);
      return ps;
    }
    if (auto st = ps->process_->Poll()) {
      ADD_FAILURE() << "psbench-ps exited (status " << *st << ") before listening: "
                    << ps->process_->Stderr();
      return nullptr;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  ADD_FAILURE() << "psbench-ps printed no 'listening' line within 20 s";
  return nullptr;
}

ClosedPort::ClosedPort() {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ADD_FAILURE() << "cannot reserve a port: " << std::strerror(errno);
    return;
  }
  port_ = ntohs(addr.sin_port);
}

ClosedPort::~ClosedPort() {
  if (fd_ >= 0) close(fd_);
}

bool Alive(pid_t pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

void ExpectOneLineFailure(const RunResult& r, int code, const std::string& program,
                          const std::vector<std::string>& keywords) {
  EXPECT_FALSE(r.timed_out) << r.Describe();
  EXPECT_EQ(r.exit_code, code) << r.Describe();
  std::vector<std::string> lines = r.ErrLines();
  ASSERT_EQ(lines.size(), 1u) << "exactly one line on stderr\n" << r.Describe();
  EXPECT_EQ(lines[0].rfind(program + ": ", 0), 0u) << r.Describe();
  for (const std::string& k : keywords) {
    EXPECT_NE(lines[0].find(k), std::string::npos) << "names '" << k << "'\n" << r.Describe();
  }
}

std::vector<ProcInfo> ChildrenOf(pid_t parent) {
  std::vector<ProcInfo> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    std::string dir = std::string("/proc/") + e->d_name;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split at the
    // last ')'.
    std::string stat = ReadFile(dir + "/stat");
    size_t open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close + 4 > stat.size()) {
      continue;  // exited meanwhile
    }
    ProcInfo info;
    info.pid = static_cast<pid_t>(pid);
    info.comm = stat.substr(open + 1, close - open - 1);
    std::istringstream rest(stat.substr(close + 2));
    rest >> info.state >> info.ppid;
    if (info.ppid != parent) continue;
    info.cmdline = ReadFile(dir + "/cmdline");
    for (char& c : info.cmdline) c = c == '\0' ? ' ' : c;
    out.push_back(std::move(info));
  }
  closedir(proc);
  return out;
}

std::optional<ProcInfo> WaitForChild(pid_t parent, const std::string& comm, milliseconds timeout,
                                     const std::string& cmdline_has) {
  auto deadline = Clock::now() + timeout;
  do {
    for (const ProcInfo& c : ChildrenOf(parent)) {
      if (c.comm == comm && c.state != 'Z' && !c.cmdline.empty() &&
          c.cmdline.find(cmdline_has) != std::string::npos) {
        return c;
      }
    }
    std::this_thread::sleep_for(milliseconds(10));
  } while (Clock::now() < deadline);
  return std::nullopt;
}

Json WorkerScenario(const ProcInfo& worker) {
  static const std::string kFlag = "--scenario-base64=";
  size_t at = worker.cmdline.find(kFlag);
  if (at == std::string::npos) return nullptr;
  std::string encoded = worker.cmdline.substr(at + kFlag.size());
  encoded = encoded.substr(0, encoded.find(' '));
  std::string text;
  if (!absl::WebSafeBase64Unescape(encoded, &text)) return nullptr;
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? Json(nullptr) : j;
}

std::optional<ProcInfo> WaitForWorkerOfRun(pid_t parent, int run, int index, milliseconds timeout) {
  const std::string suffix = "-" + std::to_string(run);
  const std::string flag = "--worker-index=" + std::to_string(index) + " ";
  auto deadline = Clock::now() + timeout;
  do {
    for (const ProcInfo& c : ChildrenOf(parent)) {
      if (c.comm != "psbench-worker" || c.state == 'Z' || c.cmdline.find(flag) == std::string::npos) continue;
      Json s = WorkerScenario(c);
      if (!s.is_object() || !s.contains("run_id") || !s["run_id"].is_string()) continue;
      std::string id = s["run_id"];
      if (id.size() >= suffix.size() && id.compare(id.size() - suffix.size(), suffix.size(), suffix) == 0) return c;
    }
    std::this_thread::sleep_for(milliseconds(10));
  } while (Clock::now() < deadline);
  return std::nullopt;
}

std::vector<Json> ReadJsonLines(const std::string& path) {
  std::vector<Json> records;
  for (const std::string& line : Lines(ReadFile(path))) {
    if (line.empty()) continue;
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      ADD_FAILURE() << path << ": not a JSON object: " << Truncated(line, 400);
      continue;
    }
    records.push_back(std::move(j));
  }
  return records;
}

void ExpectMovedOver(const Json& record, const std::string& transport) {
  const std::string plane = transport == "grpc+verbs" ? "rdma" : transport == "grpc+mpi" ? "mpi" : transport;
  const Json& m = record.value("moved", Json());
  ASSERT_TRUE(m.is_object()) << "no \"moved\" in " << Truncated(record.dump(), 400);
  auto u = [](const Json& j, const char* key) { return j.value(key, uint64_t{0}); };
  for (const char* key : {"worker", "ps", "grpc_payload", "control"}) ASSERT_TRUE(m.contains(key)) << key << ": " << m.dump();
  EXPECT_EQ(m.value("plane", ""), plane) << m.dump();
  EXPECT_EQ(m.value("agrees", false), true) << m.dump();
  const Json& worker = m.at("worker");
  EXPECT_GT(u(m, "payload_bytes_sent"), 0u) << m.dump();
  EXPECT_GT(u(worker, "messages_sent"), 0u) << m.dump();
  EXPECT_EQ(u(worker, "payload_bytes_sent"), u(m, "payload_bytes_sent")) << m.dump();
  EXPECT_EQ(u(worker, "payload_bytes_received"), u(m, "payload_bytes_received")) << m.dump();
  uint64_t ps_received = 0;
  for (const Json& p : m.at("ps")) {
    EXPECT_EQ(p.value("plane", ""), plane) << m.dump();
    ps_received += u(p, "payload_bytes_received");
  }
  EXPECT_GE(ps_received, u(m, "payload_bytes_sent")) << m.dump();
  if (plane != "grpc") {
    EXPECT_EQ(u(m.at("grpc_payload"), "messages_sent"), 0u) << m.dump();
    EXPECT_EQ(u(m.at("grpc_payload"), "bytes_sent"), 0u) << m.dump();
  }
}

size_t ExpectAllMovedOver(const std::vector<Json>& records, const std::string& transport) {
  size_t checked = 0;
  for (const Json& r : records) {
    if (r.value("scope", "") == "total" || r.value("kind", "") == "train_total") continue;
    ExpectMovedOver(r, transport);
    ++checked;
  }
  return checked;
}

void ExpectAllocatorPolicy(const Json& allocator) {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::string(tunables).find("glibc.malloc.") != std::string::npos) {
    EXPECT_EQ(allocator.value("policy", ""), "GLIBC_TUNABLES") << allocator.dump();
    return;
  }
  // The sanitizers' allocators take no mallopt (gcc says so with __SANITIZE_*__, clang with
  // __has_feature).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  if (allocator.value("policy", "") == "not fixed: mallopt refused") return;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  if (allocator.value("policy", "") == "not fixed: mallopt refused") return;
#endif
#endif
  EXPECT_EQ(allocator.value("policy", ""), "fixed") << allocator.dump();
  EXPECT_EQ(allocator.value("mmap_threshold", 0), 32 << 20) << allocator.dump();
}

void ExpectNoChildrenLeft() {
  for (const ProcInfo& c : ChildrenOf(getpid())) {
    if (c.state == 'Z') continue;  // already dead; reaped below
    ADD_FAILURE() << "process left behind: pid " << c.pid << " (" << c.comm << "): " << c.cmdline;
    kill(c.pid, SIGKILL);
  }
  auto deadline = Clock::now() + seconds(5);
  while (true) {
    int st = 0;
    pid_t r = waitpid(-1, &st, WNOHANG);
    if (r > 0) continue;
    if (r < 0 || Clock::now() > deadline) break;  // ECHILD: nothing left
    std::this_thread::sleep_for(kPollInterval);
  }
}

void IntegrationTest::SetUp() {
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0) << std::strerror(errno);
}

void IntegrationTest::TearDown() { ExpectNoChildrenLeft(); }

Json StopAndReadAppliedUpdates(PsServer& ps) {
  EXPECT_EQ(ps.process().Stop(SIGTERM), 0) << ps.process().Stderr();
  const std::string prefix = "psbench-ps applied updates: ";
  for (const std::string& line : Lines(ps.process().Stdout())) {
    if (line.rfind(prefix, 0) == 0) return Json::parse(line.substr(prefix.size()));
  }
  ADD_FAILURE() << "no '" << prefix << "' line in:\n" << ps.process().Stdout();
  return Json();
}

bool WaitUntilMeasuring(const std::string& progress_file, milliseconds timeout) {
  const auto end = Clock::now() + timeout;
  while (Clock::now() < end) {
    std::ifstream in(progress_file);
    std::string line, last;
    while (std::getline(in, line)) {
      if (!line.empty()) last = line;
    }
    Json j = Json::parse(last, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("phase", 0) == 2 && j.value("phase_ops", uint64_t{0}) > 0)
      return true;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return false;
}

// Four tensors in two buckets ({3, 2} ready at 20 ms, {1, 0} at 45 ms), three steps of 60 ms
// compute; step 1 has no gradient for tensor 0 (its bucket then waits for the compute's end).
std::string WriteTimedTrace(const TempDir& tmp) {
  const std::string path = tmp.File("timed.json");
  std::ofstream(path) << R"({"format": "psbench-trace/2",
 "tensors": [{"name": "a", "dtype": "float32", "bytes": 4096}, {"name": "b", "dtype": "float32", "bytes": 40000},
             {"name": "c", "dtype": "float32", "bytes": 256}, {"name": "d", "dtype": "float32", "bytes": 65536}],
 "buckets": {"tensors": [[3, 2], [1, 0]]},
 "steps": [
  {"start_us": 0, "compute_us": 60000, "ready_us": [45000, 44000, 20000, 19000], "bucket_ready_us": [20000, 45000]},
  {"start_us": 70000, "compute_us": 60000, "ready_us": [null, 44000, 20000, 19000], "bucket_ready_us": [20000, null]},
  {"start_us": 140000, "compute_us": 60000, "ready_us": [45000, 44000, 20000, 19000], "bucket_ready_us": [20000, 45000]}
 ]})";
  return path;
}

void ExpectRunAndWorkerRefuse(const std::vector<std::string>& flags, const std::vector<std::string>& keywords) {
  ClosedPort nobody;
  ExpectOneLineFailure(RunCommand(RunArgv(flags)), 2, "psbench", keywords);
  ExpectOneLineFailure(RunCommand(WorkerArgv(nobody.address(), flags)), 2, "psbench-worker", keywords);
}

}  // namespace psbench::testing
