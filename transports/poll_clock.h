// The clock of a polling data plane (grpc+mpi, grpc+verbs), read seldom.
#ifndef PSBENCH_TRANSPORTS_POLL_CLOCK_H_
#define PSBENCH_TRANSPORTS_POLL_CLOCK_H_

#include <cstdint>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace psbench {

// absl::Now() costs about 55 ns on a VM, a twentieth of a small round trip over shared memory
// and more of one over RDMA; a polling loop used to read it at every poll and at every request
// it started (32 B round trip over grpc+mpi: 7 % lower without, in this VM's slow state; 23 %
// in its fast one). A request started gets its deadline (`deadline`: timeout after the read)
// at the next read, so its timeout runs from then: later than the send, never earlier. Reads
// come every kIdlePollsPerRead idle polls while the loop spins flat out, or kBusyPollsPerRead
// polls that found work; the loop reads at every poll that yields, naps or sleeps (a read is
// nothing beside those) and at its first idle poll of a wait. Ops are pooled by their owner
// (never freed while it polls): a Read arms every op started since the last, finished or not.
template <typename Op>
class PollClock {
 public:
  explicit PollClock(absl::Duration timeout) : timeout_(timeout) {}

  // `op` was just started: its deadline comes with the next Read.
  void Started(Op* op) {
    op->deadline = absl::InfiniteFuture();
    unarmed_.push_back(op);
  }
  // Whether the poll that just ran, which found work or not, is one to read the clock after.
  bool Due(bool progressed) {
    return progressed ? ++busy_polls_ % kBusyPollsPerRead == 0 : ++idle_polls_ % kIdlePollsPerRead == 0;
  }
  absl::Time Read() {
    const absl::Time now = absl::Now();
    for (Op* op : unarmed_) op->deadline = now + timeout_;
    unarmed_.clear();
    return now;
  }

 private:
  static constexpr uint32_t kIdlePollsPerRead = 4;
  static constexpr uint32_t kBusyPollsPerRead = 64;
  absl::Duration timeout_;
  std::vector<Op*> unarmed_;
  uint32_t idle_polls_ = 0;
  uint32_t busy_polls_ = 0;
};

}  // namespace psbench

#endif  // PSBENCH_TRANSPORTS_POLL_CLOCK_H_
