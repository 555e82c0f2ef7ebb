// psbench-ps: a parameter server. Hosts the transport's data plane (echo, acknowledge) and the
// gRPC control plane until SIGTERM or SIGINT.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "bench/process/alloc_policy.h"
#include "bench/process/mutex_policy.h"
#include "bench/cli.h"
#include "bench/flag_scope.h"
#include "bench/sysinfo.h"
#include "inputs/address.h"
#include "transports/limit_flags.h"
#include "transports/rdma_flags.h"
#include "transports/tls_flags.h"
#include "transports/transport_flags.h"
#include "ps/param_store.h"
#include "transports/transport.h"

ABSL_FLAG(std::string, listen, "127.0.0.1",
          "where to listen: an address (0.0.0.0 or :: for every interface; IPv6 with or "
          "without brackets), an interface (ib0, eth0: its address) or a host name; loopback "
          "only unless given");
ABSL_FLAG(int, port, 0, "port to listen on; 0 picks a free one (printed on the first line)");
ABSL_FLAG(int, threads, 1, "grpc: completion-queue threads serving the data plane");
ABSL_FLAG(std::string, cpu, "", "pin the PS process to these CPUs (e.g. 0 or 0-3)");
ABSL_FLAG(bool, exit_on_stdin_close, false,
          "exit when stdin reaches its end (remote launchers keep it open: over ssh the "
          "process ends with its session)");
ABSL_FLAG(int64_t, fault_corrupt_every, 0,
          "testing aid: flip one byte of every Nth payload received (0 = never), to check "
          "that --validate catches corruption");

namespace psbench {
namespace {

constexpr char kProgram[] = "psbench-ps";
constexpr char kUsage[] =
    "psbench-ps [--listen=127.0.0.1|ADDRESS|INTERFACE] [--port=0] [--transport=grpc] [--threads=1] [--cpu=LIST]\n"
    "A parameter server for psbench workers. Prints 'psbench-ps listening on HOST:PORT' once\n"
    "it serves, and runs until SIGTERM or SIGINT; then, if workers exchanged parameters with\n"
    "it, 'psbench-ps applied updates: JSON' (which steps of which worker it applied).";

int Main(int argc, char** argv) {
  auto positional = ParseFlagsOrExit(argc, argv, kUsage, {"/ps/ps_main.cc", kTransportFlagsFile, kRdmaFlagsFile, kTlsFlagsFile, kLimitFlagsFile,
                                                      kFatalLineFlag});
  if (!positional.empty()) Die(kProgram, "unexpected argument '" + positional[0] + "'", kExitUsage);
  int port = absl::GetFlag(FLAGS_port);
  if (port < 0 || port > 65535) {
    Die(kProgram, absl::StrCat("--port=", port, " is not a port (0-65535)"), kExitUsage);
  }
  int threads = absl::GetFlag(FLAGS_threads);
  if (threads < 1 || threads > 256) Die(kProgram, "--threads must be in [1, 256]", kExitUsage);
  if (std::string cpu = absl::GetFlag(FLAGS_cpu); !cpu.empty()) {
    if (absl::Status s = PinProcess(cpu); !s.ok()) Die(kProgram, s, kExitUsage);
  }
  // Signals are taken by a dedicated thread; every other thread (gRPC's included) has them
  // blocked, so shutdown happens in ordinary code, not in a handler.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  if (absl::GetFlag(FLAGS_exit_on_stdin_close)) ExitWhenStdinCloses();

  auto start = std::chrono::steady_clock::now();
  // Serves the embedded trainer's exchanges (declared first: it outlives the server).
  ParamStore param_store;
  // The no-lost-update check's own tests arm a deliberate store error this way only.
  if (const char* fault = std::getenv("PSBENCH_TEST_PS_FAULT"); fault != nullptr && *fault != '\0') {
    auto parsed = ParseTestFault(fault);
    if (!parsed.ok()) Die(kProgram, absl::StrCat("PSBENCH_TEST_PS_FAULT: ", parsed.status().message()), kExitUsage);
    param_store.SetTestFault(*parsed);
    std::fprintf(stderr, "psbench-ps: TEST FAULT ARMED (PSBENCH_TEST_PS_FAULT=%s): its updates will be wrong\n",
                 parsed->ToString().c_str());
  }
  ServerOptions options;
  options.exchange_handler = &param_store;
  auto listen = ResolveListenAddress(absl::GetFlag(FLAGS_listen));
  if (!listen.ok()) Die(kProgram, listen.status(), kExitUsage);
  options.host = *listen;
  options.port = port;
  options.threads = threads;
  options.busy_poll = BusyPollFlag();
  auto zerocopy = GrpcTxZerocopyFlag();
  if (!zerocopy.ok()) Die(kProgram, zerocopy.status(), kExitUsage);
  options.grpc_tx_zerocopy = *zerocopy;
  auto api = GrpcApiFlag();
  if (!api.ok()) Die(kProgram, api.status(), kExitUsage);
  options.grpc_api = *api;
  auto rdma = RdmaOptionsFromFlags(options.busy_poll);
  if (!rdma.ok()) Die(kProgram, rdma.status(), kExitUsage);
  options.rdma = *rdma;
  if (absl::Status s = CheckTransportFlagsApply({TransportFlag()}, "threads"); !s.ok()) {
    Die(kProgram, s, kExitUsage);
  }
  if (options.busy_poll && options.grpc_api == GrpcApi::kCallback) {
    Die(kProgram, "--busy-poll applies to the PS with --grpc-api=cq only (the callback API's calls run on gRPC's own threads)",
        kExitUsage);
  }
  auto tls = TlsOptionsFromFlags(TlsSide::kServer);
  if (!tls.ok()) Die(kProgram, tls.status(), kExitUsage);
  options.tls = *tls;
  if (absl::Status s = LimitsFromFlags(&options); !s.ok()) Die(kProgram, s, kExitUsage);
  options.corrupt_every = absl::GetFlag(FLAGS_fault_corrupt_every);
  if (options.corrupt_every < 0) Die(kProgram, "--fault-corrupt-every must be >= 0", kExitUsage);
  options.describe_process = [start, &param_store] {
    ServerInfo info;
    CpuTimes cpu = ProcessCpuTimes();
    info.host = HostName();
    info.pid = getpid();
    info.version = PsbenchVersion();
    info.cpu_user_s = cpu.user_s;
    info.cpu_system_s = cpu.system_s;
    info.cpu_affinity = CurrentAffinity();
    info.last_cpu = LastCpu();
    info.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (auto report = param_store.Report()) info.updates = report->ToJson().dump();
    return info;
  };
  auto server = MakeServer(TransportFlag(), options);
  if (!server.ok()) Die(kProgram, server.status(), kExitUsage);
  auto bound = (*server)->Start();
  if (!bound.ok()) Die(kProgram, bound.status(), kExitUsage);
  // host= lets a launcher dial a PS that listens on every interface (0.0.0.0) by name.
  std::printf("psbench-ps listening on %s transport=%s pid=%d cpus=%s host=%s\n",
              FormatHostPort(options.host, *bound).c_str(),
              TransportFlag().c_str(), getpid(), CurrentAffinity().c_str(),
              HostName().c_str());
  std::fflush(stdout);

  std::thread waiter([&signals, s = server->get()] {
    int sig = 0;
    sigwait(&signals, &sig);
    s->Shutdown();
  });
  (*server)->Wait();
  // Wake the signal thread if shutdown came from elsewhere; then leave.
  kill(getpid(), SIGTERM);
  waiter.join();
  // What the exchanges of the last run changed: which updates of which worker were applied
  // (a worker killed mid-run leaves exactly what this line says).
  if (auto report = param_store.Report()) {
    std::printf("psbench-ps applied updates: %s\n", report->ToJson().dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace psbench

int main(int argc, char** argv) {
  psbench::FixAllocatorPolicy();  // before any thread starts
  psbench::TurnOffMutexDeadlockDetection();
  return psbench::Main(argc, argv);
}
