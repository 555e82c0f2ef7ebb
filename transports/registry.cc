// Transports by name. New transports add themselves here.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "transports/control/channel.h"
#include "transports/grpc/grpc_transport.h"
#include "transports/transport.h"
#ifdef PSBENCH_HAVE_VERBS
#include "transports/verbs/verbs_transport.h"
#endif
#ifdef PSBENCH_HAVE_MPI
#include "transports/mpi/mpi_transport.h"
#endif

namespace psbench {

std::string BarrierWaitText(absl::string_view name, int arrived, int parties, absl::string_view ps,
                            const std::vector<int>& missing) {
  std::string out = absl::StrCat("only ", arrived, " of the ", parties, " workers reached barrier '",
                                 name, "' on PS ", ps);
  if (missing.empty()) return out;
  const int absent = parties - arrived;
  absl::StrAppend(&out, " (missing: worker", absent == 1 ? " " : "s ", absl::StrJoin(missing, ", "),
                  static_cast<int>(missing.size()) < absent ? absl::StrCat(", ... ", absent, " in all") : "",
                  ")");
  return out;
}

absl::string_view WireModeName(WireMode mode) {
  return mode == WireMode::kSerialized ? "serialized" : "non-serialized";
}

absl::StatusOr<WireMode> ParseWireMode(absl::string_view text) {
  if (text == "non-serialized") return WireMode::kNonSerialized;
  if (text == "serialized") return WireMode::kSerialized;
  return absl::InvalidArgumentError(absl::StrCat(
      "--mode=", std::string(text), " is not a mode; use serialized or non-serialized"));
}

absl::string_view GrpcApiName(GrpcApi api) { return api == GrpcApi::kCallback ? "callback" : "cq"; }

absl::StatusOr<GrpcApi> ParseGrpcApi(absl::string_view text) {
  if (text == "cq") return GrpcApi::kCompletionQueue;
  if (text == "callback") return GrpcApi::kCallback;
  return absl::InvalidArgumentError(absl::StrCat(
      "--grpc-api=", std::string(text), " is not one of gRPC's APIs; use cq or callback"));
}

namespace {

// One row per transport built in: its name and how to make each side.
struct TransportEntry {
  const char* name;
  absl::StatusOr<std::unique_ptr<Client>> (*make_client)(const ClientOptions&);
  absl::StatusOr<std::unique_ptr<Server>> (*make_server)(const ServerOptions&);
};

const std::vector<TransportEntry>& Transports() {
  static const auto* entries = new std::vector<TransportEntry>{
      {"grpc", [](const ClientOptions& o) -> absl::StatusOr<std::unique_ptr<Client>> {
         return grpc_transport::NewGrpcClient(o);
       },
       [](const ServerOptions& o) -> absl::StatusOr<std::unique_ptr<Server>> {
         return grpc_transport::NewGrpcServer(o);
       }},
#ifdef PSBENCH_HAVE_VERBS
      {"grpc+verbs", [](const ClientOptions& o) -> absl::StatusOr<std::unique_ptr<Client>> {
         return verbs::NewVerbsClient(o);
       },
       [](const ServerOptions& o) -> absl::StatusOr<std::unique_ptr<Server>> {
         return verbs::NewVerbsServer(o);
       }},
#endif
#ifdef PSBENCH_HAVE_MPI
      {"grpc+mpi", &mpi::NewMpiClient, &mpi::NewMpiServer},
#endif
  };
  return *entries;
}

const TransportEntry* FindTransport(absl::string_view name) {
  for (const TransportEntry& e : Transports()) {
    if (name == e.name) return &e;
  }
  return nullptr;
}

absl::Status UnknownTransport(absl::string_view name) {
  return absl::InvalidArgumentError(absl::StrCat("--transport=", std::string(name),
                                                 " is not a transport; available: ",
                                                 absl::StrJoin(TransportNames(), ", ")));
}

}  // namespace

std::vector<std::string> TransportNames() {
  std::vector<std::string> names;
  for (const TransportEntry& e : Transports()) names.push_back(e.name);
  return names;
}

namespace {

struct KnownTransport {
  const char* name;
  TransportTraits traits;
};
// Every transport's row, whether or not this build has it.
constexpr KnownTransport kKnown[] = {
    {"grpc", {.launches_as_job = false, .honours_mode = true, .takes_rdma_options = false,
              .supports_exchange = true, .threaded_data_plane = true}},
    {"grpc+verbs", {.launches_as_job = false, .honours_mode = false, .takes_rdma_options = true,
                    .supports_exchange = true}},
    {"grpc+mpi", {.launches_as_job = true, .honours_mode = false, .takes_rdma_options = false,
                  .supports_exchange = true}},
};

}  // namespace

absl::StatusOr<TransportTraits> TraitsOf(absl::string_view transport) {
  for (const KnownTransport& k : kKnown) {
    if (transport == k.name) return k.traits;
  }
  return absl::NotFoundError(absl::StrCat(std::string(transport), " is not a transport"));
}

bool TransportHas(absl::string_view transport, bool TransportTraits::*trait) {
  auto t = TraitsOf(transport);
  return t.ok() && (*t).*trait;
}

std::string TransportWithMode(absl::string_view transport, WireMode mode) {
  if (!TransportHonoursMode(transport)) return std::string(transport);
  return absl::StrCat(transport, "/", WireModeName(mode));
}

std::string TransportsWith(bool TransportTraits::*trait) {
  std::vector<std::string> names;
  for (const KnownTransport& k : kKnown) {
    if (k.traits.*trait) names.push_back(k.name);
  }
  return absl::StrJoin(names, ", ");
}

// Every transport's control plane is gRPC, whose own logging psbench keeps quiet.
absl::StatusOr<std::unique_ptr<Client>> MakeClient(absl::string_view transport,
                                                   const ClientOptions& options) {
  const TransportEntry* e = FindTransport(transport);
  if (e == nullptr) return UnknownTransport(transport);
  control::QuietGrpcLogging();
  return e->make_client(options);
}

absl::StatusOr<std::unique_ptr<Server>> MakeServer(absl::string_view transport,
                                                   const ServerOptions& options) {
  const TransportEntry* e = FindTransport(transport);
  if (e == nullptr) return UnknownTransport(transport);
  control::QuietGrpcLogging();
  return e->make_server(options);
}

}  // namespace psbench
