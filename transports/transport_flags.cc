#include "transports/transport_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "payloads/size.h"

ABSL_FLAG(std::string, transport, "grpc",
          "data plane: grpc | grpc+verbs (RDMA) | grpc+mpi (PS and workers as ranks of one "
          "mpirun)");
ABSL_FLAG(bool, busy_poll, false,
          "spin on completions instead of sleeping, as perftest does: lower latency, one busy "
          "core per polling thread (the PS: its serving threads; psbench's launchers pass it "
          "to the PS too)");

ABSL_FLAG(psbench::ByteSize, grpc_tx_zerocopy, psbench::ByteSize{0},
          "grpc: send messages of at least this size with the kernel's MSG_ZEROCOPY (gRPC's "
          "TCP transmit zero-copy channel argument and its byte threshold), on the PS and "
          "the workers; 0 = off, gRPC's default (docs/transports.md)");

ABSL_FLAG(std::string, grpc_api, "cq",
          "grpc: which gRPC C++ API makes and serves the data calls, on the PS and the workers: "
          "cq (completion queues that psbench's own threads poll) or callback (gRPC 1.51's "
          "callback API, run on gRPC's threads) (docs/transports.md)");

namespace psbench {

std::string TransportFlag() { return absl::GetFlag(FLAGS_transport); }
bool BusyPollFlag() { return absl::GetFlag(FLAGS_busy_poll); }

absl::StatusOr<GrpcApi> GrpcApiFlag() { return ParseGrpcApi(absl::GetFlag(FLAGS_grpc_api)); }

absl::StatusOr<uint64_t> GrpcTxZerocopyFlag() {
  const uint64_t bytes = absl::GetFlag(FLAGS_grpc_tx_zerocopy).bytes;
  if (bytes > (uint64_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--grpc-tx-zerocopy=", FormatSize(bytes), " must be 0 (off) or at most 1GiB"));
  }
  return bytes;
}

}  // namespace psbench
