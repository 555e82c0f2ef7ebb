// Payload: the bytes of one planned payload, as an iovec list over aligned storage, filled
// with seeded pseudo-random bytes, with a checksum per buffer for end-to-end validation.
#ifndef PSBENCH_PAYLOADS_PAYLOAD_H_
#define PSBENCH_PAYLOADS_PAYLOAD_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace psbench {

// XXH3-64 of a byte range.
uint64_t Checksum(std::span<const std::byte> bytes);

// Incremental XXH3-64, for a buffer that arrives in fragments. Same result as Checksum().
class ChecksumStream {
 public:
  ChecksumStream();
  ~ChecksumStream();
  ChecksumStream(const ChecksumStream&) = delete;
  ChecksumStream& operator=(const ChecksumStream&) = delete;
  void Reset();
  void Update(std::span<const std::byte> bytes);
  uint64_t Digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Memory laid out as psbench lays out tensors: page-aligned, and from 2 MiB up aligned to
// 2 MiB and offered to transparent huge pages. For payloads, and for the buffers a transport
// receives them into (a copy between differently laid-out buffers runs markedly slower).
// Sets *allocated to the size actually allocated; nullptr for 0 bytes; free with std::free.
std::byte* AllocateTensorMemory(size_t bytes, size_t* allocated);

// What a Payload of these buffer sizes allocates: its arena, laid out and rounded as the
// constructor does (a 1-byte buffer takes a page).
uint64_t PayloadArenaBytes(std::span<const uint64_t> sizes);

class Payload {
 public:
  // Allocates one arena holding every buffer (each 64-byte aligned, 4 KiB aligned from
  // 4 KiB up, like separately allocated tensors), fills it from `seed` and checksums it.
  Payload(std::span<const uint64_t> sizes, uint64_t seed);
  // A payload of some of `base`'s buffers, in the given order, with no memory of its own
  // (`base` must outlive it): its bytes are base's, its checksums those base had, and its
  // arena base's whole arena (what a transport registers, e.g. for RDMA). For sending parts
  // of one model's memory as payloads of their own.
  static std::unique_ptr<Payload> View(Payload& base, std::span<const size_t> buffers);
  ~Payload();
  Payload(const Payload&) = delete;
  Payload& operator=(const Payload&) = delete;

  size_t num_buffers() const { return iov_.size(); }
  const std::vector<iovec>& iov() const { return iov_; }
  std::span<const std::byte> buffer(size_t i) const {
    return {static_cast<const std::byte*>(iov_[i].iov_base), iov_[i].iov_len};
  }
  std::span<std::byte> mutable_buffer(size_t i) {
    return {static_cast<std::byte*>(iov_[i].iov_base), iov_[i].iov_len};
  }
  uint64_t checksum(size_t i) const { return checksums_[i]; }
  const std::vector<uint64_t>& checksums() const { return checksums_; }
  // Checksums of the buffers as they are now, into *out: checksums() are of the bytes at
  // construction, and a payload rewritten in place (gradients, each step) needs fresh ones.
  void ComputeChecksums(std::vector<uint64_t>* out) const {
    out->clear();
    for (size_t i = 0; i < iov_.size(); ++i) out->push_back(Checksum(buffer(i)));
  }
  const std::vector<uint64_t>& sizes() const { return sizes_; }
  uint64_t total_bytes() const { return total_bytes_; }
  // The whole arena (for transports that register memory once, e.g. RDMA).
  std::span<std::byte> arena() { return {arena_, arena_bytes_}; }
  std::span<const std::byte> arena() const { return {arena_, arena_bytes_}; }

 private:
  std::byte* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  std::vector<iovec> iov_;
  std::vector<uint64_t> sizes_;
  std::vector<uint64_t> checksums_;
  uint64_t total_bytes_ = 0;
  bool owns_arena_ = true;

  Payload() = default;
};

}  // namespace psbench

#endif  // PSBENCH_PAYLOADS_PAYLOAD_H_
