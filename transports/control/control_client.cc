#include "transports/control/control_client.h"

#include "payloads/size.h"

#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "transports/control/channel.h"

namespace psbench::control {

ControlClient::ControlClient(const ClientOptions& options) : options_(options) {
  for (const auto& address : options.servers) {
    Ps s;
    s.address = address;
    s.channel = MakeChannel(address, options.tls, options.grpc_tx_zerocopy);
    s.control = wire::PsControl::NewStub(s.channel);
    servers_.push_back(std::move(s));
  }
}

absl::Status LostAfterAnswering(absl::Status s) {
  if (s.code() != absl::StatusCode::kUnavailable) return s;
  return absl::AbortedError(s.message());
}

absl::Status EndedAfterAnswering(const grpc::Status& s, const std::string& message) {
  switch (s.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT: return absl::InvalidArgumentError(message);
    case grpc::StatusCode::FAILED_PRECONDITION: return absl::FailedPreconditionError(message);
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return absl::ResourceExhaustedError(message);
    default: return absl::AbortedError(message);
  }
}

ControlClient::~ControlClient() { Close(); }

absl::Status ControlClient::Connect() {
  absl::Time deadline = absl::Now() + options_.connect_timeout;
  for (auto& s : servers_) {
    if (!s.channel->WaitForConnected(absl::ToChronoTime(deadline))) return ConnectFailure(s);
  }
  // A connection alone could be any gRPC server: ask each PS who it is. Two addresses of
  // one PS (a name and its IP, two names of one host) would count it twice.
  std::map<std::string, std::string> seen;  // instance -> address
  // Each channel is connected: a PS lost from here on is not a wrong address.
  for (size_t i = 0; i < servers_.size(); ++i) {
    auto info = GetInfo(i);
    if (!info.ok()) return LostAfterAnswering(info.status());
    if (info->instance.empty()) continue;  // a PS from before instances: cannot tell
    auto [it, added] = seen.emplace(info->instance, servers_[i].address);
    if (!added) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--ps: ", it->second, " and ", servers_[i].address, " are the same PS (host ",
          info->host, ", pid ", info->pid, "); list each PS once"));
    }
  }
  for (auto& s : servers_) {
    if (absl::Status st = OpenSession(s); !st.ok()) return LostAfterAnswering(st);
  }
  return absl::OkStatus();
}

absl::StatusOr<ServerInfo> ControlClient::GetInfo(size_t server) {
  Ps& s = servers_[server];
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.connect_timeout));
  wire::ServerInfo reply;
  const wire::InfoRequest request;
  grpc::Status status = s.control->GetInfo(&context, request, &reply);
  Count(request, status.ok() ? &reply : nullptr);
  if (!status.ok()) {
    if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      return absl::FailedPreconditionError(
          absl::StrCat(s.address, " answers gRPC but is not a psbench PS"));
    }
    return FromGrpc(status, s.address, "/psbench.wire.PsControl/GetInfo");
  }
  wire::ServerInfo& r = reply;
  ::psbench::ServerInfo out;
  out.address = s.address;
  out.host = r.host();
  out.pid = r.pid();
  out.version = r.version();
  out.grpc_version = r.grpc_version();
  out.transport = r.transport();
  out.cpu_user_s = r.cpu_user_s();
  out.cpu_system_s = r.cpu_system_s();
  out.cpu_affinity = r.cpu_affinity();
  out.last_cpu = r.last_cpu();
  out.rpcs_served = r.rpcs_served();
  out.sessions_lost = r.sessions_lost();
  out.bytes_received = r.bytes_received();
  out.wall_s = r.wall_s();
  out.data_plane = r.data_plane();
  out.plane = r.plane();
  out.moved = FromWire(r.moved());
  out.updates = r.updates();
  out.instance = r.instance();
  return out;
}

absl::Status ControlClient::CheckMessageFits(uint64_t payload_bytes, uint64_t message_bytes) const {
  for (const Ps& s : servers_) {
    if (s.max_message_bytes == 0 || message_bytes <= s.max_message_bytes) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "a ", FormatSize(payload_bytes), " payload ",
        message_bytes == payload_bytes ? std::string("is") : absl::StrCat("makes a ", message_bytes, "-byte message,"),
        " over PS ", s.address, "'s --max-message-size=", FormatSize(s.max_message_bytes),
        "; raise it or send smaller payloads"));
  }
  return absl::OkStatus();
}

void ControlClient::Count(const google::protobuf::Message& request, const google::protobuf::Message* reply) {
  tally_.Sent(request.ByteSizeLong(), 0);
  if (reply == nullptr) return;
  tally_.Completed();
  tally_.Received(reply->ByteSizeLong(), 0);
}

absl::Status ControlClient::Barrier(const std::string& name, int parties, int worker_index,
                                    absl::Time deadline) {
  wire::BarrierRequest request;
  request.set_name(name);
  request.set_parties(parties);
  request.set_worker_index(worker_index);
  request.set_nonce(nonce_);
  wire::BarrierReply reply;
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(
        absl::ToChronoTime(std::min(deadline, absl::Now() + options_.connect_timeout)));
    grpc::Status status = servers_[0].control->Barrier(&context, request, &reply);
    Count(request, status.ok() ? &reply : nullptr);
    if (!status.ok() && status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      return FromGrpc(status, servers_[0].address, "/psbench.wire.PsControl/Barrier");
    }
    if (status.ok() && reply.released()) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          BarrierWaitText(name, reply.arrived(), parties, servers_[0].address,
                          std::vector<int>(reply.missing().begin(), reply.missing().end())));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
}

// Why a PS could not be reached, in one line. gRPC says why in the status of a call on the
// failed channel; a TLS failure (a handshake refused, a PS that closes a plaintext
// connection) is UNAUTHENTICATED: the PS is there, the credentials are wrong.
absl::Status ControlClient::ConnectFailure(Ps& s) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  wire::ServerInfo reply;
  grpc::Status status = s.control->GetInfo(&context, wire::InfoRequest(), &reply);
  std::string why = status.ok() ? "" : status.error_message();
  auto has = [&why](const char* text) { return why.find(text) != std::string::npos; };
  const bool reached = !why.empty() && !has("refused") && !has("No route") &&
                       !has("DNS") && !has("Deadline") && !has("unreachable");
  if (reached && options_.tls.enabled()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "PS ", s.address, ": TLS handshake failed (does --tls-ca hold the CA of the PS "
        "certificate, does that certificate name the address dialled, is the PS serving "
        "TLS, does it require a client certificate?): ", why));
  }
  if (reached) {
    return absl::UnauthenticatedError(absl::StrCat(
        "PS ", s.address, " closed the connection during setup: it may serve TLS only "
        "(give --tls-ca and, for mutual TLS, --tls-cert and --tls-key): ", why));
  }
  return absl::UnavailableError(absl::StrCat(
      "cannot reach PS ", s.address, " within ", absl::FormatDuration(options_.connect_timeout),
      " (is psbench-ps running there, and is the address right?)",
      why.empty() ? "" : absl::StrCat(": ", why)));
}

// Opens this worker's session on a PS, which counts it against its --max-connections.
absl::Status ControlClient::OpenSession(Ps& s) {
  const absl::Duration connect_timeout = options_.connect_timeout;
  grpc::CompletionQueue& session_cq = session_cq_;
  constexpr uintptr_t kStarted = 1, kRead = 2, kFinished = 3;
  auto wait_for = [&session_cq](uintptr_t want, absl::Time deadline) -> std::optional<bool> {
    void* tag;
    bool ok;
    while (session_cq.AsyncNext(&tag, &ok, absl::ToChronoTime(deadline)) ==
           grpc::CompletionQueue::GOT_EVENT) {
      if (reinterpret_cast<uintptr_t>(tag) == want) return ok;
    }
    return std::nullopt;
  };
  absl::Time deadline = absl::Now() + connect_timeout;
  s.session_context = std::make_unique<grpc::ClientContext>();
  wire::SessionReply reply;
  s.session = s.control->PrepareAsyncSession(s.session_context.get(), wire::SessionRequest(),
                                             &session_cq);
  s.session->StartCall(reinterpret_cast<void*>(kStarted));
  s.session_open = true;
  std::optional<bool> started = wait_for(kStarted, deadline);
  std::optional<bool> read;
  if (started.value_or(false)) {
    s.session->Read(&reply, reinterpret_cast<void*>(kRead));
    read = wait_for(kRead, deadline);
  }
  if (read.value_or(false)) {
    s.max_message_bytes = reply.max_message_bytes();
    s.session_id = reply.session_id();
    return absl::OkStatus();
  }
  // No answer in time: cancel, and let the operation still pending end.
  if (!started.has_value() || (*started && !read.has_value())) {
    s.session_context->TryCancel();
    (void)wait_for(started.has_value() ? kRead : kStarted, absl::Now() + absl::Seconds(5));
  }
  // Refused, or cancelled: the status says why.
  grpc::Status status;
  s.session->Finish(&status, reinterpret_cast<void*>(kFinished));
  (void)wait_for(kFinished, absl::Now() + absl::Seconds(5));
  s.session_open = false;
  // A PS without sessions (an older psbench-ps, a test's fake PS) has nothing to count.
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) return absl::OkStatus();
  if (status.ok() || status.error_code() == grpc::StatusCode::CANCELLED) {
    return absl::DeadlineExceededError(absl::StrCat(
        "PS ", s.address, " did not admit this worker within ",
        absl::FormatDuration(connect_timeout)));
  }
  return FromGrpc(status, s.address, "/psbench.wire.PsControl/Session");
}

// Ends every session (the PS then frees its place) and drains their queue. Each PS first
// hears a goodbye, so that it does not count this worker as lost (ServerInfo.sessions_lost).
// Only a worker that ends normally gets here: one that fails exits without it, and its PS
// counts it as lost, as it does a worker that was killed or cut off.
void ControlClient::Close() {
  if (closed_) return;
  closed_ = true;
  std::vector<Ps>& servers = servers_;
  grpc::CompletionQueue& session_cq = session_cq_;
  struct Bye {
    grpc::ClientContext context;
    wire::GoodbyeRequest request;
    wire::GoodbyeReply reply;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<wire::GoodbyeReply>> call;
  };
  std::vector<std::unique_ptr<Bye>> byes;
  grpc::CompletionQueue bye_cq;
  for (Ps& s : servers) {
    if (!s.session_open || s.session_id == 0) continue;
    auto bye = std::make_unique<Bye>();
    bye->context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    bye->request.set_session_id(s.session_id);
    bye->call = s.control->AsyncGoodbye(&bye->context, bye->request, &bye_cq);
    bye->call->Finish(&bye->reply, &bye->status, bye.get());
    byes.push_back(std::move(bye));
  }
  for (size_t n = 0; n < byes.size(); ++n) {  // every call ends by its deadline
    void* tag;
    bool ok;
    if (!bye_cq.Next(&tag, &ok)) break;
  }
  bye_cq.Shutdown();
  {
    void* tag;
    bool ok;
    while (bye_cq.Next(&tag, &ok)) {
    }
  }
  std::vector<grpc::Status> statuses(servers.size());
  for (size_t i = 0; i < servers.size(); ++i) {
    Ps& s = servers[i];
    if (!s.session_open) continue;
    s.session_context->TryCancel();
    s.session->Finish(&statuses[i], &statuses[i]);
  }
  session_cq.Shutdown();
  void* tag;
  bool ok;
  while (session_cq.Next(&tag, &ok)) {
  }
}

}  // namespace psbench::control
