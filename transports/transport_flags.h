// --transport and --busy-poll: psbench-ps, psbench-worker and psbench run | ssh | slurm |
// mpirun accept both, so they are declared once, here.
#ifndef PSBENCH_TRANSPORTS_TRANSPORT_FLAGS_H_
#define PSBENCH_TRANSPORTS_TRANSPORT_FLAGS_H_

#include <string>

namespace psbench {

// Source-file suffix that owns the flags (for ParseFlagsOrExit's flag_files).
inline constexpr char kTransportFlagsFile[] = "/transports/transport_flags.cc";

// --transport as given (checked by whoever builds the transport: MakeServer, the scenario).
std::string TransportFlag();
// --busy-poll.
bool BusyPollFlag();

}  // namespace psbench

#endif  // PSBENCH_TRANSPORTS_TRANSPORT_FLAGS_H_
