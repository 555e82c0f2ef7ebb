// MPI requests in flight, each tagged with its owner and what it is to the owner, polled
// together with MPI_Testsome.
// Used only by the thread that owns MPI.
#ifndef PSBENCH_TRANSPORTS_MPI_MPI_REQUESTS_H_
#define PSBENCH_TRANSPORTS_MPI_MPI_REQUESTS_H_

#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <queue>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "payloads/payload.h"
#include "transports/data_counts.h"
#include "transports/poll_clock.h"

namespace psbench::mpi {

// What a request is to the data plane's tally (transports/data_counts.h): a send is counted
// when posted and when it completes, a receive when it completes, with the bytes MPI says
// arrived; payload receives (buffers landing in place) count those bytes as payload too.
enum class Traffic : uint8_t { kReceive, kPayloadReceive, kSend };

template <typename Owner>
class RequestTable {
 public:
  // Posts one receive: `start(MPI_Request*)` issues it (MPI_Irecv, ...) and returns its MPI
  // error code. On failure the slot is given back and the code returned.
  template <typename Start>
  int Post(Owner* owner, int what, Start&& start, Traffic traffic = Traffic::kReceive) {
    return Add(owner, what, traffic, start);
  }
  // Posts one send of `bytes`, `payload_bytes` of them a payload's, the same way. Counted
  // before it is posted: the peer may answer before this thread runs again, and a count read
  // after the answer must hold it (a send that fails to post fails its owner).
  template <typename Start>
  int PostSend(Owner* owner, int what, uint64_t bytes, uint64_t payload_bytes, Start&& start) {
    tally_.Sent(bytes, payload_bytes);
    return Add(owner, what, Traffic::kSend, start);
  }

  // The requests' tally; payload bytes a message carries beside its own (an eager payload in
  // a header) are added by the owner.
  DataTally& tally() { return tally_; }
  const DataTally& tally() const { return tally_; }

  // Reaps finished requests: `done(owner, what, status, error, bytes)` for each, bytes what a
  // receive brought (0 for a send or a failure). Returns how many.
  template <typename Done>
  int Poll(Done&& done) {
    if (in_flight_ == 0) return 0;
    int count = 0;
    // Only up to the last slot in use: one request of thousands of buffers must not make
    // every later poll test thousands of empty slots.
    int rc = MPI_Testsome(static_cast<int>(scan_), requests_.data(), &count, indices_.data(),
                          statuses_.data());
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
      error_ = rc;  // MPI itself failed, not one request: the owner cannot go on
      return 0;
    }
    if (count == MPI_UNDEFINED) return 0;
    for (int k = 0; k < count; ++k) {
      size_t slot = static_cast<size_t>(indices_[k]);
      // Error fields are meaningful only when MPI says some request failed.
      int error = rc == MPI_ERR_IN_STATUS ? statuses_[k].MPI_ERROR : rc;
      Owner* owner = owners_[slot];
      owners_[slot] = nullptr;
      requests_[slot] = MPI_REQUEST_NULL;
      free_.push(slot);
      --in_flight_;
      const int bytes = Tally(traffic_[slot], statuses_[k], error);
      done(owner, whats_[slot], statuses_[k], error, bytes);
    }
    while (scan_ > 0 && requests_[scan_ - 1] == MPI_REQUEST_NULL) --scan_;
    return count;
  }

  // Cancels every request still in flight and waits for each (a receive no peer will match:
  // MPI_Finalize must not find it posted).
  void CancelAll() {
    for (size_t slot = 0; slot < requests_.size(); ++slot) {
      if (requests_[slot] == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&requests_[slot]);
      MPI_Wait(&requests_[slot], MPI_STATUS_IGNORE);
      requests_[slot] = MPI_REQUEST_NULL;
      owners_[slot] = nullptr;
      free_.push(slot);
      --in_flight_;
    }
    scan_ = 0;
  }

  size_t in_flight() const { return in_flight_; }
  // MPI_SUCCESS, or the code of an MPI_Testsome that failed as a whole.
  int error() const { return error_; }

 private:
  template <typename Start>
  int Add(Owner* owner, int what, Traffic traffic, Start& start) {
    size_t slot;
    if (free_.empty()) {
      slot = requests_.size();
      requests_.push_back(MPI_REQUEST_NULL);
      owners_.push_back(nullptr);
      whats_.push_back(0);
      traffic_.push_back(Traffic::kReceive);
      indices_.push_back(0);
      statuses_.emplace_back();
    } else {
      slot = free_.top();  // the lowest: requests in flight stay packed at the front
      free_.pop();
    }
    int rc = start(&requests_[slot]);
    if (rc != MPI_SUCCESS) {
      requests_[slot] = MPI_REQUEST_NULL;
      free_.push(slot);
      return rc;
    }
    scan_ = std::max(scan_, slot + 1);
    owners_[slot] = owner;
    whats_[slot] = what;
    traffic_[slot] = traffic;
    ++in_flight_;
    return MPI_SUCCESS;
  }

  // Counts a finished request (a cancelled one is reaped by CancelAll, never here); returns
  // the bytes a receive brought.
  int Tally(Traffic traffic, const MPI_Status& status, int error) {
    if (error != MPI_SUCCESS) return 0;
    if (traffic == Traffic::kSend) {
      tally_.Completed();
      return 0;
    }
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    const uint64_t bytes = count > 0 ? static_cast<uint64_t>(count) : 0;
    tally_.Received(bytes, traffic == Traffic::kPayloadReceive ? bytes : 0);
    return count > 0 ? count : 0;
  }

  std::vector<MPI_Request> requests_;
  std::vector<Owner*> owners_;
  std::vector<int> whats_;
  std::vector<Traffic> traffic_;
  std::vector<int> indices_;
  std::vector<MPI_Status> statuses_;
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> free_;  // lowest first
  size_t scan_ = 0;  // slots [0, scan_) hold every request in flight
  size_t in_flight_ = 0;
  int error_ = MPI_SUCCESS;
  DataTally tally_{DataTally::kOneWriter};  // by the thread that owns MPI
};

// A receive buffer, reused from message to message, laid out like a payload: a copy between
// buffers laid out differently runs markedly slower (measured here: 1 MiB pushes at 5.5-6.4
// GB/s into malloc'd buffers, 9.1-10.5 page-aligned; 4 MiB echoes twice as slow without huge
// pages).
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  ~AlignedBuffer() { std::free(data_); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  // Grows to at least `n` bytes (uninitialised: MPI fills it); never shrinks.
  void Reserve(uint64_t n) {
    if (n <= capacity_) return;
    std::free(data_);
    data_ = nullptr;
    capacity_ = 0;
    data_ = AllocateTensorMemory(n, &capacity_);
  }
  std::byte* data() const { return data_; }

 private:
  std::byte* data_ = nullptr;
  size_t capacity_ = 0;
};

// How a polling loop waits when nothing moved: MPI offers no event to sleep on, so spin. The
// first polls after traffic spin flat out (a reply is usually microseconds away, and a
// sched_yield system call each poll would add about a microsecond to every round trip); then
// each poll yields the CPU to whoever shares it; after a long quiet spell (no traffic at all),
// nap briefly so that an idle rank costs little CPU. With busy_poll, never nap.
class IdleBackoff {
 public:
  explicit IdleBackoff(bool busy_poll) : busy_poll_(busy_poll) {}
  void Progressed() {
    idle_polls_ = 0;
    idle_since_ = absl::InfinitePast();
  }
  // Still in the first polls after traffic, which spin flat out (no yield, no nap).
  bool spinning() const { return idle_polls_ < kSpinPolls; }
  void Idle() {
    if (idle_polls_ < kSpinPolls) {
      ++idle_polls_;
      return;
    }
    if (idle_since_ == absl::InfinitePast()) idle_since_ = absl::Now();
    if (!busy_poll_ && absl::Now() - idle_since_ > absl::Milliseconds(20)) {
      usleep(50);
    } else {
      sched_yield();
    }
  }

 private:
  static constexpr int kSpinPolls = 256;  // a few tens of microseconds of MPI polls
  bool busy_poll_;
  int idle_polls_ = 0;
  absl::Time idle_since_ = absl::InfinitePast();
};

}  // namespace psbench::mpi

#endif  // PSBENCH_TRANSPORTS_MPI_MPI_REQUESTS_H_
