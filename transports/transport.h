// The transport seam. A worker holds one Client connected to every PS of a run; a PS hosts
// one Server. gRPC is always the control plane; what differs between transports ("grpc",
// "grpc+verbs", "grpc+mpi") is the data plane. A transport never sees a benchmark: it
// moves payloads, checks that they arrived whole, and reports completions.
#ifndef PSBENCH_TRANSPORTS_TRANSPORT_H_
#define PSBENCH_TRANSPORTS_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "payloads/payload.h"
#include "transports/data_counts.h"

namespace psbench {

// How payload bytes are framed on a gRPC data plane.
enum class WireMode {
  kNonSerialized,  // raw gRPC byte buffers, one slice per iovec buffer, no copy, no protobuf
  kSerialized,     // a protobuf message with one `bytes` element per buffer
};
absl::string_view WireModeName(WireMode mode);  // "non-serialized" | "serialized"
absl::StatusOr<WireMode> ParseWireMode(absl::string_view text);

// Which of gRPC's C++ APIs the grpc transport makes and serves its data calls with.
enum class GrpcApi {
  kCompletionQueue,  // completion queues polled by psbench's own threads (the default)
  kCallback,         // gRPC 1.51's callback API: reactors run on gRPC's threads
};
absl::string_view GrpcApiName(GrpcApi api);  // "cq" | "callback"
absl::StatusOr<GrpcApi> ParseGrpcApi(absl::string_view text);

// Operations a worker starts on a PS.
enum class Op {
  kEcho,      // the PS sends the payload back (latency)
  kPush,      // the PS acknowledges the payload (bandwidth, throughput)
  kExchange,  // the PS's ExchangeHandler answers with buffers of the same sizes (training:
              // gradients go out, parameters come back); see Client::StartExchange
};

// Facts a PS reports about itself over the control plane.
struct ServerInfo {
  std::string address;  // as the worker dialled it
  std::string host;
  int pid = 0;
  std::string version;
  std::string grpc_version;
  std::string transport;
  double cpu_user_s = 0;  // whole PS process, since start
  double cpu_system_s = 0;
  std::string cpu_affinity;
  int last_cpu = -1;
  uint64_t rpcs_served = 0;
  uint64_t bytes_received = 0;
  // Worker sessions that ended without the worker's goodbye since the PS started: workers
  // killed, crashed, failed or cut off.
  uint64_t sessions_lost = 0;
  double wall_s = 0;
  std::string data_plane;  // what carries the bytes, e.g. "rxe0 port 1 GID 0 MTU 1024 RoCE"
  // The data plane's own tally since start (all workers), and its name ("grpc", "rdma",
  // "mpi", "loopback"); rpcs_served and bytes_received are the PS's count of payloads served.
  std::string plane;
  DataCounts moved;
  std::string instance;    // random per PS server: the same at two addresses means one PS
  // The exchange handler's account of its current run, as JSON (ps/param_store.h,
  // UpdateReport: which steps of which worker it applied); empty before any exchange run.
  std::string updates;
};

// Tuning of the RDMA data plane (grpc+verbs); other transports ignore it. Each side sizes
// its own receive region; a sender adapts its chunks to the receiver's slots.
struct RdmaOptions {
  std::string device;        // empty: the first device with an active port
  int port = 0;              // 0: the device's first active port
  int gid_index = 0;
  int mtu = 0;               // path MTU in bytes (256..4096); 0: the port's active MTU
  int queue_depth = 16;      // receive slots per connection, i.e. RDMA writes in flight
  uint64_t slot_bytes = 512 * 1024;  // one slot; larger payloads go in several chunks
  bool busy_poll = false;    // --rdma-poll=busy: spin on the CQ; event: sleep on its channel
};

// gRPC TLS for the control plane of every transport and for the grpc data plane
// (transports/tls_flags.h reads and checks it). All empty: plaintext.
struct TlsOptions {
  std::string cert_file, key_file, ca_file;  // as given, for messages and forwarding
  std::string cert_pem, key_pem, ca_pem;     // their contents
  // Worker: the name the PS certificate must carry, when not the host dialled.
  std::string server_name;
  // Worker: TLS when it trusts a CA or presents a certificate; PS: when it has one.
  bool enabled() const { return !ca_pem.empty() || !cert_pem.empty(); }
};

struct ClientOptions {
  std::vector<std::string> servers;  // "host:port", one per PS
  WireMode mode = WireMode::kNonSerialized;
  // Checksum every buffer end to end; a mismatch completes the op with DATA_LOSS.
  bool validate = false;
  absl::Duration connect_timeout = absl::Seconds(10);
  absl::Duration rpc_timeout = absl::Seconds(60);
  // Spin on completions instead of sleeping (perftest's default): lower latency where waking
  // an idle CPU is slow, at the price of a whole core.
  bool busy_poll = false;
  // gRPC: messages of at least this many bytes go out with MSG_ZEROCOPY; 0 never.
  uint64_t grpc_tx_zerocopy = 0;
  GrpcApi grpc_api = GrpcApi::kCompletionQueue;  // gRPC: which of its APIs makes the calls
  RdmaOptions rdma;
  TlsOptions tls;
};

struct Completion {
  uint64_t tag = 0;
  absl::Status status;  // non-OK names the PS; DATA_LOSS for lost or corrupted bytes
};

// A barrier still waiting, in the same words on every transport: "only 2 of the 4 workers
// reached barrier 'x' on PS h:p (missing: workers 1, 3)". `missing` may be the first few.
std::string BarrierWaitText(absl::string_view name, int arrived, int parties, absl::string_view ps,
                            const std::vector<int>& missing);

// Whether a failed Client::Connect is the user's input (exit 2: a wrong address, settings
// refused) rather than a failure at run time (exit 1: a PS lost after it answered, credentials
// refused, no room on the PS or the device).
inline bool ConnectFailureIsUsage(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnavailable:
      return true;
    default:
      return false;
  }
}

// What a worker's Client moved since it was made, by what carried it.
struct ClientCounts {
  std::string plane;  // what carries payloads: "grpc", "rdma", "mpi", "loopback"
  DataCounts data;    // that data plane's tally
  // Its PsControl GetInfo and Barrier calls over gRPC: calls made, their request and reply
  // bytes (no payload).
  DataCounts control;
  // gRPC payload calls by any client of this process (ProcessGrpcPayloadCalls).
  DataCounts grpc_payload;
};

// Worker side. Driven by one thread, like a completion queue: Start() any number of ops,
// then reap them with Next().
class Client {
 public:
  virtual ~Client() = default;

  // Waits until every PS answers on the control plane. Fails naming the first PS that
  // did not answer within connect_timeout. The code says whose fault it is (see
  // ConnectFailureIsUsage): UNAVAILABLE for a PS never reached, INVALID_ARGUMENT,
  // FAILED_PRECONDITION, NOT_FOUND or OUT_OF_RANGE for settings refused; DEADLINE_EXCEEDED or
  // ABORTED for a PS that answered and then stopped or went away.
  virtual absl::Status Connect() = 0;
  virtual size_t num_servers() const = 0;
  virtual const std::string& server_address(size_t server) const = 0;

  // Makes a payload sendable (precomputes headers, registers memory, ...). The payload must
  // stay alive and unchanged until it is unregistered or the client is destroyed.
  virtual absl::StatusOr<int> Register(const Payload& payload) = 0;

  // Forgets a registered payload once no operation on it is in flight; then it may be freed.
  virtual void Unregister(int payload) = 0;

  // Starts `op` with registered payload `payload` on PS `server`. Never blocks on the network.
  virtual void Start(Op op, size_t server, int payload, uint64_t tag) = 0;

  // Starts a kExchange on PS `server`: sends registered payload `request`; the PS's answer,
  // buffers of the same sizes, is written into registered payload `reply`, which must have
  // exactly the request's buffer sizes. `request` may change between exchanges (gradients):
  // its bytes are read when the exchange starts, and with validate its checksums are
  // computed then. `reply` must not be read until the exchange completes.
  virtual void StartExchange(size_t server, int request, int reply, uint64_t tag) = 0;

  // Returns the next finished op, or DeadlineExceeded if none finished before `deadline`.
  virtual absl::StatusOr<Completion> Next(absl::Time deadline) = 0;

  // Where this worker stands among the workers of its run, for transports whose processes
  // are launched together as one job (grpc+mpi: ranks of one mpirun, where every worker gets
  // the same command line). Known after Connect; nullopt for the others, whose workers are
  // told with --worker-index and --num-workers.
  struct JobPlacement {
    int worker_index = 0;
    int num_workers = 1;
  };
  virtual std::optional<JobPlacement> Placement() const { return std::nullopt; }

  // What this client moved so far (read from the driving thread).
  virtual ClientCounts Counts() const = 0;

  // Control plane.
  virtual absl::StatusOr<ServerInfo> GetInfo(size_t server) = 0;
  // The largest message PS `server` accepts (its --max-message-size, as it told this client
  // when connecting; 0 when it did not say), so that a payload it would refuse is found
  // before anything is sent.
  virtual uint64_t max_message_bytes(size_t server) const = 0;
  // Blocks until workers 0..parties-1 have all reached barrier `name` on PS 0. Workers that
  // die while waiting stop counting; two live workers with one index are an error. At
  // `deadline`, DEADLINE_EXCEEDED with BarrierWaitText: who is missing.
  virtual absl::Status Barrier(const std::string& name, int parties, int worker_index,
                               absl::Time deadline) = 0;
};

// What a PS does with kExchange requests (the trainer's parameter store lives behind this).
// A transport without a handler refuses kExchange with FAILED_PRECONDITION.
class ExchangeHandler {
 public:
  virtual ~ExchangeHandler() = default;
  // One kExchange request: `request[i]` and `reply[i]` have equal sizes and may be the same
  // memory (read a request buffer before writing its reply). Both stay valid until `done`
  // runs. Called on a transport thread and must not block: it calls `done` exactly once, at
  // once or later from any thread (a synchronous step answers every worker when the last
  // one's gradients are in). After a non-OK `done` the reply is not sent and the worker's op
  // fails with that status, prefixed by the PS address.
  virtual void OnExchange(std::span<const std::span<const std::byte>> request,
                          std::span<const std::span<std::byte>> reply,
                          absl::AnyInvocable<void(absl::Status) &&> done) = 0;
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;      // 0 picks a free port
  int threads = 1;   // completion-queue threads serving the data plane
  bool busy_poll = false;  // serving threads spin instead of sleeping
  // gRPC: messages of at least this many bytes go out with MSG_ZEROCOPY; 0 never.
  uint64_t grpc_tx_zerocopy = 0;
  GrpcApi grpc_api = GrpcApi::kCompletionQueue;  // gRPC: which of its APIs serves the calls
  // Process facts (CPU time, affinity, host) filled in by the PS binary; the transport adds
  // its own counters.
  std::function<ServerInfo()> describe_process;
  // Fault injection for tests: flip one payload byte in every Nth payload received
  // (0 = never). Pushes are corrupted before the PS checks them, echoes after, so both the
  // PS-side and the worker-side checks of --validate are exercised.
  int64_t corrupt_every = 0;
  RdmaOptions rdma;
  // Answers kExchange; null refuses it. Must outlive the server.
  ExchangeHandler* exchange_handler = nullptr;
  // With a CA, the PS also requires and verifies client certificates (mutual TLS).
  TlsOptions tls;
  // Largest message (gRPC) or request (RDMA, MPI) the PS accepts; larger ones are refused
  // with RESOURCE_EXHAUSTED (RDMA and MPI before their memory is allocated; gRPC as it
  // receives the message).
  uint64_t max_message_bytes = uint64_t{1} << 30;
  // Worker sessions served at once; one more is refused with RESOURCE_EXHAUSTED.
  int max_connections = 1024;
};

// PS side.
class Server {
 public:
  virtual ~Server() = default;
  // Binds and starts serving; returns the bound port. Fails with a clear reason
  // ("127.0.0.1:5000: address already in use").
  virtual absl::StatusOr<int> Start() = 0;
  // Blocks until Shutdown() has been called and every thread has finished.
  virtual void Wait() = 0;
  // Stops accepting, cancels calls in flight and waits for them; safe from any thread.
  virtual void Shutdown() = 0;
};

// Transports by name: "grpc", "grpc+verbs" (when built with libibverbs), "grpc+mpi" (when
// built with MPI).
std::vector<std::string> TransportNames();

// What a transport can do, so that callers ask instead of comparing names, and a flag that
// a transport would ignore is refused (bench/flag_scope.h).
struct TransportTraits {
  // PS and workers are ranks of one job started by a launcher (grpc+mpi: mpirun, srun). Its
  // workers then find the PS themselves (no --ps needed) and learn their index.
  bool launches_as_job = false;
  // The data plane frames payloads by WireMode (--mode); the others move the buffers as
  // they are, so a mode would name a difference that is not there.
  bool honours_mode = false;
  // Reads RdmaOptions (--rdma-*).
  bool takes_rdma_options = false;
  // Serves kExchange (the trainer and --benchmark=updates).
  bool supports_exchange = false;
  // Its PS serves the data plane on ServerOptions::threads completion-queue threads (psbench-ps
  // --threads, psbench --ps-threads); the others poll theirs on threads of their own.
  bool threaded_data_plane = false;
};
// The traits of every transport psbench knows, built in or not (so that a build without
// libibverbs still says what grpc+verbs would take); NOT_FOUND for an unknown name.
absl::StatusOr<TransportTraits> TraitsOf(absl::string_view transport);
// Whether `transport` has `trait` (false for an unknown name), and two common shorthands.
bool TransportHas(absl::string_view transport, bool TransportTraits::*trait);
inline bool TransportLaunchesAsJob(absl::string_view transport) {
  return TransportHas(transport, &TransportTraits::launches_as_job);
}
inline bool TransportHonoursMode(absl::string_view transport) {
  return TransportHas(transport, &TransportTraits::honours_mode);
}
// How a run names its transport: "grpc/serialized" where the mode applies, else the name.
std::string TransportWithMode(absl::string_view transport, WireMode mode);
// The known transports with a trait, e.g. "grpc" for honours_mode (for messages).
std::string TransportsWith(bool TransportTraits::*trait);
absl::StatusOr<std::unique_ptr<Client>> MakeClient(absl::string_view transport,
                                                   const ClientOptions& options);
absl::StatusOr<std::unique_ptr<Server>> MakeServer(absl::string_view transport,
                                                   const ServerOptions& options);

}  // namespace psbench

#endif  // PSBENCH_TRANSPORTS_TRANSPORT_H_
