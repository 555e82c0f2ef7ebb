#include "bench/report.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/strings/str_join.h"
#include "bench/cli.h"
#include "bench/figures.h"
#include "bench/load_report.h"
#include "bench/open_loop.h"
#include "bench/sysinfo.h"
#include "inputs/input_file.h"
#include "fmt/core.h"
#include "payloads/json_field.h"
#include "payloads/size.h"

namespace psbench {
namespace {

using nlohmann::json;

// How long a named pipe's reader may take nothing before the records are given up.
constexpr absl::Duration kPipeStall = absl::Seconds(30);

// --json's file, opened for each set of records; but a named pipe (mkfifo, /dev/stdout into a
// pipe) is opened once and held until the process ends: closing it after the start-up check
// would give its reader end-of-file before any record, and the records would then wait for a
// reader forever. -1 with errno set when it cannot; *held: the descriptor is not to be closed.
int OpenRecordsFile(const std::string& path, bool* held) {
  static absl::Mutex mu;
  static auto* pipes = new std::map<std::string, int>;
  absl::MutexLock lock(&mu);
  *held = true;
  if (auto it = pipes->find(path); it != pipes->end()) return it->second;
  const int fd = OpenOutput(path, O_APPEND | O_CREAT);
  struct stat st {};
  *held = fd >= 0 && ::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
  // Written within a bounded wait (WriteAllWithin): a reader that stops reading must not
  // hold psbench forever.
  if (*held) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  if (*held) (*pipes)[path] = fd;
  return fd;
}

json CpuJson(const CpuTimes& c, double seconds) {
  return {{"user_s", c.user_s},
          {"system_s", c.system_s},
          {"utilization", seconds > 0 ? c.total() / seconds : 0.0}};
}

}  // namespace

Record MakeRecord(const Scenario& s, const PayloadPlan& plan, const Measurement& m) {
  json buffers = json::array();
  json names = json::array();
  bool named = false;
  for (size_t p = 0; p < plan.payloads.size(); ++p) {
    json sizes = json::array();
    json ns = json::array();
    for (const auto& b : plan.payloads[p]) {
      sizes.push_back(b.bytes);
      ns.push_back(b.name);
      named |= !b.name.empty();
    }
    buffers.push_back(sizes);
    names.push_back(ns);
  }
  const bool one = plan.payloads.size() == 1;
  Record r;
  r.benchmark = std::string(BenchmarkName(s.benchmark));
  r.transport = s.transport;
  if (TransportHonoursMode(s.transport)) r.mode = std::string(WireModeName(s.mode));
  r.tls = s.tls;
  r.scheme = SchemeLabel(s);
  r.extra["buffers"] = one ? buffers[0] : buffers;
  if (named) r.extra["buffer_names"] = one ? names[0] : names;
  r.payload_summary = plan.Summary();
  // Exact for one payload; the mean per operation for a trace of several.
  r.payload_bytes_exact = one;
  r.payload_bytes = one ? static_cast<double>(plan.Bytes(0))
                        : (m.ops ? static_cast<double>(m.bytes) / m.ops : 0.0);
  r.payloads = plan.payloads.size();
  r.iterations = m.ops;
  r.seconds = m.seconds;
  r.bytes = m.bytes;
  r.workers = s.num_workers;
  r.ps = static_cast<int64_t>(m.ps_info.size());
  r.scope = "worker";
  r.worker_index = s.worker_index;
  r.validate = s.validate;
  r.seed = s.payload.seed;
  // The benchmark's own figures (updates records are written by worker/updates_worker.cc).
  if (const BenchmarkKind* kind = FindBenchmarkKind(BenchmarkName(s.benchmark))) kind->fill(m, r);
  if (m.open_loop) r.extra["load"] = OpenLoopRecord(m);
  r.start_unix_s = absl::ToDoubleSeconds(m.start - absl::UnixEpoch());
  r.end_unix_s = absl::ToDoubleSeconds(m.end - absl::UnixEpoch());
  // What each PS counted itself during the measurement (all workers): with one worker it
  // must equal this record's own count, an independent check that nothing was lost.
  // sessions_lost: workers that left that PS without a goodbye during the measurement
  // (killed, crashed, failed, cut off). A worker holds one session per PS, so the most any
  // PS lost is how many of this worker's peers were lost: this record's numbers are its own
  // and valid, but the run it belongs to lost workers.
  json ps_counted = json::array();
  uint64_t peers_lost = 0;
  for (size_t i = 0; i < m.ps_info.size(); ++i) {
    uint64_t lost = i < m.ps_sessions_lost.size() ? m.ps_sessions_lost[i] : 0;
    peers_lost = std::max(peers_lost, lost);
    ps_counted.push_back({{"address", m.ps_info[i].address},
                          {"rpcs", m.ps_rpcs[i]},
                          {"bytes", m.ps_bytes[i]},
                          {"sessions_lost", lost}});
  }
  r.extra["ps_counted"] = ps_counted;
  // Latency echoes: the payload comes back; the other benchmarks push.
  r.extra["moved"] = MovedJson(m.moved_before, m.moved_after,
                               {m.bytes, s.benchmark == Benchmark::kLatency ? m.bytes : 0});
  r.peers_lost = peers_lost;
  json ps_cpu = json::array();
  json ps_place = json::array();
  for (size_t i = 0; i < m.ps_info.size(); ++i) {
    const ServerInfo& info = m.ps_info[i];
    json c = CpuJson(m.ps_cpu[i], m.seconds);
    c["address"] = info.address;
    ps_cpu.push_back(c);
    ps_place.push_back({{"address", info.address},
                        {"host", info.host},
                        {"pid", info.pid},
                        {"cpu_affinity", info.cpu_affinity},
                        {"last_cpu", info.last_cpu},
                        {"version", info.version},
                        {"grpc_version", info.grpc_version},
                        {"transport", info.transport},
                        {"data_plane", info.data_plane}});
  }
  r.cpu = {{"worker", CpuJson(m.worker_cpu, m.seconds)}, {"ps", ps_cpu}};
  r.placement = {{"worker",
                  {{"host", HostName()},
                   {"pid", getpid()},
                   {"cpu_affinity", CurrentAffinity()},
                   {"last_cpu", LastCpu()}}},
                 {"ps", ps_place}};
  r.config = ScenarioToJson(s);
  r.environment = Environment();
  r.timestamp = absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone());
  return r;
}

Record AggregateThroughput(const std::vector<Record>& workers) {
  Record total = workers.at(0);
  total.extra.erase("moved");  // each worker's record carries its own
  double first_start = 1e300, last_end = 0, rate_sum = 0, worst_p99 = 0;
  bool tails = true;  // every worker's p99 is one (from 100 iterations; below, its maximum)
  uint64_t iterations = 0, bytes = 0;
  json per_worker = json::array();
  json worker_cpu = json::array();
  // Operations each PS served, summed over the workers (not worker 0's own counts).
  std::vector<uint64_t> rpc_per_ps;
  for (const Record& w : workers) {
    if (w.rpc_per_ps) {
      rpc_per_ps.resize(std::max(rpc_per_ps.size(), w.rpc_per_ps->size()), 0);
      for (size_t i = 0; i < w.rpc_per_ps->size(); ++i) rpc_per_ps[i] += (*w.rpc_per_ps)[i];
    }
    iterations += w.iterations.value_or(0);
    bytes += w.bytes.value_or(0);
    first_start = std::min(first_start, w.start_unix_s.value_or(0));
    last_end = std::max(last_end, w.end_unix_s.value_or(0));
    rate_sum += w.rpc_per_s.value_or(0);
    if (w.rpc_latency_us) worst_p99 = std::max(worst_p99, w.rpc_latency_us->p99);
    tails = tails && w.rpc_latency_us && w.iterations.value_or(0) >= 100;
    per_worker.push_back({{"worker_index", w.worker_index.value_or(0)},
                          {"rpc_per_s", w.rpc_per_s.value_or(0)},
                          {"mb_per_s", w.mb_per_s.value_or(0)}});
    worker_cpu.push_back(w.cpu.is_object() && w.cpu.contains("worker") ? w.cpu["worker"] : json());
  }
  // Totals over the union of the workers' windows: a worker that finishes early does not
  // inflate the total with the faster run the others get after it.
  const double span = last_end - first_start;
  total.scope = "total";
  total.worker_index.reset();
  total.rpc_latency_us.reset();
  total.iterations = iterations;
  total.bytes = bytes;
  total.seconds = span;
  total.start_unix_s = first_start;
  total.end_unix_s = last_end;
  total.rpc_per_s = span > 0 ? static_cast<double>(iterations) / span : 0.0;
  total.mb_per_s = span > 0 ? static_cast<double>(bytes) / span / 1e6 : 0.0;
  total.sum_of_worker_rpc_per_s = rate_sum;
  total.rpc_per_ps = rpc_per_ps;
  if (tails) total.worst_worker_p99_us = worst_p99;
  else total.worst_worker_p99_us.reset();
  total.extra["per_worker"] = per_worker;
  if (LoadPointOf(total)) total.extra["load"] = MergeOpenLoop(workers);
  if (!total.cpu.is_object()) total.cpu = json::object();
  total.cpu["workers"] = worker_cpu;
  total.cpu.erase("worker");
  return total;
}

void CheckOutputsOrDie(absl::string_view program, const std::string& path,
                       const std::vector<NamedPath>& inputs, const std::string& hdr_out) {
  if (absl::Status s = CheckOutputsSpareInputs(inputs, path, hdr_out); !s.ok()) Die(program, s, kExitUsage);
  if (path.empty()) return;
  if (absl::Status s = AppendJsonLines(path, {}); !s.ok()) {
    Die(program, s, s.code() == absl::StatusCode::kUnavailable ? kExitRuntime : kExitUsage);
  }
}

namespace {
FILE* records_out = stdout;  // where --json=- writes
}  // namespace

void KeepStdoutForRecords(absl::string_view program, const std::string& path) {
  if (path != "-" || records_out != stdout) return;
  std::fflush(stdout);
  // Close-on-exec: a PS or worker that outlived psbench would hold a reader's pipe open.
  const int fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  FILE* out = fd < 0 ? nullptr : fdopen(fd, "w");
  if (out == nullptr || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    Die(program, absl::StrCat("--json=-: cannot keep stdout for the records: ", std::strerror(errno)), kExitRuntime);
  }
  // What was stdout now shares stderr: line by line, so neither's lines come out of order.
  setvbuf(stdout, nullptr, _IOLBF, 0);
  records_out = out;
}

absl::Status AppendJsonLines(const std::string& path, const std::vector<Record>& records) {
  if (path == "-") {  // remote launchers gather records from each process's stdout
    for (const Record& r : records) std::fputs((DumpJson(RecordToJson(r)) + '\n').c_str(), records_out);
    if (std::fflush(records_out) != 0) return absl::InternalError("--json=-: write to stdout failed");
    return absl::OkStatus();
  }
  // A path that cannot name a file here is bad input; a disk that is read-only, full or
  // failing is a runtime failure (the caller picks its exit status from the code).
  // `saved`: records of this set that made it whole before the failure.
  auto failed = [&path, &records](absl::string_view what, int err, size_t saved = 0) {
    std::string msg = absl::StrCat("--json=", path, ": ", what, ": ",
                                   err == ETIMEDOUT ? absl::StrCat("its reader took nothing for ",
                                                                   absl::FormatDuration(kPipeStall))
                                                    : OpenOutputError(path, err));
    if (const size_t lost = records.size() - saved; lost > 0) {
      absl::StrAppend(&msg, " (", lost, lost == 1 ? " record" : " records", " not saved)");
    }
    bool disk = err == EROFS || err == ENOSPC || err == EDQUOT || err == EIO || err == EFBIG ||
                err == ETXTBSY || err == ETIMEDOUT;
    return disk ? absl::UnavailableError(msg) : absl::InvalidArgumentError(msg);
  };
  bool held = false;
  const int fd = OpenRecordsFile(path, &held);
  if (fd < 0) return failed("cannot open for writing", errno);
  auto close_fd = [held, fd] { return held ? 0 : ::close(fd); };
  std::string text;
  for (const Record& r : records) text += DumpJson(RecordToJson(r)) + '\n';
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  const off_t before = regular ? st.st_size : 0;
  // One write per record set (a named pipe's within a bounded wait for its reader).
  size_t written = 0;
  if (int err = WriteAllWithin(fd, text, kPipeStall, &written); err != 0) {
    // A record cut short would glue the next one written to it: the file is cut back to the
    // last whole record, unless another process appended since.
    const size_t last_newline = written == 0 ? std::string::npos : text.rfind('\n', written - 1);
    const size_t whole = last_newline == std::string::npos ? 0 : last_newline + 1;
    if (regular && ::fstat(fd, &st) == 0 && st.st_size == before + static_cast<off_t>(written) && written > whole) {
      (void)::ftruncate(fd, before + static_cast<off_t>(whole));
    }
    close_fd();
    return failed("write failed", err, std::count(text.begin(), text.begin() + whole, '\n'));
  }
  // Written is not yet stored: a regular file is synced, so that a failing disk says so now.
  if (!records.empty() && regular && ::fsync(fd) != 0 && errno != EINVAL) {
    int err = errno;
    close_fd();
    return failed("write failed", err);
  }
  if (close_fd() != 0 && errno != EINTR) return failed("write failed", errno);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<json>> ReadJsonLines(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::vector<json> records;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json r = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (r.is_discarded()) return absl::DataLossError(absl::StrCat(path, ": malformed line"));
    records.push_back(std::move(r));
  }
  return records;
}

void TablePrinter::Print(const Record& r) {
  const BenchmarkKind* kind = r.IsPayloadBenchmark() ? FindBenchmarkKind(r.Kind()) : nullptr;
  if (kind == nullptr) return;
  const std::string bench = kind->name;
  std::string payload = r.scheme == "sweep" ? "one buffer per size" : r.payload_summary.value_or("?");
  std::string header = fmt::format(
      "# psbench {} | transport {}{} | scheme {} | payload {}", bench, r.transport.value_or("?"),
      r.mode ? " | mode " + *r.mode : std::string(), r.scheme.value_or("?"), payload);
  if (bench == "throughput") {
    header += fmt::format(" | {} workers x {} PS", r.workers.value_or(1), r.ps.value_or(0));
  }
  if (LoadPointOf(r)) header += fmt::format(" | load {}/s per worker", JsonTextAt(LoadOf(r), "schedule"));
  header += fmt::format("\n# {} | seed {} | tls {}\n# {}", absl::StrJoin(MeasurementParts(r), " | "),
                        r.seed.value_or(0), r.Tls().value_or(false) ? "on" : "off", kind->row_note);
  // Where the processes were allowed to run (the JSON also has the CPU each last ran on).
  std::vector<std::string> ps_cpus = r.PsCpuAffinity();
  header += fmt::format("\n# placement: worker CPUs {} | PS CPUs {}", r.WorkerCpuAffinity(),
                        ps_cpus.empty() ? "?" : absl::StrJoin(ps_cpus, ","));
  if (r.shards.is_array() && !r.shards.empty()) {  // a trace placed over the PS by bytes
    std::vector<std::string> parts;
    for (const json& s : r.shards) {
      auto text = [&s](const char* key) {
        return s.is_object() && s.contains(key) && s[key].is_string() ? s[key].get<std::string>() : std::string("?");
      };
      auto count = [&s](const char* key) {
        return s.is_object() && s.contains(key) && s[key].is_number_unsigned() ? s[key].get<uint64_t>() : uint64_t{0};
      };
      parts.push_back(fmt::format("{} {} tensors {}", text("ps"), count("tensors"), FormatSize(count("bytes"))));
    }
    header += fmt::format("\n# tensors placed by bytes: {}", absl::StrJoin(parts, " | "));
  }
  StreamingTable table(out_, kind->row_columns);
  const bool new_header = header != last_header_;
  if (new_header) {
    if (!last_header_.empty()) fmt::print(out_, "\n");
    fmt::print(out_, "{}\n", header);
    table.PrintHeader();
    last_header_ = header;
  }
  // --repetitions: the rows of each repetition under a line of their own.
  const std::string repetition = r.RepetitionText();
  if (!repetition.empty() && (new_header || repetition != last_repetition_)) fmt::print(out_, "# {}\n", repetition);
  last_repetition_ = repetition;
  table.PrintRow(kind->row(r));
}

}  // namespace psbench
