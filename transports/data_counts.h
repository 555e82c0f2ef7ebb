// What a data plane moved, counted where bytes are handed to the plane or taken from it (a
// gRPC message written or read, an RDMA write posted or its immediate consumed, an MPI send
// or receive completed), not where a benchmark counts its operations: the evidence that a
// run's payloads went where its record says. Workers and PS keep one tally each; records
// carry both sides' deltas over what they measured (bench/moved.h).
#ifndef PSBENCH_TRANSPORTS_DATA_COUNTS_H_
#define PSBENCH_TRANSPORTS_DATA_COUNTS_H_

#include <atomic>
#include <cstdint>

namespace psbench {

struct DataCounts {
  // In the plane's own units, counted as they are handed to it: gRPC messages of the payload
  // methods; RDMA write work requests (a chunk may take several; credit updates and probes
  // are zero-byte writes); MPI sends posted.
  uint64_t messages_sent = 0;
  // Sends the plane reported finished: RDMA work requests retired by a work completion
  // (unsignaled ones retire with a later signaled one), MPI sends completed, a worker's gRPC
  // calls answered (a gRPC PS leaves it 0: gRPC does not tell it).
  uint64_t messages_completed = 0;
  // gRPC messages; RDMA writes with immediate consumed (one per chunk or credit update); MPI
  // receives completed.
  uint64_t messages_received = 0;
  // Every byte of those messages: headers, metadata and checksums included.
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  // The payload buffers' bytes among them: what a benchmark's own count must equal.
  uint64_t payload_bytes_sent = 0;
  uint64_t payload_bytes_received = 0;

  bool operator==(const DataCounts&) const = default;
};

// The sum, field by field.
inline DataCounts operator+(const DataCounts& a, const DataCounts& b) {
  return {a.messages_sent + b.messages_sent,           a.messages_completed + b.messages_completed,
          a.messages_received + b.messages_received,   a.bytes_sent + b.bytes_sent,
          a.bytes_received + b.bytes_received,         a.payload_bytes_sent + b.payload_bytes_sent,
          a.payload_bytes_received + b.payload_bytes_received};
}

// `after` less `before`, field by field.
inline DataCounts operator-(const DataCounts& after, const DataCounts& before) {
  return {after.messages_sent - before.messages_sent,
          after.messages_completed - before.messages_completed,
          after.messages_received - before.messages_received,
          after.bytes_sent - before.bytes_sent,
          after.bytes_received - before.bytes_received,
          after.payload_bytes_sent - before.payload_bytes_sent,
          after.payload_bytes_received - before.payload_bytes_received};
}

// A tally any thread may read. A tally with one writer (a data plane driven by one thread:
// MPI, verbs, a worker's gRPC client) adds with plain loads and stores, which cost nothing
// beside a sub-microsecond round trip; one written by several threads (gRPC's serving
// threads) adds atomically.
class DataTally {
 public:
  enum Writers { kOneWriter, kManyWriters };
  explicit DataTally(Writers writers) : many_(writers == kManyWriters) {}
  DataTally(const DataTally&) = delete;
  DataTally& operator=(const DataTally&) = delete;

  void Sent(uint64_t bytes, uint64_t payload_bytes, uint64_t messages = 1) {
    Add(messages_sent_, messages);
    Add(bytes_sent_, bytes);
    if (payload_bytes != 0) Add(payload_bytes_sent_, payload_bytes);
  }
  void Completed(uint64_t messages = 1) { Add(messages_completed_, messages); }
  void Received(uint64_t bytes, uint64_t payload_bytes, uint64_t messages = 1) {
    Add(messages_received_, messages);
    Add(bytes_received_, bytes);
    if (payload_bytes != 0) Add(payload_bytes_received_, payload_bytes);
  }

  DataCounts Read() const {
    auto get = [](const std::atomic<uint64_t>& v) { return v.load(std::memory_order_relaxed); };
    return {get(messages_sent_), get(messages_completed_), get(messages_received_), get(bytes_sent_),
            get(bytes_received_), get(payload_bytes_sent_), get(payload_bytes_received_)};
  }

 private:
  void Add(std::atomic<uint64_t>& v, uint64_t n) {
    if (n == 0) return;  // a count that does not move costs no atomic addition
    if (many_) {
      v.fetch_add(n, std::memory_order_relaxed);
    } else {
      v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    }
  }

  const bool many_;
  std::atomic<uint64_t> messages_sent_{0}, messages_completed_{0}, messages_received_{0};
  std::atomic<uint64_t> bytes_sent_{0}, bytes_received_{0};
  std::atomic<uint64_t> payload_bytes_sent_{0}, payload_bytes_received_{0};
};

// The gRPC payload calls every client of this process made (requests sent, replies read),
// whichever transport it serves: on a worker of another data plane they must stay zero, so a
// silent fallback to gRPC would show. The sum of the tallies registered below, those still
// there and those gone: each gRPC client counts its calls once, on its own one-writer tally,
// instead of on a second, atomic one shared by the process (seven atomic additions a call).
DataCounts ProcessGrpcPayloadCalls();

// A gRPC client's tally, counted in ProcessGrpcPayloadCalls from construction on; what it
// counted stays there after it is destroyed.
class GrpcCallTally : public DataTally {
 public:
  GrpcCallTally();
  ~GrpcCallTally();
};

}  // namespace psbench

#endif  // PSBENCH_TRANSPORTS_DATA_COUNTS_H_
