// The --tls-* flags, shared by psbench-ps, psbench-worker and psbench run (which forwards
// them to every PS and worker it starts), so that every binary spells and checks them the
// same way. They turn on gRPC TLS for every transport's control plane and for the grpc data
// plane.
#ifndef PSBENCH_TRANSPORTS_TLS_FLAGS_H_
#define PSBENCH_TRANSPORTS_TLS_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "transports/transport.h"

namespace psbench {

// Source-file suffix that owns the flags (for ParseFlagsOrExit's flag_files).
inline constexpr char kTlsFlagsFile[] = "/transports/tls_flags.cc";

// Which side reads the flags: a PS needs its own certificate and key for TLS, and with a CA
// verifies its workers' certificates; a worker verifies the PS with the CA and may present a
// certificate of its own. A launcher gives one certificate to every PS and worker, so it must
// verify against the CA; psbench run's (kLocalLauncher) also needs the CA, and must name
// 127.0.0.1 (or --tls-server-name), the address every worker dials there.
enum class TlsSide { kServer, kClient, kLauncher, kLocalLauncher };

// Reads the files the flags name and checks them (readable, PEM that OpenSSL, and so gRPC,
// accepts, key matching certificate). Errors are one line naming the flag and the file.
absl::StatusOr<TlsOptions> TlsOptionsFromFlags(TlsSide side);

// The flags that reproduce `o` on the command line of a binary of side `to` (none when TLS
// is off), with absolute paths so that the child may run elsewhere in the tree.
std::vector<std::string> TlsCommandLine(const TlsOptions& o, TlsSide to);

}  // namespace psbench

#endif  // PSBENCH_TRANSPORTS_TLS_FLAGS_H_
