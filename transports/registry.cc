// Transports by name. New transports add themselves here.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "transports/grpc/grpc_transport.h"
#include "transports/transport.h"
#ifdef PSBENCH_HAVE_VERBS
#include "transports/verbs/verbs_transport.h"
#endif
#ifdef PSBENCH_HAVE_MPI
#include "transports/mpi/mpi_transport.h"
#endif

namespace psbench {

absl::string_view WireModeName(WireMode mode) {
  return mode == WireMode::kSerialized ? "serialized" : "non-serialized";
}

absl::StatusOr<WireMode> ParseWireMode(absl::string_view text) {
  if (text == "non-serialized") return WireMode::kNonSerialized;
  if (text == "serialized") return WireMode::kSerialized;
  return absl::InvalidArgumentError(absl::StrCat(
      "--mode=", std::string(text), " is not a mode; use serialized or non-serialized"));
}

std::vector<std::string> TransportNames() {
  std::vector<std::string> names = {"grpc"};
#ifdef PSBENCH_HAVE_VERBS
  names.push_back("grpc+verbs");
#endif
#ifdef PSBENCH_HAVE_MPI
  names.push_back("grpc+mpi");
#endif
  return names;
}

bool TransportLaunchesAsJob(absl::string_view transport) { return transport == "grpc+mpi"; }

static absl::Status UnknownTransport(absl::string_view name) {
  return absl::InvalidArgumentError(absl::StrCat("--transport=", std::string(name),
                                                 " is not a transport; available: ",
                                                 absl::StrJoin(TransportNames(), ", ")));
}

absl::StatusOr<std::unique_ptr<Client>> MakeClient(absl::string_view transport,
                                                   const ClientOptions& options) {
  if (transport == "grpc") {
    grpc_transport::QuietGrpcLogging();
    return grpc_transport::NewGrpcClient(options);
  }
#ifdef PSBENCH_HAVE_VERBS
  if (transport == "grpc+verbs") {
    grpc_transport::QuietGrpcLogging();
    return verbs::NewVerbsClient(options);
  }
#endif
#ifdef PSBENCH_HAVE_MPI
  if (transport == "grpc+mpi") {
    grpc_transport::QuietGrpcLogging();
    return mpi::NewMpiClient(options);
  }
#endif
  return UnknownTransport(transport);
}

absl::StatusOr<std::unique_ptr<Server>> MakeServer(absl::string_view transport,
                                                   const ServerOptions& options) {
  if (transport == "grpc") {
    grpc_transport::QuietGrpcLogging();
    return grpc_transport::NewGrpcServer(options);
  }
#ifdef PSBENCH_HAVE_VERBS
  if (transport == "grpc+verbs") {
    grpc_transport::QuietGrpcLogging();
    return verbs::NewVerbsServer(options);
  }
#endif
#ifdef PSBENCH_HAVE_MPI
  if (transport == "grpc+mpi") {
    grpc_transport::QuietGrpcLogging();
    return mpi::NewMpiServer(options);
  }
#endif
  return UnknownTransport(transport);
}

}  // namespace psbench
