// Abseil's mutex deadlock detection, turned off in every psbench process and floor. Abseil
// keeps a graph of lock acquisitions for it, updated on every absl::Mutex lock and on every
// mutex destroyed, unless it was built with NDEBUG; Debian's build of Abseil was not, and gRPC
// creates, locks and destroys such mutexes for every call. Measured here, it took 7 % of the
// generic gRPC floor's 32-byte message rate and 4 % of its round trip: a cost of a debugging
// aid, not of gRPC or of the fabric. Every record says what its process ran with.
#ifndef PSBENCH_BENCH_PROCESS_MUTEX_POLICY_H_
#define PSBENCH_BENCH_PROCESS_MUTEX_POLICY_H_

#include <string>

namespace psbench {

// Call first in main, before any thread starts.
void TurnOffMutexDeadlockDetection();

// "off" after TurnOffMutexDeadlockDetection, "library default" before.
std::string MutexDeadlockDetection();

}  // namespace psbench

#endif  // PSBENCH_BENCH_PROCESS_MUTEX_POLICY_H_
