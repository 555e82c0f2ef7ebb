#include "cli/launch/job.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/cli.h"
#include "bench/run_status.h"
#include "bench/sysinfo.h"
#include "cli/launch/launch.h"
#include "cli/launch/ps_address.h"
#include "fmt/core.h"
#include "payloads/json_field.h"
#include "transports/rdma_flags.h"

namespace psbench {
namespace {

using nlohmann::json;

// --- the plan: who runs where ------------------------------------------------------------------

struct Plan {
  int num_ps = 1, num_workers = 1;
  std::vector<std::string> ps_hosts, worker_hosts;
};

Plan MakePlan(const Launcher& launcher, const LaunchOptions& o, const Scenario& s) {
  Plan p;
  // Latency and bandwidth are point to point.
  const bool all = EveryWorkerToEveryPs(s.benchmark);
  p.num_ps = all ? o.num_ps : 1;
  p.num_workers = all ? o.num_workers : 1;
  const auto& slots = launcher.slots();
  p.ps_hosts.assign(slots.begin(), slots.begin() + p.num_ps);
  p.worker_hosts.assign(slots.begin() + p.num_ps, slots.begin() + p.num_ps + p.num_workers);
  return p;
}

std::vector<std::string> WithLauncherFlags(std::vector<std::string> argv, const Launcher& launcher) {
  for (const auto& a : launcher.ProcessFlags()) argv.push_back(a);
  return argv;
}

// --- how a member failed ----------------------------------------------------------------------

// Member `i` of `g` ended with `status`: named, with its own last words where it printed them.
// Bad input that a PS or worker found (exit 2) stays bad input, so the run exits 2 too.
absl::Status MemberFailure(const ProcessGroup& g, size_t i, int status, absl::string_view context = "") {
  std::string what = absl::StrCat(g.MemberName(i), " ", g.DescribeStatus(status), context);
  if (const auto& fatal = g.FatalOf(i)) absl::StrAppend(&what, ": ", fatal->message);
  return status == kExitUsage ? absl::InvalidArgumentError(what) : absl::InternalError(what);
}

// A group that failed with `status` as a whole: the member the launcher names if it printed
// its last words, else the first member that printed them, else the member the launcher
// names, else `who`.
absl::Status GroupFailure(const ProcessGroup& g, int status, const std::string& who,
                          absl::string_view context) {
  const auto named = g.FailedMember();
  int m = named && g.FatalOf(named->member) ? named->member : g.FirstFatalMember();
  if (m >= 0) return MemberFailure(g, m, g.FatalOf(m)->code, context);
  std::string what = who + " " + g.DescribeStatus(status);
  if (named) what = absl::StrCat(g.MemberName(named->member), " ", named->what);
  absl::StrAppend(&what, context);
  return status == kExitUsage ? absl::InvalidArgumentError(what) : absl::InternalError(what);
}

// --- the PS's addresses ------------------------------------------------------------------------

// Reads the PS group's lines until every PS has printed its address; other lines go to stderr.
absl::StatusOr<std::vector<std::string>> AwaitPsAddresses(ProcessGroup& ps, int num_ps,
                                                         absl::Time deadline) {
  std::vector<std::optional<std::string>> addresses(num_ps);
  int known = 0;
  const absl::Duration wait = deadline - absl::Now();
  while (known < num_ps) {
    if (Interrupted()) return InterruptedError();
    // A PS that gave up (its last words read) fails the start now, while the others listen.
    for (int i = 0; i < num_ps; ++i) {
      if (addresses[i] || !ps.FatalOf(i)) continue;
      absl::Time until = absl::Now() + absl::Seconds(2);
      std::optional<int> status;
      // (srun and mpirun report no member's own status: their group's end says it.)
      while (!(status = ps.MemberStatus(i)) && !ps.Poll() && absl::Now() < until) {
        absl::SleepFor(absl::Milliseconds(10));
      }
      ps.Stop(SIGTERM, absl::Seconds(2));
      return MemberFailure(ps, i, status.value_or(ps.FatalOf(i)->code), " before it listened");
    }
    auto line = ps.ReadLine(std::min(deadline, absl::Now() + absl::Milliseconds(200)));
    if (!line.ok()) {
      if (absl::Now() < deadline) continue;
      return absl::DeadlineExceededError(absl::StrCat(num_ps - known, " of ", num_ps,
                                                      " PS printed no address within ",
                                                      absl::FormatDuration(wait)));
    }
    if (!line->has_value()) {
      // Every PS's stdout closed: say which one exited, and how.
      absl::Time until = absl::Now() + absl::Seconds(2);
      while (!ps.Poll() && absl::Now() < until) absl::SleepFor(absl::Milliseconds(10));
      int status = ps.Stop(SIGTERM, absl::Seconds(2));
      return GroupFailure(ps, status, "the PS", " before it listened");
    }
    auto [member, text, from_stderr] = **line;
    auto address = from_stderr ? std::nullopt : PsDialAddress(text);
    if (address && member >= 0 && member < num_ps && !addresses[member]) {
      addresses[member] = *address;
      ++known;
    } else {
      fmt::print(stderr, "{}\n", member >= 0 && !from_stderr ? absl::StrCat("PS ", member, ": ", text) : text);
    }
  }
  std::vector<std::string> out;
  for (auto& a : addresses) out.push_back(*a);
  return out;
}

// --- gathering: records and progress from the workers' stdout ----------------------------------

class Gatherer {
 public:
  Gatherer(ProcessGroup& workers, ProcessGroup* ps, int first_worker, int num_workers,
           int num_ps, absl::Duration budget, const Scenario& s, size_t plans, bool keep_survivors)
      : workers_(workers), ps_(ps), first_(first_worker), num_workers_(num_workers),
        num_ps_(num_ps), budget_(budget), deadline_(absl::Now() + budget), scenario_(s), plans_(plans),
        keep_survivors_(keep_survivors), records_(num_workers), pending_(num_workers), finished_(num_workers) {}

  // Reads until every pipe of the workers has closed, or the run fails.
  absl::Status Run() {
    while (failure_.ok()) {
      if (Interrupted()) return failure_ = InterruptedError();
      if (absl::Now() > deadline_) {
        return failure_ = absl::DeadlineExceededError(absl::StrCat(
                   "the run did not finish within ", absl::FormatDuration(budget_), " (see --timeout)"));
      }
      CheckPs();
      CheckWorkers();
      if (!failure_.ok()) break;
      RunStatus::Get().Tick();
      DrainPs();
      auto line = workers_.ReadLine(absl::Now() + absl::Milliseconds(100));
      if (!line.ok()) continue;  // nothing yet
      if (!line->has_value()) break;
      Take(**line);
    }
    return failure_;
  }

  // After Run: the first worker that failed while its PS kept serving the others.
  const absl::Status& lost() const { return lost_; }
  // Whether worker w wrote every record it owes.
  bool Complete(int w) const { return records_[w].size() == plans_ && pending_[w].empty(); }
  std::vector<std::vector<Record>>& records() { return records_; }

 private:
  // A PS that exits during the run fails it, and is the cause to report (its workers fail
  // after it).
  void CheckPs() {
    if (ps_ == nullptr || !failure_.ok()) return;
    for (int i = 0; i < num_ps_; ++i) {
      if (auto st = ps_->MemberStatus(i)) {
        DrainPs();  // its last words, if it printed them
        failure_ = MemberFailure(*ps_, i, *st, " during the run");
        return;
      }
    }
    if (auto st = ps_->Poll()) {
      DrainPs();
      failure_ = GroupFailure(*ps_, *st, "the PS", " during the run");
    }
  }

  // A worker that exits non-zero while its PS serves on is lost, unless it wrote every record
  // it owes first (a check of its own failed: updates lost, a data plane that disagrees): it
  // finished, and the run's end judges its status. A lost worker alone, or with no one to
  // keep records for, fails the run; else the others get as long as a measurement takes from
  // here (one that lost its peer at a barrier would otherwise wait out its deadline).
  void CheckWorkers() {
    if (!lost_.ok() || !failure_.ok()) return;
    std::vector<std::pair<int, int>> ended;  // (worker, status): non-zero, not yet judged
    for (int w = 0; w < num_workers_; ++w) {
      if (finished_[w]) continue;
      auto st = workers_.MemberStatus(first_ + w);
      if (st && *st != 0) ended.emplace_back(w, *st);
    }
    if (ended.empty()) return;
    absl::SleepFor(absl::Milliseconds(200));  // a PS going down is reaped, and named, first
    CheckPs();
    if (!failure_.ok()) return;
    const absl::Time measured = absl::Now() + scenario_.warmup + scenario_.duration + absl::Seconds(10);
    for (const auto& [w, st] : ended) {
      AwaitLastWords(first_ + w);
      if (st != kExitUsage && Complete(w)) {
        finished_[w] = true;
        if (scenario_.iterations <= 0) deadline_ = std::min(deadline_, measured);
        continue;
      }
      lost_ = MemberFailure(workers_, first_ + w, st);
      // Bad input is no lost worker: the others have the same input.
      if (num_workers_ == 1 || !keep_survivors_ || st == kExitUsage) {
        failure_ = lost_;
      } else if (scenario_.iterations <= 0) {
        deadline_ = std::min(deadline_, measured);
      }
      return;
    }
  }

  // A worker that has exited may still have lines in its pipe (under mpirun, in mpirun's),
  // its fatal line among them: read on, briefly, until that line is in.
  void AwaitLastWords(int member) {
    const absl::Time until = absl::Now() + absl::Milliseconds(500);
    while (!workers_.FatalOf(member) && absl::Now() < until) {
      auto line = workers_.ReadLine(absl::Now() + absl::Milliseconds(50));
      if (!line.ok()) continue;
      if (!line->has_value()) return;
      Take(**line);
    }
  }

  // The PS's own lines during the run (their pipe must not fill): relayed.
  void DrainPs() {
    if (ps_ == nullptr) return;
    while (true) {
      auto line = ps_->ReadLine(absl::Now());
      if (!line.ok() || !line->has_value()) return;
      if (PsDialAddress((*line)->text)) continue;
      fmt::print(stderr, "{}\n", (*line)->text);
    }
  }

  void Take(const ProcessGroup::Line& line) {
    int w = line.member - first_;
    if (line.from_stderr && w >= 0 && w < num_workers_) {
      fmt::print(stderr, "worker {}: {}\n", w, line.text);
      return;
    }
    if (line.from_stderr || line.member < 0) {
      fmt::print(stderr, "{}\n", line.text);  // a rank's stderr, or the launcher's own words
      return;
    }
    if (w < 0) {  // a PS rank of the job: its address line, and what it says at exit
      if (!PsDialAddress(line.text) && !absl::StartsWith(line.text, kPsAppliedPrefix) && !line.text.empty()) {
        fmt::print(stderr, "{}\n", line.text);
      }
      return;
    }
    if (w >= num_workers_) return;
    if (pending_[w].empty() && absl::StartsWith(line.text, kProgressPrefix)) {
      RunStatus::Get().Update(w, line.text.substr(kProgressPrefix.size()));
      return;
    }
    // Their demux joins the chunks srun and mpirun forward a long line in, but srun, flushing
    // a task that exits, may still cut its last output anywhere: a record may come in pieces,
    // so a worker's text is gathered until it parses.
    if (absl::StartsWith(line.text, "{") || !pending_[w].empty()) {
      constexpr size_t kMaxRecordBytes = 64 << 20;
      pending_[w] += line.text;
      if (!json::accept(pending_[w])) {
        if (pending_[w].size() > kMaxRecordBytes) {
          failure_ = absl::DataLossError(absl::StrCat("worker ", w, " printed ", pending_[w].size(),
                                                      " bytes that are not a JSON record"));
        }
        return;
      }
      auto record = RecordFromJson(json::parse(pending_[w]));
      pending_[w].clear();
      if (!record.ok() || !(record->benchmark || record->kind)) {
        failure_ = absl::DataLossError(absl::StrCat(
            "worker ", w, " printed a JSON line that is not a psbench record",
            record.ok() ? std::string() : absl::StrCat(" (", record.status().message(), ")")));
        return;
      }
      records_[w].push_back(*std::move(record));
      return;
    }
    fmt::print(stderr, "worker {}: {}\n", w, line.text);
  }

  static constexpr absl::string_view kProgressPrefix = "#progress ";

  ProcessGroup& workers_;
  ProcessGroup* ps_;
  const int first_, num_workers_, num_ps_;
  const absl::Duration budget_;
  absl::Time deadline_;
  const Scenario& scenario_;
  const size_t plans_;  // the records each worker owes
  const bool keep_survivors_;
  std::vector<std::vector<Record>> records_;
  std::vector<std::string> pending_;
  std::vector<bool> finished_;  // exited non-zero with every record written
  absl::Status failure_, lost_;
};

// Waits (bounded) for a group whose stdout has closed to exit; its worst status.
int AwaitExit(ProcessGroup& g) {
  absl::Time until = absl::Now() + absl::Seconds(30);
  std::optional<int> status;
  while (!(status = g.Poll()) && absl::Now() < until) absl::SleepFor(absl::Milliseconds(10));
  return status ? *status : g.Stop(SIGTERM, absl::Seconds(5));
}

// A worker of another build (a stale --remote-bin-dir, nodes installed apart) may not do all
// a scenario of this build asks, and its figures need not compare with this build's: said
// once per version, on stderr. Its records keep the version it ran.
void WarnOfOtherBuilds(const std::vector<Record>& records) {
  static std::mutex mu;
  static std::set<std::string> warned;
  const std::string mine = PsbenchVersion();
  for (const Record& r : records) {
    const std::string theirs = r.PsbenchVersion();
    if (theirs.empty() || theirs == mine) continue;
    std::lock_guard<std::mutex> lock(mu);
    if (!warned.insert(theirs).second) continue;
    fmt::print(stderr,
               "psbench: warning: worker {} ran psbench {}, this psbench is {}: figures of different builds need "
               "not compare; install one psbench on every node\n",
               r.worker_index.value_or(0), theirs, mine);
  }
}

// Every record says how it was obtained: the psbench command, the worker's own, where the
// processes ran and the run's label.
void Stamp(std::vector<Record>& records, const LaunchOptions& o, const json& placement) {
  WarnOfOtherBuilds(records);
  for (Record& r : records) {
    if (!r.command.is_null()) r.worker_command = r.command;
    r.command = o.command;
    r.cluster = placement;
    if (!o.label.empty()) r.label = o.label;
  }
}

}  // namespace

absl::Duration JobBudget(const LaunchOptions& o, const Scenario& s, size_t plans) {
  if (o.timeout > absl::ZeroDuration()) return o.timeout;
  return o.training || s.benchmark == Benchmark::kUpdates ? s.connect_timeout + absl::Hours(1)
                                                          : RunBudget(s, plans, static_cast<size_t>(o.num_ps));
}

std::vector<std::string> PsCommandLine(const LaunchOptions& o, const Scenario& s) {
  std::vector<std::string> argv = {o.bin_dir + "/psbench-ps", "--listen=" + o.ps_listen, "--port=0",
                                   "--transport=" + s.transport};
  // The callback API's calls run on gRPC's threads: the PS's own serving threads, and how
  // they wait, are the completion queue's.
  const bool own_threads = !(TransportHonoursMode(s.transport) && s.grpc_api == GrpcApi::kCallback);
  if (TransportHas(s.transport, &TransportTraits::threaded_data_plane) && own_threads) {
    argv.push_back(absl::StrCat("--threads=", o.ps_threads));
  }
  if (!o.ps_cpu.empty()) argv.push_back("--cpu=" + o.ps_cpu);
  if (s.busy_poll && own_threads) argv.push_back("--busy-poll");
  // A --transports comparison carries it to every entry; only grpc's PS takes it.
  if (s.grpc_tx_zerocopy > 0 && TransportHonoursMode(s.transport)) {
    argv.push_back(absl::StrCat("--grpc-tx-zerocopy=", s.grpc_tx_zerocopy));
  }
  if (s.grpc_api != GrpcApi::kCompletionQueue && TransportHonoursMode(s.transport)) {
    argv.push_back(absl::StrCat("--grpc-api=", GrpcApiName(s.grpc_api)));
  }
  if (s.transport == "grpc+verbs") {
    for (const auto& a : RdmaCommandLine(s.rdma)) argv.push_back(a);
  }
  for (const auto& a : o.ps_security_args) argv.push_back(a);
  argv.push_back("--fatal-line");  // its last words come back to us on every launcher
  return argv;
}

std::vector<std::string> WorkerCommandLine(const LaunchOptions& o, const Scenario& s, int w) {
  std::vector<std::string> argv = {
      o.bin_dir + "/psbench-worker",
      // base64url: one word that ssh, srun's --multi-prog and mpirun all pass as it is.
      "--scenario-base64=" + absl::WebSafeBase64Escape(DumpJson(ScenarioToJson(s))),
      absl::StrCat("--worker-index=", w), "--json=-", "--quiet", "--fatal-line"};
  if (auto f = RunStatus::Get().WorkerFlag(); !f.empty()) argv.push_back(f);
  for (const auto& a : o.worker_args) argv.push_back(a);
  for (const auto& a : o.worker_security_args) argv.push_back(a);
  if (!o.worker_cpu.empty()) argv.push_back("--cpu=" + o.worker_cpu);
  return argv;
}

absl::StatusOr<std::vector<Record>> RunJob(Launcher& launcher, const LaunchOptions& o, Scenario s,
                                           size_t plans, int run_number, bool aggregate,
                                           std::vector<Record>* survivors) {
  const Plan plan = MakePlan(launcher, o, s);
  s.num_workers = plan.num_workers;
  s.run_id = absl::StrCat("run-", getpid(), "-", run_number);
  s.ps.clear();
  const absl::Duration budget = JobBudget(o, s, plans);
  json placement = {{"launcher", launcher.name()}, {"ps_hosts", plan.ps_hosts}, {"worker_hosts", plan.worker_hosts}};
  const std::vector<std::string> ps_argv = WithLauncherFlags(PsCommandLine(o, s), launcher);
  std::vector<LaunchMember> ps_members;
  for (int i = 0; i < plan.num_ps; ++i) ps_members.push_back({plan.ps_hosts[i], ps_argv, absl::StrCat("PS ", i)});
  auto worker_members = [&] {
    std::vector<LaunchMember> out;
    for (int w = 0; w < plan.num_workers; ++w) {
      out.push_back({plan.worker_hosts[w], WithLauncherFlags(WorkerCommandLine(o, s, w), launcher),
                     absl::StrCat("worker ", w)});
    }
    return out;
  };

  // --- start ---
  std::unique_ptr<ProcessGroup> ps, workers;
  int first_worker = 0;
  if (TransportLaunchesAsJob(s.transport)) {
    // One MPI job: ranks 0..P-1 are the PS; the workers find them through the job.
    std::vector<LaunchMember> members = ps_members;
    for (auto& m : worker_members()) members.push_back(std::move(m));
    auto job = launcher.Start("job", members);
    if (!job.ok()) return job.status();
    workers = *std::move(job);
    first_worker = plan.num_ps;
  } else {
    auto started = launcher.Start("ps", ps_members);
    if (!started.ok()) return started.status();
    ps = *std::move(started);
    auto addresses = AwaitPsAddresses(*ps, plan.num_ps, absl::Now() + s.connect_timeout + absl::Seconds(30));
    if (!addresses.ok()) {
      ps->Stop(SIGTERM, absl::Seconds(5));
      return addresses.status();
    }
    s.ps = *addresses;
    placement["ps_addresses"] = *addresses;
    if (launcher.name() != "local") {  // on a cluster, where each PS is to be found
      for (int i = 0; i < plan.num_ps; ++i) {
        fmt::print("# PS {} ({}) listening on {}\n", i, plan.ps_hosts[i], (*addresses)[i]);
      }
      std::fflush(stdout);
    }
    auto w = launcher.Start("workers", worker_members());
    if (!w.ok()) {
      ps->Stop(SIGTERM, absl::Seconds(5));
      return w.status();
    }
    workers = *std::move(w);
  }

  // --- gather ---
  RunStatus::Get().Start(s, plan.num_ps, plan.num_workers);
  // Training and the updates check end at the first lost worker (a synchronous step would
  // wait for it); their records that stand are kept all the same.
  const bool survivors_go_on = survivors != nullptr && !o.training && s.benchmark != Benchmark::kUpdates;
  Gatherer gather(*workers, ps.get(), first_worker, plan.num_workers, plan.num_ps, budget, s, plans,
                  survivors_go_on);
  absl::Status failure = gather.Run();
  RunStatus::Get().Stop();

  // --- stop ---
  int worker_status = failure.ok() ? AwaitExit(*workers) : workers->Stop(SIGTERM, absl::Seconds(2));
  if (failure.ok() && worker_status != 0 && gather.lost().ok()) {
    // A worker that said why, or one killed by SIGKILL (which leaves no last words), has no
    // messages above to point at.
    const bool said = workers->FirstFatalMember() >= 0 || worker_status == kKilledBySignal + SIGKILL;
    failure = GroupFailure(*workers, worker_status,
                           first_worker == 0              ? std::string("a worker")
                           : launcher.name() == "slurm" ? std::string("srun")
                                                        : launcher.name(),
                           first_worker > 0 ? absl::StrCat(" (", launcher.name(), " ended the job: ", plan.num_ps,
                                                           " PS ranks first, then ", plan.num_workers, " worker ranks)")
                           : said           ? std::string()
                                            : std::string(" (its messages are above)"));
  }
  if (ps) {
    int st = ps->Stop(SIGTERM, absl::Seconds(10));
    // A PS told to stop exits 0 (what ssh passes on; srun and mpirun report their own ending).
    if (failure.ok() && ps->StopStatusIsMembers() && st != 0) {
      failure = GroupFailure(*ps, st, "the PS", " at shutdown");
    }
  }
  std::vector<std::string> names;
  for (int w = 0; w < plan.num_workers; ++w) names.push_back(workers->MemberName(first_worker + w));
  // Records that stand although the run failed go to *survivors, per worker (no totals).
  auto keep = [&](auto&& wanted) {
    std::vector<std::vector<Record>> kept;
    std::vector<std::string> kept_names;
    for (int w = 0; w < plan.num_workers; ++w) {
      if (!wanted(w)) continue;
      kept.push_back(std::move(gather.records()[w]));
      kept_names.push_back(names[w]);
    }
    const size_t count = kept.size();
    if (count == 0 || survivors == nullptr) return count;
    auto records = MergeWorkerRecords(std::move(kept), plans, /*aggregate=*/false, kept_names);
    if (records.ok()) {
      Stamp(*records, o, placement);
      *survivors = *std::move(records);
    }
    return count;
  };
  if (!failure.ok()) {
    // A worker that ended non-zero after writing every record it owed measured all the same
    // (a check that failed: updates lost, a data plane that disagrees): its record says why.
    if (keep([&](int w) { return gather.Complete(w); }) > 0 || survivors == nullptr) return failure;
    // Else the measurements every worker finished before the failure (a sweep stopped by a
    // signal, or by a size the machine cannot take) stand, without totals as above (one of
    // them may be a failed check's).
    size_t finished = plans;
    for (const auto& r : gather.records()) finished = std::min(finished, r.size());
    if (finished == 0) return failure;
    for (auto& r : gather.records()) r.resize(finished);
    auto records = MergeWorkerRecords(std::move(gather.records()), finished, /*aggregate=*/false, names);
    if (records.ok()) {
      Stamp(*records, o, placement);
      *survivors = *std::move(records);
    }
    return absl::Status(failure.code(), absl::StrCat(failure.message(), " (the ", finished, " of ", plans,
                                                     " measurements every worker finished are kept)"));
  }
  if (!gather.lost().ok()) {
    // The workers that wrote every record they owed measured: keep their records (which say
    // a peer was lost), a failed check's too, and name those checks.
    std::string checks;
    for (int w = 0; w < plan.num_workers; ++w) {
      auto st = workers->MemberStatus(first_worker + w);
      if (st && *st != 0 && gather.Complete(w))
        absl::StrAppend(&checks, "; ", MemberFailure(*workers, first_worker + w, *st).message());
    }
    const size_t finished = keep([&](int w) { return gather.Complete(w); });
    return absl::InternalError(absl::StrCat(gather.lost().message(), checks, "; ", finished, " of ",
                                            plan.num_workers,
                                            " workers finished, their records (which say a peer "
                                            "was lost) are kept"));
  }
  auto records = MergeWorkerRecords(std::move(gather.records()), plans, aggregate, names);
  if (!records.ok()) return records.status();
  Stamp(*records, o, placement);
  return records;
}

}  // namespace psbench
