#include "cli/launch/launchers.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <csignal>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "bench/scenario_flags.h"
#include "cli/launch/demux.h"
#include "inputs/input_file.h"

namespace psbench {
namespace {

bool ValidHost(absl::string_view host) {
  if (host.empty() || host.size() > 253 || host[0] == '-') return false;
  return std::all_of(host.begin(), host.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '.' || c == '-' || c == '_' || c == ':' || c == '@';
  });
}

// The distinct hosts of `hosts`, in first-seen order.
std::vector<std::string> Distinct(const std::vector<std::string>& hosts) {
  std::vector<std::string> out;
  for (const auto& h : hosts) {
    if (std::find(out.begin(), out.end(), h) == out.end()) out.push_back(h);
  }
  return out;
}

}  // namespace

// srun's report of tasks that ended badly, e.g. "srun: error: node1: task 1: Killed" or
// "srun: error: node1: task 0-2,5: Exited with exit code 3" -> (task, kKilledBySignal + signal |
// code).
std::vector<std::pair<int, int>> SrunTaskExits(const std::string& line) {
  if (!absl::StartsWith(line, "srun: error: ")) return {};
  // ": task LIST: WHAT" or ": tasks LIST: WHAT", LIST being digits, commas and dashes.
  size_t list_at = std::string::npos;
  for (const char* marker : {": task ", ": tasks "}) {
    if (size_t at = line.find(marker); at != std::string::npos && (list_at == std::string::npos || at < list_at)) {
      list_at = at + strlen(marker);
    }
  }
  if (list_at == std::string::npos) return {};
  const size_t list_end = line.find(": ", list_at);
  if (list_end == std::string::npos || list_end == list_at ||
      line.find_first_not_of("0123456789,-", list_at) != list_end) {
    return {};
  }
  const std::string list = line.substr(list_at, list_end - list_at);
  const std::string rest = line.substr(list_end + 2);
  if (rest.empty()) return {};
  static constexpr absl::string_view kExited = "Exited with exit code ";
  int status = 1;
  if (absl::StartsWith(rest, kExited)) {
    if (!absl::SimpleAtoi(absl::string_view(rest).substr(kExited.size()), &status)) return {};
  } else {
    std::string what = rest;
    if (auto core = what.find(" (core dumped)"); core != std::string::npos) what.erase(core);
    bool named = false;
    for (int sig = 1; sig < NSIG && !named; ++sig) {
      if (const char* text = strsignal(sig); text != nullptr && what == text) {
        status = kKilledBySignal + sig;
        named = true;
      }
    }
    if (!named) return {};  // some other error of srun's, not a task's end
  }
  std::vector<std::pair<int, int>> out;
  for (absl::string_view range : absl::StrSplit(list, ',')) {
    std::vector<absl::string_view> ends = absl::StrSplit(range, '-');
    int lo = 0, hi = 0;
    if (ends.empty() || ends.size() > 2 || !absl::SimpleAtoi(ends.front(), &lo) ||
        !absl::SimpleAtoi(ends.back(), &hi) || hi < lo || hi - lo > 100000) {
      continue;
    }
    for (int t = lo; t <= hi; ++t) out.emplace_back(t, status);
  }
  return out;
}

std::optional<ProcessGroup::Failure> FailedRankFromMpirunOutput(const std::string& log, int ranks) {
  struct Marker {
    const char* text;   // precedes the rank number
    const char* after;  // what happened: follows the rank on the same line, from here
    const char* what;   // or, when null, this
  };
  // Open MPI 4: "process rank 1 with PID 123 on node vm exited on signal 9 (Killed).",
  // "MPI_ABORT was invoked on rank 2 in communicator ...", "Process name: [[4711,1],3]".
  // In that order: a rank that was killed, the first to exit non-zero, one that aborted.
  for (const Marker& m : {Marker{"process rank ", " exited ", nullptr},
                          Marker{"Process name: [[", nullptr, "exited with a non-zero status"},
                          Marker{"invoked on rank ", nullptr, "called MPI_Abort"}}) {
    size_t at = log.find(m.text);
    if (at == std::string::npos) continue;
    at += strlen(m.text);
    if (m.text[0] == 'P') {  // [[jobid,1],rank]
      at = log.find("],", at);
      if (at == std::string::npos) continue;
      at += 2;
    }
    int rank = -1;
    size_t end = log.find_first_not_of("0123456789", at);
    if (!absl::SimpleAtoi(log.substr(at, end - at), &rank) || rank < 0 || rank >= ranks) continue;
    std::string what = m.what ? m.what : "failed";
    if (m.after) {
      size_t line_end = log.find('\n', at);
      size_t from = log.find(m.after, at);
      if (from != std::string::npos && from < line_end) {
        what = log.substr(from + 1, line_end - from - 1);
        while (!what.empty() && what.back() == '.') what.pop_back();
      }
    }
    return ProcessGroup::Failure{rank, what};
  }
  return std::nullopt;
}

// Under mpirun a rank that fails ends its job: Open MPI aborts the others. So each worker
// runs under a shell that reports how it ended, on its stderr, and exits 0: the other workers
// run on, as under every launcher. (mpirun signals each rank's process group, so stopping the
// job still reaches the worker.)
constexpr absl::string_view kRankExit = "psbench-rank-exit ";

std::vector<std::string> ReportingRank(const std::vector<std::string>& argv) {
  std::vector<std::string> out = {"/bin/sh", "-c", absl::StrCat("\"$@\"; echo ", kRankExit, "$? >&2; exit 0"),
                                  "psbench-rank"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

std::vector<std::pair<int, int>> RankExits(const ProcessGroup::Line& line) {
  int status = 0;
  if (line.member < 0 || !line.from_stderr || !absl::StartsWith(line.text, kRankExit) ||
      !absl::SimpleAtoi(absl::string_view(line.text).substr(kRankExit.size()), &status) ||
      status < 0 || status > 255) {
    return {};
  }
  // The shell reports a signal as 128 + N; psbench's programs never exit above 2 themselves.
  if (status > 128) status = kKilledBySignal + status - 128;
  return {{line.member, status}};
}

namespace {

class LocalLauncher : public Launcher {
 public:
  explicit LocalLauncher(int slots) : slots_(slots, "localhost") {}
  std::string name() const override { return "local"; }
  const std::vector<std::string>& slots() const override { return slots_; }

  absl::StatusOr<std::unique_ptr<ProcessGroup>> Start(
      const std::string& step, const std::vector<LaunchMember>& members) override {
    std::vector<ChildProcess> children;
    for (const LaunchMember& m : members) {
      auto child = ChildProcess::Start(m.name, m.argv, {.capture_stdout = true});
      if (!child.ok()) return child.status();
      children.push_back(*std::move(child));
    }
    return GroupOfChildren(std::move(children));
  }

 private:
  std::vector<std::string> slots_;
};

class SshLauncher : public Launcher {
 public:
  SshLauncher(std::vector<std::string> slots, std::vector<std::string> ssh)
      : slots_(std::move(slots)), ssh_(std::move(ssh)) {}
  std::string name() const override { return "ssh"; }
  const std::vector<std::string>& slots() const override { return slots_; }
  // The remote process reads its stdin, which ssh keeps open while we live: when we go, so
  // does the session, and the process sees the end of its stdin.
  std::vector<std::string> ProcessFlags() const override { return {"--exit-on-stdin-close"}; }

  absl::StatusOr<std::unique_ptr<ProcessGroup>> Start(
      const std::string& step, const std::vector<LaunchMember>& members) override {
    std::vector<ChildProcess> children;
    for (const LaunchMember& m : members) {
      std::vector<std::string> quoted;
      for (const auto& a : m.argv) quoted.push_back(ShellQuote(a));
      std::vector<std::string> argv = ssh_;
      // -T: no terminal (stdout stays clean lines); the remote command runs in the login shell.
      argv.push_back("-T");
      argv.push_back(m.host);
      argv.push_back("exec " + absl::StrJoin(quoted, " "));
      auto child = ChildProcess::Start(absl::StrCat(m.name, " on ", m.host), argv,
                                       {.capture_stdout = true, .hold_stdin = true});
      if (!child.ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat(child.status().message(), " (give the ssh client with --ssh=COMMAND)"));
      }
      children.push_back(*std::move(child));
    }
    return GroupOfChildren(std::move(children), &DescribeSshStatus);
  }

 private:
  // ssh passes on the remote command's exit status, and exits 255 for its own failures and
  // for a remote command killed by a signal (which then has no status to pass on).
  static std::string DescribeSshStatus(int status) {
    if (status != 255) return ChildProcess::Describe(status);
    return "ended with ssh's status 255 (ssh could not connect, log in or start the command, "
           "or the remote process was killed by a signal)";
  }

  std::vector<std::string> slots_;
  std::vector<std::string> ssh_;
};

class SlurmLauncher : public Launcher {
 public:
  SlurmLauncher(std::vector<std::string> slots, std::string srun, std::vector<std::string> args,
                std::string work_dir)
      : slots_(std::move(slots)), srun_(std::move(srun)), args_(std::move(args)),
        work_dir_(std::move(work_dir)) {}
  std::string name() const override { return "slurm"; }
  const std::vector<std::string>& slots() const override { return slots_; }
  bool StartsMpiJobs() const override { return true; }

  absl::StatusOr<std::unique_ptr<ProcessGroup>> Start(
      const std::string& role, const std::vector<LaunchMember>& members) override {
    // One job step; task i runs line i of the --multi-prog file (srun's own quoting: single
    // quotes keep an argument whole).
    std::string conf = absl::StrCat(work_dir_, "/", role, ".multi-prog");
    std::ofstream file(conf);
    std::vector<std::string> hosts, names;
    // The PS step ends cleanly: srun forwards its stdin to every task, and when psbench closes
    // it each PS stops as told and exits 0. A signal would have srun cancel the step, print
    // its cancellation as errors after every run that went well, and SIGKILL the PS.
    const bool ps = role == "ps";
    for (size_t i = 0; i < members.size(); ++i) {
      std::vector<std::string> quoted;
      for (const auto& a : members[i].argv) quoted.push_back(ShellQuote(a));
      if (ps) quoted.push_back("--exit-on-stdin-close");
      file << i << " " << absl::StrJoin(quoted, " ") << "\n";
      hosts.push_back(members[i].host);
      names.push_back(absl::StrCat(members[i].name, " on ", members[i].host));
    }
    file.close();
    if (!file) return absl::InternalError(absl::StrCat("cannot write ", conf));
    std::vector<std::string> nodes = Distinct(hosts);
    std::vector<std::string> argv = {srun_,
                                     // Steps of one allocation share its CPUs: the PS step
                                     // and the worker step run side by side.
                                     "--overlap",
                                     // A worker that fails leaves the others running, as under
                                     // every launcher (its survivors' records are kept); a PS
                                     // or an MPI job's rank fails the whole step.
                                     "--label", role == "workers" ? "--kill-on-bad-exit=0" : "--kill-on-bad-exit=1",
                                     absl::StrCat("--ntasks=", members.size()),
                                     absl::StrCat("--nodes=", nodes.size()),
                                     "--nodelist=" + absl::StrJoin(nodes, ","),
                                     "--job-name=psbench-" + role};
    if (ps) argv.push_back("--input=all");  // before --srun-args: a user's --input wins
    for (const auto& a : args_) argv.push_back(a);
    // One MPI job (grpc+mpi) needs a PMI for its ranks to find each other; Open MPI takes PMIx.
    if (role == "job" && std::none_of(args_.begin(), args_.end(), [](const std::string& a) {
          return absl::StartsWith(a, "--mpi");
        })) {
      argv.push_back("--mpi=pmix");
    }
    argv.push_back("--multi-prog");
    argv.push_back(conf);
    // The workers' step: srun's own stderr is read too, where it reports each task that ended
    // badly, on a pipe of its own: srun forwards a task's stderr there, labelled as its stdout
    // is, and one pipe for both could put a stderr line between two chunks of a long record.
    const bool workers = role == "workers";
    auto child = ChildProcess::Start("srun (" + role + ")", argv,
                                     {.capture_stdout = true, .hold_stdin = ps, .capture_stderr = workers});
    if (!child.ok()) return child.status();
    return GroupBehindLauncher(*std::move(child), SrunLabelDemux(), std::move(names), nullptr,
                               workers ? MemberExits([](const ProcessGroup::Line& l) {
                                 return l.member < 0 ? SrunTaskExits(l.text) : std::vector<std::pair<int, int>>{};
                               })
                                       : nullptr);
  }

 private:
  std::vector<std::string> slots_;
  std::string srun_;
  std::vector<std::string> args_;
  std::string work_dir_;
};

class MpirunLauncher : public Launcher {
 public:
  MpirunLauncher(std::vector<std::string> slots, std::string mpirun, std::vector<std::string> args)
      : slots_(std::move(slots)), mpirun_(std::move(mpirun)), args_(std::move(args)) {}
  std::string name() const override { return "mpirun"; }
  const std::vector<std::string>& slots() const override { return slots_; }
  bool StartsMpiJobs() const override { return true; }

  absl::Status Check() const override {
    return CheckProgramFlag("mpirun", mpirun_,
                            "grpc+mpi and psbench mpirun need Open MPI's mpirun "
                            "(deploy/install-deps.sh installs openmpi-bin; or give --mpirun=PATH)");
  }

  absl::StatusOr<std::unique_ptr<ProcessGroup>> Start(
      const std::string& role, const std::vector<LaunchMember>& members) override {
    // MPMD: one app context per process, pinned to its host, so rank i is members[i]. Open
    // MPI refuses root without --allow-run-as-root, and more ranks than cores without
    // --oversubscribe; --bind-to none leaves placement to --ps-cpu and --worker-cpu.
    std::vector<std::string> argv = {mpirun_};
    if (geteuid() == 0) argv.push_back("--allow-run-as-root");
    for (const char* a : {"--oversubscribe", "--bind-to", "none", "--tag-output"}) argv.push_back(a);
    for (const auto& a : args_) argv.push_back(a);
    std::vector<std::string> names;
    // Workers are not one MPI job's ranks (that is the "job" step): each reports its own end.
    const bool workers = role == "workers";
    // Each host offers as many slots as this job places ranks on it. A bare `--host H` offers
    // one, and Open MPI then takes two ranks on one host for oversubscription and makes every
    // MPI call yield the CPU when it finds nothing to do (mpi_yield_when_idle): a system call
    // inside each of psbench's polls, which doubled the 32 B round trip here, and which a
    // user's own mpirun of two ranks on one machine does not do. psbench's polling loop yields
    // on its own when idle (IdleBackoff).
    absl::flat_hash_map<std::string, int> ranks_on;
    for (const LaunchMember& m : members) ++ranks_on[m.host];
    for (size_t i = 0; i < members.size(); ++i) {
      if (i > 0) argv.push_back(":");
      for (const std::string& a : {std::string("-np"), std::string("1"), std::string("--host"),
                                   absl::StrCat(members[i].host, ":", ranks_on[members[i].host])}) {
        argv.push_back(a);
      }
      const std::vector<std::string> rank = workers ? ReportingRank(members[i].argv) : members[i].argv;
      argv.insert(argv.end(), rank.begin(), rank.end());
      names.push_back(absl::StrCat(members[i].name, " (MPI rank ", i, ")"));
    }
    // mpirun's own stderr says which rank failed; the ranks' stderr comes back tagged.
    auto child = ChildProcess::Start("mpirun (" + role + ")", argv,
                                     {.capture_stdout = true, .stderr_to_stdout = true});
    if (!child.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          child.status().message(), " (install openmpi-bin, or give --mpirun=PATH)"));
    }
    int ranks = static_cast<int>(members.size());
    return GroupBehindLauncher(*std::move(child), MpirunTagDemux(), std::move(names),
                               [ranks](const std::string& text) { return FailedRankFromMpirunOutput(text, ranks); },
                               workers ? MemberExits(RankExits) : nullptr);
  }

 private:
  std::vector<std::string> slots_;
  std::string mpirun_;
  std::vector<std::string> args_;
};

// Runs `argv` and returns its stdout (for scontrol).
absl::StatusOr<std::string> Capture(const std::vector<std::string>& argv) {
  // Its stderr is read too: passed through, its lines would break psbench's one line.
  auto child = ChildProcess::Start(argv[0], argv, {.capture_stdout = true, .hold_stdin = false, .capture_stderr = true});
  if (!child.ok()) return child.status();
  std::string out, first_error;
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (true) {
    auto line = child->ReadOutput(deadline);
    if (!line.ok()) {
      if (line.status().code() == absl::StatusCode::kUnavailable) break;
      child->Stop(SIGKILL, absl::ZeroDuration());
      return absl::DeadlineExceededError(absl::StrCat(argv[0], " did not answer within 30 s"));
    }
    if (!line->from_stderr) {
      absl::StrAppend(&out, line->text, "\n");
    } else if (first_error.empty()) {
      first_error = line->text;
    }
  }
  if (int st = child->Stop(SIGTERM, absl::Seconds(5)); st != 0) {
    return absl::InternalError(absl::StrCat(absl::StrJoin(argv, " "), " ", ChildProcess::Describe(st),
                                            first_error.empty() ? "" : ": ", first_error));
  }
  return out;
}

}  // namespace

std::string ShellQuote(const std::string& word) {
  if (!word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
        return absl::ascii_isalnum(c) || std::string_view("-_./=:,+@%").find(c) != std::string_view::npos;
      })) {
    return word;
  }
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Far above any run (256 workers and their PS), and what a host list may hold at all: each slot
// is a string held in memory.
constexpr int kMaxSlotsPerHost = 4096;
constexpr int kMaxSlots = 65536;

absl::StatusOr<std::vector<std::string>> ReadHostFile(const std::string& path) {
  absl::StatusOr<std::string> file = ReadInputFile(path, "--hostfile", MaxInputSize());
  if (!file.ok()) return absl::InvalidArgumentError(file.status().message());
  std::vector<std::string> slots;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(*file, '\n')) {
    ++number;
    absl::string_view text = line;
    if (size_t hash = text.find('#'); hash != absl::string_view::npos) text = text.substr(0, hash);
    std::vector<absl::string_view> words = absl::StrSplit(text, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (words.empty()) continue;
    auto where = [&] { return absl::StrCat("--hostfile=", path, " line ", number, ": "); };
    if (!ValidHost(words[0])) {
      return absl::InvalidArgumentError(absl::StrCat(where(), "'", words[0], "' is not a host name"));
    }
    int count = 1;
    for (size_t w = 1; w < words.size(); ++w) {
      absl::string_view value = words[w];
      if (!absl::ConsumePrefix(&value, "slots=") || !absl::SimpleAtoi(value, &count) || count < 1 ||
          count > kMaxSlotsPerHost) {
        return absl::InvalidArgumentError(absl::StrCat(
            where(), "'", words[w], "': expected HOST or HOST slots=N (N in [1, ", kMaxSlotsPerHost, "])"));
      }
    }
    if (count > kMaxSlots - static_cast<int>(slots.size())) {
      return absl::InvalidArgumentError(absl::StrCat(where(), "the file lists over ", kMaxSlots, " slots"));
    }
    for (int i = 0; i < count; ++i) slots.emplace_back(words[0]);
  }
  if (slots.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--hostfile=", path, " lists no host"));
  }
  return slots;
}

absl::StatusOr<std::vector<int>> ParseSlurmTasksPerNode(const std::string& text) {
  std::vector<int> out;
  int64_t slots = 0;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int tasks = 0, repeat = 1;
    absl::string_view count = part;
    if (size_t paren = part.find("(x"); paren != absl::string_view::npos) {
      count = part.substr(0, paren);
      absl::string_view times = part.substr(paren + 2);
      if (!absl::ConsumeSuffix(&times, ")") || !absl::SimpleAtoi(times, &repeat) || repeat < 1) {
        return absl::InvalidArgumentError(absl::StrCat("SLURM_TASKS_PER_NODE=", text, ": cannot read '", part, "'"));
      }
    }
    if (!absl::SimpleAtoi(count, &tasks) || tasks < 1) {
      return absl::InvalidArgumentError(absl::StrCat("SLURM_TASKS_PER_NODE=", text, ": cannot read '", part, "'"));
    }
    slots += int64_t{tasks} * repeat;
    if (tasks > kMaxSlotsPerHost || slots > kMaxSlots) {
      return absl::InvalidArgumentError(absl::StrCat("SLURM_TASKS_PER_NODE=", text, ": '", part, "' is over ",
                                                     kMaxSlotsPerHost, " tasks a node or ", kMaxSlots, " in all"));
    }
    out.insert(out.end(), repeat, tasks);
  }
  return out;
}

std::unique_ptr<Launcher> MakeLocalLauncher(int slots) { return std::make_unique<LocalLauncher>(slots); }

absl::StatusOr<std::unique_ptr<Launcher>> MakeSshLauncher(std::vector<std::string> slots,
                                                                  const std::string& ssh) {
  if (absl::Status s = CheckProgramFlag("ssh", ssh, "give the ssh client command"); !s.ok()) return s;
  std::vector<std::string> command = absl::StrSplit(ssh, ' ', absl::SkipEmpty());
  return std::make_unique<SshLauncher>(std::move(slots), std::move(command));
}

absl::StatusOr<std::unique_ptr<Launcher>> MakeSlurmLauncher(
    const std::string& srun, const std::vector<std::string>& srun_args, const std::string& work_dir) {
  const char* job = getenv("SLURM_JOB_ID");
  const char* nodelist = getenv("SLURM_JOB_NODELIST");
  if (job == nullptr || nodelist == nullptr) {
    return absl::FailedPreconditionError(
        "psbench slurm runs inside a Slurm allocation (no SLURM_JOB_ID here): submit "
        "deploy/slurm/psbench.sbatch with sbatch, or run it under salloc");
  }
  if (absl::Status s = CheckProgramFlag("srun", srun, "give Slurm's srun command"); !s.ok()) return s;
  // scontrol expands "node[01-03]" the way Slurm itself does.
  auto expanded = Capture({"scontrol", "show", "hostnames", nodelist});
  if (!expanded.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot expand SLURM_JOB_NODELIST=", nodelist, ": ", expanded.status().message()));
  }
  std::vector<std::string> nodes = absl::StrSplit(*expanded, '\n', absl::SkipEmpty());
  std::vector<int> per_node(nodes.size(), 1);
  if (const char* tasks = getenv("SLURM_TASKS_PER_NODE")) {
    auto parsed = ParseSlurmTasksPerNode(tasks);
    if (!parsed.ok()) return parsed.status();
    if (parsed->size() != nodes.size()) {
      return absl::FailedPreconditionError(absl::StrCat("SLURM_TASKS_PER_NODE=", tasks, " describes ",
                                                        parsed->size(), " nodes, the allocation has ",
                                                        nodes.size()));
    }
    per_node = *parsed;
  }
  std::vector<std::string> slots;
  for (size_t n = 0; n < nodes.size(); ++n) slots.insert(slots.end(), per_node[n], nodes[n]);
  return std::make_unique<SlurmLauncher>(std::move(slots), srun, srun_args, work_dir);
}

absl::StatusOr<std::unique_ptr<Launcher>> MakeMpirunLauncher(
    std::vector<std::string> slots, const std::string& mpirun,
    const std::vector<std::string>& mpirun_args) {
  return std::make_unique<MpirunLauncher>(std::move(slots), mpirun, mpirun_args);
}

}  // namespace psbench
