#include "transports/control/channel.h"

#include <grpc/support/log.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "psbench.pb.h"

namespace psbench::control {
namespace {

void DropGrpcLog(gpr_log_func_args*) {}

}  // namespace

grpc::ChannelArguments PsbenchChannelArguments(uint64_t tx_zerocopy) {
  grpc::ChannelArguments args;
  TxZerocopyArguments(tx_zerocopy, [&args](const char* name, int value) { args.SetInt(name, value); });
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // A worker often dials a PS that has only just started listening: a first attempt that
  // fails is retried after 100 ms, not gRPC's default 1 s (then up to 1 s apart, until
  // --connect-timeout), so starting a run does not cost whole seconds. Not
  // GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC takes that as each attempt's handshake deadline.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return args;
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, const TlsOptions& tls,
                                           uint64_t tx_zerocopy) {
  if (!tls.enabled()) {
    return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                     PsbenchChannelArguments(tx_zerocopy));
  }
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = tls.ca_pem;  // empty: the system's roots
  ssl.pem_private_key = tls.key_pem;
  ssl.pem_cert_chain = tls.cert_pem;
  grpc::ChannelArguments args = PsbenchChannelArguments(tx_zerocopy);
  if (!tls.server_name.empty()) args.SetSslTargetNameOverride(tls.server_name);
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(ssl), args);
}

absl::Status FromGrpc(const grpc::Status& s, const std::string& server, absl::string_view method) {
  if (s.ok()) return absl::OkStatus();
  std::string msg = absl::StrCat("PS ", server, ": ", method, ": ", s.error_message(), " (gRPC ",
                                 static_cast<int>(s.error_code()), ")");
  switch (s.error_code()) {
    case grpc::StatusCode::DATA_LOSS: return absl::DataLossError(msg);
    case grpc::StatusCode::DEADLINE_EXCEEDED: return absl::DeadlineExceededError(msg);
    case grpc::StatusCode::UNAVAILABLE: return absl::UnavailableError(msg);
    case grpc::StatusCode::CANCELLED: return absl::CancelledError(msg);
    case grpc::StatusCode::INVALID_ARGUMENT: return absl::InvalidArgumentError(msg);
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return absl::ResourceExhaustedError(msg);
    case grpc::StatusCode::UNAUTHENTICATED: return absl::UnauthenticatedError(msg);
    default: return absl::InternalError(msg);
  }
}

void ToWire(const DataCounts& c, wire::DataCounts* out) {
  out->set_messages_sent(c.messages_sent);
  out->set_messages_completed(c.messages_completed);
  out->set_messages_received(c.messages_received);
  out->set_bytes_sent(c.bytes_sent);
  out->set_bytes_received(c.bytes_received);
  out->set_payload_bytes_sent(c.payload_bytes_sent);
  out->set_payload_bytes_received(c.payload_bytes_received);
}

DataCounts FromWire(const wire::DataCounts& c) {
  return {c.messages_sent(),  c.messages_completed(), c.messages_received(),     c.bytes_sent(),
          c.bytes_received(), c.payload_bytes_sent(), c.payload_bytes_received()};
}

void QuietGrpcLogging() {
  if (std::getenv("PSBENCH_GRPC_LOG") == nullptr) gpr_set_log_function(DropGrpcLog);
}

}  // namespace psbench::control
