#include "transports/transport_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, transport, "grpc",
          "data plane: grpc | grpc+verbs (RDMA) | grpc+mpi (PS and workers as ranks of one "
          "mpirun)");
ABSL_FLAG(bool, busy_poll, false,
          "spin on completions instead of sleeping, as perftest does: lower latency, one busy "
          "core per polling thread (the PS: its serving threads; psbench's launchers pass it "
          "to the PS too)");

namespace psbench {

std::string TransportFlag() { return absl::GetFlag(FLAGS_transport); }
bool BusyPollFlag() { return absl::GetFlag(FLAGS_busy_poll); }

}  // namespace psbench
