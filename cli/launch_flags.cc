#include "cli/launch_flags.h"

#include <algorithm>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/sysinfo.h"
#include "payloads/json_field.h"
#include "transports/limit_flags.h"
#include "transports/tls_flags.h"

ABSL_FLAG(int, num_ps, 1, "PS processes to start (throughput, updates, --trainer; latency and bandwidth use 1)");
ABSL_FLAG(int, num_workers, 1,
          "worker processes to start (throughput, updates, --trainer; latency and bandwidth use "
          "1; on a cluster the default is every slot after the PS)");
ABSL_FLAG(std::string, ps_cpu, "", "pin every PS to these CPUs (e.g. 0)");
ABSL_FLAG(std::string, worker_cpu, "", "pin every worker to these CPUs (e.g. 1)");
ABSL_FLAG(int, ps_threads, 1, "grpc: completion-queue threads serving each PS's data plane");
ABSL_FLAG(std::string, json, "", "append every result (JSON Lines) to this file");
ABSL_FLAG(absl::Duration, timeout, absl::ZeroDuration(),
          "end a run that takes longer than this (default: derived from warm-up and duration)");
ABSL_FLAG(std::string, mpirun, PSBENCH_MPIEXEC,
          "the MPI launcher: psbench mpirun's, and psbench run's for grpc+mpi (default: the "
          "one psbench was built against)");
ABSL_FLAG(std::string, mpirun_args, "",
          "extra mpirun arguments, space-separated (e.g. \"--mca btl self,vader\")");
ABSL_FLAG(std::string, transports, "",
          "compare: run the same scenario once per entry, TRANSPORT or TRANSPORT/MODE "
          "(e.g. grpc,grpc+verbs or grpc/non-serialized,grpc/serialized; at least two, no "
          "repeats; an entry without /MODE uses --mode), each with fresh processes on the same "
          "slots, and print one table of the headline figures with ratios against the first "
          "entry; not with --transport");
ABSL_FLAG(int, repetitions, 1,
          "run each benchmark this many times, each with fresh processes (with --transports, "
          "the entries alternate: A, B, A, B, ...), and print per payload the median and the "
          "spread (largest / smallest) of its headline figure; every record says which "
          "repetition it is");
ABSL_FLAG(std::string, label, "",
          "a name for this run's results (e.g. ipoib, rdma): every record carries it, and "
          "psbench report draws one line per label");

namespace psbench {

absl::StatusOr<LaunchOptions> LaunchOptionsFromFlags(const std::vector<std::string>& command, bool one_machine) {
  LaunchOptions o;
  o.num_ps = absl::GetFlag(FLAGS_num_ps);
  o.num_workers = absl::GetFlag(FLAGS_num_workers);
  o.ps_cpu = absl::GetFlag(FLAGS_ps_cpu);
  o.worker_cpu = absl::GetFlag(FLAGS_worker_cpu);
  o.ps_threads = absl::GetFlag(FLAGS_ps_threads);
  o.timeout = absl::GetFlag(FLAGS_timeout);
  o.label = absl::GetFlag(FLAGS_label);
  o.repetitions = absl::GetFlag(FLAGS_repetitions);
  o.command = command;
  if (o.timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--timeout must not be negative (0 = derived from the scenario)");
  }
  // A label heads report columns and table lines: a newline or escape would break them.
  if (std::any_of(o.label.begin(), o.label.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; }) ||
      !IsUtf8(o.label)) {
    return absl::InvalidArgumentError("--label must be UTF-8 text without control characters (a newline, a tab, an escape)");
  }
  if (o.label.find(',') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("--label=", o.label,
                                                   ": no commas (psbench report --compare=A,B names series by label)"));
  }
  if (o.num_ps < 1 || o.num_ps > 64) return absl::InvalidArgumentError("--num-ps must be in [1, 64]");
  if (o.num_workers < 1 || o.num_workers > kMaxWorkers) {
    return absl::InvalidArgumentError(absl::StrCat("--num-workers must be in [1, ", kMaxWorkers, "]"));
  }
  if (o.repetitions < 1 || o.repetitions > 1000) {
    return absl::InvalidArgumentError("--repetitions must be in [1, 1000]");
  }
  if (o.ps_threads < 1 || o.ps_threads > 256) {
    return absl::InvalidArgumentError("--ps-threads must be in [1, 256]");
  }
  for (const auto& [flag, list] : {std::pair{"--ps-cpu", o.ps_cpu}, {"--worker-cpu", o.worker_cpu}}) {
    if (!list.empty() && !ParseCpuList(list).ok()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, "=", list, " is not a CPU list"));
    }
  }
  auto tls = TlsOptionsFromFlags(one_machine ? TlsSide::kLocalLauncher : TlsSide::kLauncher);
  if (!tls.ok()) return tls.status();
  ServerOptions limits;
  if (absl::Status s = LimitsFromFlags(&limits); !s.ok()) return s;
  o.ps_security_args = TlsCommandLine(*tls, TlsSide::kServer);
  for (const auto& a : LimitsCommandLine(limits)) o.ps_security_args.push_back(a);
  o.ps_max_message_bytes = limits.max_message_bytes;
  o.ps_max_connections = limits.max_connections;
  o.worker_security_args = TlsCommandLine(*tls, TlsSide::kClient);
  o.tls = tls->enabled();
  return o;
}

std::string JsonFlag() { return absl::GetFlag(FLAGS_json); }
std::string TransportsFlag() { return absl::GetFlag(FLAGS_transports); }
std::string MpirunFlag() { return absl::GetFlag(FLAGS_mpirun); }
std::vector<std::string> MpirunArgsFlag() {
  return absl::StrSplit(absl::GetFlag(FLAGS_mpirun_args), ' ', absl::SkipEmpty());
}

}  // namespace psbench
