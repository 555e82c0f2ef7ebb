#include "transports/control/control_server.h"

#include <grpcpp/server_builder.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "inputs/address.h"
#include "transports/control/call_data.h"
#include "transports/control/control_calls.h"
#include "transports/control/tsan_handoff.h"

namespace psbench::control {
namespace {

// gRPC reports a busy port only through its log; bind once ourselves to name the errno.
absl::Status ProbePort(const std::string& host, int port) {
  if (port == 0) return absl::OkStatus();
  sockaddr_storage addr{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof(*v4);
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof(*v6);
  } else {
    return absl::OkStatus();  // a host name: gRPC resolves it and reports failures itself
  }
  int fd = socket(addr.ss_family, SOCK_STREAM, 0);
  if (fd < 0) return absl::OkStatus();
  int rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), len);
  int err = errno;
  close(fd);
  if (rc != 0 && err == EADDRINUSE) {
    return absl::FailedPreconditionError(
        absl::StrFormat("cannot listen on %s: port %d already in use", host, port));
  }
  if (rc != 0 && err == EADDRNOTAVAIL) {
    return absl::FailedPreconditionError(
        absl::StrFormat("cannot listen on %s: not an address of this machine", host));
  }
  return absl::OkStatus();
}

// TLS with the PS's certificate; with a CA, workers must present a certificate it signed.
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsOptions& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(
      tls.ca_pem.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                         : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = tls.ca_pem;
  ssl.pem_key_cert_pairs.push_back({tls.key_pem, tls.cert_pem});
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

ControlServer::ControlServer(const ServerOptions& options, DataPlane data_plane)
    : options_(options), data_plane_(std::move(data_plane)),
      control_(std::make_unique<ControlPlane>(&control_service_, &options_, &data_plane_)) {
  absl::BitGen random;
  data_plane_.instance = absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(random),
                                         absl::Uniform<uint64_t>(random));
}

ControlServer::~ControlServer() {
  Shutdown();
  Wait();
}

absl::StatusOr<int> ControlServer::Start() {
  if (options_.threads < 1) return absl::InvalidArgumentError("--threads must be >= 1");
  if (absl::Status s = ProbePort(options_.host, options_.port); !s.ok()) return s;
  grpc::ServerBuilder builder;
  int bound_port = 0;
  std::string address = FormatHostPort(options_.host, options_.port);
  builder.AddListeningPort(address, ServerCredentials(options_.tls), &bound_port);
  // gRPC refuses a larger message with RESOURCE_EXHAUSTED.
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<uint64_t>(options_.max_message_bytes, INT_MAX)));
  builder.SetMaxSendMessageSize(INT_MAX);
  // Without this, Linux lets a second PS bind the same port and steal half the connections.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  TxZerocopyArguments(options_.grpc_tx_zerocopy,
                      [&builder](const char* name, int value) { builder.AddChannelArgument(name, value); });
  if (data_plane_.generic != nullptr) builder.RegisterAsyncGenericService(data_plane_.generic);
  if (data_plane_.callback_generic != nullptr) builder.RegisterCallbackGenericService(data_plane_.callback_generic);
  builder.RegisterService(&control_service_);
  for (grpc::Service* service : data_plane_.services) builder.RegisterService(service);
  for (int i = 0; i < options_.threads; ++i) cqs_.push_back(builder.AddCompletionQueue());
  server_ = builder.BuildAndStart();
  if (!server_ || bound_port == 0) {
    // The port was free a moment ago (ProbePort): with TLS, gRPC may have refused the files.
    return absl::FailedPreconditionError(absl::StrFormat(
        "cannot listen on %s (address not available or port in use%s)", address,
        options_.tls.enabled() ? ", or gRPC refused --tls-cert/--tls-key: PSBENCH_GRPC_LOG=1 shows its reason" : ""));
  }
  for (auto& cq : cqs_) {
    if (data_plane_.post) data_plane_.post(cq.get());
    control_->Post(cq.get());
  }
  for (auto& cq : cqs_) {
    threads_.emplace_back([this, q = cq.get()] { Serve(q); });
  }
  started_ = true;
  return bound_port;
}

void ControlServer::Wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return shutdown_requested_ || !started_; });
  lock.unlock();
  std::call_once(stop_once_, [this] { Stop(); });
}

void ControlServer::Shutdown() {
  std::lock_guard lock(mu_);
  shutdown_requested_ = true;
  cv_.notify_all();
}

void ControlServer::Serve(grpc::ServerCompletionQueue* q) {
  void* tag;
  bool ok;
  auto handle = [this](void* tag, bool ok) {
    // Proceed may start an operation; none may start once the queues are shutting down.
    std::shared_lock lock(lifecycle_);
    TagTakenFromQueue(tag);
    auto* call = static_cast<CallData*>(tag);
    if (stopping_) {
      call->Drop(ok);
    } else {
      call->Proceed(ok);
    }
  };
  if (!options_.busy_poll) {
    while (q->Next(&tag, &ok)) handle(tag, ok);
    return;
  }
  // A deadline in the past makes AsyncNext poll once without sleeping.
  const std::chrono::system_clock::time_point past{};
  while (true) {
    auto status = q->AsyncNext(&tag, &ok, past);
    if (status == grpc::CompletionQueue::SHUTDOWN) return;
    if (status == grpc::CompletionQueue::GOT_EVENT) handle(tag, ok);
  }
}

void ControlServer::Stop() {
  // The data plane first: what it still holds fails now, while the queues still take the
  // calls' last events.
  if (data_plane_.on_stop) data_plane_.on_stop();
  if (!started_) return;
  control_->CancelSessions();
  // Cancels what is still in flight; each call then gets one last event and is deleted.
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  {
    std::unique_lock lock(lifecycle_);
    stopping_ = true;
  }
  for (auto& cq : cqs_) cq->Shutdown();
  for (auto& t : threads_) t.join();
}

}  // namespace psbench::control
