// Helpers for the end-to-end tests: run the real psbench binaries as child processes with
// bounded waits, capture what they print, and check that nothing is left running.
#ifndef PSBENCH_TESTS_INTEGRATION_RUN_HELPERS_H_
#define PSBENCH_TESTS_INTEGRATION_RUN_HELPERS_H_

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace psbench::testing {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Json = nlohmann::json;
using Argv = std::vector<std::string>;

// build/bin/<name>, and <source>/<relative>.
std::string BinPath(const std::string& name);
std::string SourcePath(const std::string& relative);

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  // Writes `content` to File(name) and returns that path.
  std::string Write(const std::string& name, const std::string& content) const;

 private:
  std::string path_;
};

std::string ReadFile(const std::string& path);
std::vector<std::string> Lines(const std::string& text);  // without the newlines

// A child process (argv[0] is a path) whose stdout and stderr go to files of its own. It
// dies with the test process (PR_SET_PDEATHSIG) and is stopped (SIGTERM, then SIGKILL) and
// reaped on destruction.
class Process {
 public:
  explicit Process(const Argv& argv);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  std::string Command() const;  // argv joined, for messages
  // Exit code, or 128 + signal number, once the child has exited (reaps it); else nullopt.
  std::optional<int> Poll();
  // Like Poll, waiting at most `timeout`.
  std::optional<int> Wait(milliseconds timeout);
  bool Running() { return !Poll().has_value(); }
  void Signal(int sig);
  // SIGTERM (or `sig`), then SIGKILL after `grace`; returns the status.
  int Stop(int sig = SIGTERM, milliseconds grace = seconds(3));
  std::string Stdout() const { return ReadFile(dir_.File("stdout")); }
  std::string Stderr() const { return ReadFile(dir_.File("stderr")); }

 private:
  Argv argv_;
  TempDir dir_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// What a finished command did.
struct RunResult {
  std::string command;
  int exit_code = -1;  // 128 + signal when killed
  bool timed_out = false;
  double seconds = 0;
  std::string out;
  std::string err;
  std::vector<std::string> ErrLines() const { return Lines(err); }
  // Everything, for assertion messages.
  std::string Describe() const;
};

// Runs a command to completion; kills it after `timeout` (then timed_out is set).
RunResult RunCommand(const Argv& argv, milliseconds timeout = seconds(60));

// A failure the way psbench reports one: not timed out, exit `code`, exactly one line on
// stderr, starting with "<program>: " and holding every keyword.
void ExpectOneLineFailure(const RunResult& r, int code, const std::string& program,
                          const std::vector<std::string>& keywords);

// `flags` are bad input to both `psbench run` and psbench-worker (given a PS that is not
// there, which the flags must fail before reaching): each exits 2 with one line naming
// `keywords`.
void ExpectRunAndWorkerRefuse(const std::vector<std::string>& flags, const std::vector<std::string>& keywords);

inline Argv Concat(Argv a, const Argv& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The command lines of the three binaries.
Argv WorkerArgv(const std::string& ps, const Argv& flags);  // psbench-worker --ps=PS flags...
Argv RunArgv(const Argv& flags);                            // psbench run flags...
Argv PsArgv(const Argv& flags);                             // psbench-ps flags...

// A psbench-ps on 127.0.0.1 and a port of its own choosing.
class PsServer {
 public:
  // Starts it and waits (at most 20 s) for "psbench-ps listening on 127.0.0.1:PORT ...".
  // Returns nullptr, after reporting a test failure with the reason, when it did not start.
  static std::unique_ptr<PsServer> Start(const Argv& flags = {});
  // The same with these VAR=VALUE in its environment.
  static std::unique_ptr<PsServer> Start(const Argv& flags, const Argv& env);

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  Process& process() { return *process_; }

 private:
  PsServer() = default;
  std::unique_ptr<Process> process_;
  int port_ = 0;
};

// Stops `ps` with SIGTERM (expecting exit 0) and returns the JSON of its last line,
// "psbench-ps applied updates: JSON" (what its parameter store applied); null, after a test
// failure, when there is none.
Json StopAndReadAppliedUpdates(PsServer& ps);

// A TCP port on 127.0.0.1 that is bound (so no one else gets it) but not listening:
// connecting to it is refused.
class ClosedPort {
 public:
  ClosedPort();
  ~ClosedPort();
  ClosedPort(const ClosedPort&) = delete;
  ClosedPort& operator=(const ClosedPort&) = delete;
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Processes as /proc shows them.
struct ProcInfo {
  pid_t pid = 0;
  pid_t ppid = 0;
  char state = '?';  // 'Z' for a zombie
  std::string comm;
  std::string cmdline;  // arguments joined by spaces
};
std::vector<ProcInfo> ChildrenOf(pid_t parent);
// Whether `pid` is a live process (not gone, not a zombie).
bool Alive(pid_t pid);
// Waits (at most `timeout`) until `parent` has a live child whose comm is `comm` and whose
// command line holds `cmdline_has` (a child in the middle of exec can show its new comm
// before its new command line).
std::optional<ProcInfo> WaitForChild(pid_t parent, const std::string& comm, milliseconds timeout,
                                     const std::string& cmdline_has = "");
// The scenario a launcher handed a psbench-worker (--scenario-base64), or null.
nlohmann::json WorkerScenario(const ProcInfo& worker);
// Waits (at most `timeout`) for a live psbench-worker child of `parent` that is worker
// `index` of the driver's run number `run` (its run id ends with "-RUN").
std::optional<ProcInfo> WaitForWorkerOfRun(pid_t parent, int run, int index, milliseconds timeout);

// Waits until the worker writing `progress_file` (--progress-file) is measuring. A fixed
// sleep is not enough: under a sanitizer, starting a worker alone can take longer.
bool WaitUntilMeasuring(const std::string& progress_file, milliseconds timeout);

// A small psbench-trace/2 for --replay=timed, written into `tmp`: four tensors (a, b, c, d:
// 4096, 40000, 256 and 65536 bytes) in two buckets ({3, 2} ready at 20 ms, {1, 0} at 45 ms),
// three steps of 60 ms compute; step 1 has no gradient for tensor 0. Returns its path.
std::string WriteTimedTrace(const TempDir& tmp);

// One JSON object per non-empty line; a malformed line is a test failure.
std::vector<Json> ReadJsonLines(const std::string& path);

// A worker record's "moved" (bench/moved.h) proves that `transport`'s data plane carried every
// payload byte, counted on both sides, and gRPC none of them: the plane named; the worker's
// payload bytes both ways equal to the benchmark's own count (and not zero); every PS serving
// that plane and, together, taking at least what this worker sent; other than over grpc, no
// gRPC payload call from the worker's process.
void ExpectMovedOver(const Json& record, const std::string& transport);
// ExpectMovedOver for every record but totals (which carry none); returns how many it checked.
size_t ExpectAllMovedOver(const std::vector<Json>& records, const std::string& transport);

// Base fixture: makes the test process a child subreaper, so that any process the
// binaries leave behind is re-parented to it, and fails the test (killing and reaping them)
// if any live process is left when the test ends.
class IntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
};

// Fails the test for every live child of this process, then kills and reaps them all.
void ExpectNoChildrenLeft();

// Checks the malloc policy a psbench process or floor recorded (bench/process/alloc_policy.h):
// fixed at 32 MiB, unless GLIBC_TUNABLES tunes malloc in this environment, or a sanitizer's
// allocator (in a sanitized build of this test) refused mallopt.
void ExpectAllocatorPolicy(const Json& allocator);

}  // namespace psbench::testing

#endif  // PSBENCH_TESTS_INTEGRATION_RUN_HELPERS_H_
