// An in-process transport: PS and workers in one process, the bytes moved by memcpy on the
// PS's own threads. It keeps every promise of the seam (transport.h) that a network transport
// keeps: the PS receives a copy it checks (--validate), corrupts on request, counts and may
// refuse; exchanges go through the same ExchangeHub; completions come back on another thread;
// a PS that stops fails what is in flight. So the code above the seam (the benchmark loops,
// the records, the PS protocol's client) can be tested without processes or sockets, as
// LevelDB tests above its Env with an in-memory one. Not a transport users pick: its PS is
// reachable only from its own process, at "loopback:N".
#ifndef PSBENCH_TRANSPORTS_LOOPBACK_LOOPBACK_H_
#define PSBENCH_TRANSPORTS_LOOPBACK_LOOPBACK_H_

#include <memory>

#include "transports/transport.h"

namespace psbench::loopback {

// Start() returns N, the PS's address being "loopback:N" (N unique in this process).
std::unique_ptr<Server> NewLoopbackServer(const ServerOptions& options);
std::unique_ptr<Client> NewLoopbackClient(const ClientOptions& options);

}  // namespace psbench::loopback

#endif  // PSBENCH_TRANSPORTS_LOOPBACK_LOOPBACK_H_
