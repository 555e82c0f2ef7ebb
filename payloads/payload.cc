#include "payloads/payload.h"

#include <sys/mman.h>
#include <xxhash.h>

#include <cstdlib>
#include <cstring>
#include <new>

namespace psbench {
namespace {

constexpr size_t kCacheLine = 64;
constexpr size_t kPage = 4096;
constexpr size_t kHugePage = size_t{2} << 20;

size_t RoundUp(size_t n, size_t align) { return (n + align - 1) / align * align; }

// Lays out the buffers as separately allocated tensors would be: cache-line aligned, and
// page aligned from a page up (so large buffers start on pages, as RDMA likes them). Returns
// the arena's end; `offsets` (if given) gets each buffer's start.
size_t LayOut(std::span<const uint64_t> sizes, std::vector<size_t>* offsets) {
  size_t end = 0;
  for (uint64_t size : sizes) {
    end = RoundUp(end, size >= kPage ? kPage : kCacheLine);
    if (offsets != nullptr) offsets->push_back(end);
    end += size;
  }
  return end;
}

// Large blocks are aligned to 2 MiB and offered to transparent huge pages: faulting in a
// 1 GiB payload 4 KiB at a time otherwise costs more than filling it.
size_t TensorAlignment(size_t bytes) { return bytes >= kHugePage ? kHugePage : kPage; }
// What AllocateTensorMemory takes for `bytes` (aligned_alloc wants a multiple of the alignment).
size_t TensorAllocationBytes(size_t bytes) { return RoundUp(bytes, TensorAlignment(bytes)); }

// splitmix64: fast, and every seed gives a full-period, well-mixed stream.
inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Fills `data` 8 bytes at a time. Each buffer gets its own stream (seed, index) so that its bytes
// depend only on the seed, its position and its length, not on the arena layout.
void Fill(std::byte* data, size_t size, uint64_t seed, size_t index) {
  // Hash (seed, index) into the start state so that buffers do not share overlapping streams.
  uint64_t mix = index;
  uint64_t state = seed ^ SplitMix64(mix);
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    const uint64_t word = SplitMix64(state);
    std::memcpy(data + i, &word, 8);
  }
  if (i < size) {
    const uint64_t word = SplitMix64(state);
    std::memcpy(data + i, &word, size - i);
  }
}

}  // namespace

uint64_t Checksum(std::span<const std::byte> bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

struct ChecksumStream::State {
  XXH3_state_t* xxh = nullptr;
};

ChecksumStream::ChecksumStream() : state_(std::make_unique<State>()) {
  state_->xxh = XXH3_createState();  // allocated by xxHash with the alignment it needs
  if (state_->xxh == nullptr) throw std::bad_alloc();
  Reset();
}

ChecksumStream::~ChecksumStream() { XXH3_freeState(state_->xxh); }

void ChecksumStream::Reset() { XXH3_64bits_reset(state_->xxh); }

void ChecksumStream::Update(std::span<const std::byte> bytes) {
  XXH3_64bits_update(state_->xxh, bytes.data(), bytes.size());
}

uint64_t ChecksumStream::Digest() const { return XXH3_64bits_digest(state_->xxh); }

Payload::Payload(std::span<const uint64_t> sizes, uint64_t seed)
    : sizes_(sizes.begin(), sizes.end()) {
  std::vector<size_t> offsets;
  offsets.reserve(sizes.size());
  const size_t end = LayOut(sizes, &offsets);
  for (uint64_t size : sizes) total_bytes_ += size;
  arena_ = AllocateTensorMemory(end, &arena_bytes_);
  iov_.reserve(sizes.size());
  checksums_.reserve(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::byte* data = arena_ == nullptr ? nullptr : arena_ + offsets[i];
    iov_.push_back({data, sizes[i]});
    Fill(data, sizes[i], seed, i);
    checksums_.push_back(Checksum({data, sizes[i]}));
  }
  // Padding is zeroed so that registering or dumping the whole arena is deterministic.
  if (arena_ != nullptr) {
    size_t cursor = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::memset(arena_ + cursor, 0, offsets[i] - cursor);
      cursor = offsets[i] + sizes[i];
    }
    std::memset(arena_ + cursor, 0, arena_bytes_ - cursor);
  }
}

std::unique_ptr<Payload> Payload::View(Payload& base, std::span<const size_t> buffers) {
  std::unique_ptr<Payload> view(new Payload());
  view->owns_arena_ = false;
  view->arena_ = base.arena_;
  view->arena_bytes_ = base.arena_bytes_;
  for (size_t i : buffers) {
    view->iov_.push_back(base.iov_.at(i));
    view->sizes_.push_back(base.sizes_[i]);
    view->checksums_.push_back(base.checksums_[i]);
    view->total_bytes_ += base.sizes_[i];
  }
  return view;
}

Payload::~Payload() {
  if (owns_arena_) std::free(arena_);
}

std::byte* AllocateTensorMemory(size_t bytes, size_t* allocated) {
  const size_t align = TensorAlignment(bytes);
  *allocated = TensorAllocationBytes(bytes);
  if (*allocated == 0) return nullptr;
  auto* memory = static_cast<std::byte*>(std::aligned_alloc(align, *allocated));
  if (memory == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  if (align == kHugePage) ::madvise(memory, *allocated, MADV_HUGEPAGE);  // a hint only
#endif
  return memory;
}

uint64_t PayloadArenaBytes(std::span<const uint64_t> sizes) {
  return TensorAllocationBytes(LayOut(sizes, nullptr));
}

}  // namespace psbench
