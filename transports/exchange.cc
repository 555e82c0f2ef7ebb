#include "transports/exchange.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "payloads/size.h"

namespace psbench {
namespace {

constexpr size_t kCacheLine = 64;
constexpr size_t kPage = 4096;
// A cached block serves a request at most this many times smaller than it.
constexpr size_t kMaxWaste = 2;
constexpr size_t kMaxFreeBlocks = 64;

uint64_t RoundUp(uint64_t n, uint64_t align) { return (n + align - 1) / align * align; }

}  // namespace

uint64_t LayOutBuffers(std::span<const uint64_t> sizes, std::vector<uint64_t>* offsets) {
  offsets->clear();
  uint64_t end = 0;
  for (uint64_t size : sizes) {
    end = RoundUp(end, size >= kPage ? kPage : kCacheLine);
    offsets->push_back(end);
    end += size;
  }
  return end;
}

std::shared_ptr<BlockPool> BlockPool::Create(Registrar registrar) {
  return std::shared_ptr<BlockPool>(new BlockPool(std::move(registrar)));
}

BlockPool::~BlockPool() {
  for (Block* b : free_) Free(b);
}

absl::StatusOr<std::shared_ptr<BlockPool::Block>> BlockPool::Take(uint64_t bytes) {
  Block* block = nullptr;
  {
    std::lock_guard lock(mu_);
    // The smallest free block that fits without wasting most of itself.
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      size_t size = (*it)->size_;
      if (size >= bytes && size <= std::max<uint64_t>(kMaxWaste * bytes, kPage) &&
          (best == free_.end() || size < (*best)->size_)) {
        best = it;
      }
    }
    if (best != free_.end()) {
      block = *best;
      free_.erase(best);
      free_bytes_ -= block->size_;
    }
  }
  if (block == nullptr) {
    auto fresh = std::make_unique<Block>();
    try {
      fresh->data_ = AllocateTensorMemory(bytes, &fresh->size_);
    } catch (const std::bad_alloc&) {  // a size from the wire may be absurd: refuse, live on
      return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes"));
    }
    if (registrar_.prepare && fresh->size_ > 0) {
      if (absl::Status s = registrar_.prepare(fresh->data_, fresh->size_, &fresh->handle_,
                                              &fresh->lkey_);
          !s.ok()) {
        std::free(fresh->data_);
        return s;
      }
    }
    block = fresh.release();
  }
  {
    std::lock_guard lock(mu_);
    used_bytes_ += block->size_;
    peak_used_bytes_ = std::max(peak_used_bytes_, used_bytes_);
  }
  return std::shared_ptr<Block>(block, [pool = shared_from_this()](Block* b) { pool->Return(b); });
}

void BlockPool::Return(Block* block) {
  std::vector<Block*> evicted;
  {
    std::lock_guard lock(mu_);
    used_bytes_ -= block->size_;
    free_.push_front(block);
    free_bytes_ += block->size_;
    // Never more cached than was ever in use at once: a PS's working set, not its history.
    while (!free_.empty() &&
           (free_bytes_ > peak_used_bytes_ || free_.size() > kMaxFreeBlocks)) {
      evicted.push_back(free_.back());
      free_bytes_ -= free_.back()->size_;
      free_.pop_back();
    }
  }
  for (Block* b : evicted) Free(b);  // deregistering can be slow: not under the lock
}

void BlockPool::Free(Block* block) {
  if (registrar_.release && block->handle_ != nullptr) registrar_.release(block->handle_);
  std::free(block->data_);
  delete block;
}

void ExchangeBuffers::PlaceReply(const std::vector<uint64_t>& offsets) {
  reply.clear();
  for (size_t i = 0; i < sizes.size(); ++i) {
    reply.emplace_back(block == nullptr || sizes[i] == 0 ? nullptr : block->data() + offsets[i],
                       sizes[i]);
  }
}

absl::Status VerifyRequest(const ExchangeBuffers& buffers, const std::vector<uint64_t>& sent) {
  if (sent.size() != buffers.request.size()) {
    return absl::DataLossError(absl::StrFormat("%u checksums for %u buffers", sent.size(),
                                               buffers.request.size()));
  }
  for (size_t i = 0; i < sent.size(); ++i) {
    uint64_t got = Checksum(buffers.request[i]);
    if (got != sent[i]) {
      return absl::DataLossError(absl::StrFormat(
          "buffer %u of %u (%s): checksum 0x%016x received, 0x%016x sent", i + 1, sent.size(),
          FormatSize(buffers.request[i].size()), got, sent[i]));
    }
  }
  return absl::OkStatus();
}

std::shared_ptr<ExchangeHub> ExchangeHub::Create(ExchangeHandler* handler) {
  return std::shared_ptr<ExchangeHub>(new ExchangeHub(handler));
}

// The state behind one `done`: answers once, when called or else when destroyed.
struct ExchangeHub::DoneState {
  std::shared_ptr<ExchangeHub> hub;
  uint64_t id = 0;
  std::shared_ptr<ExchangeBuffers> buffers;
  bool called = false;

  ~DoneState() {
    if (!called) {
      hub->Answer(id, *buffers,
                  absl::InternalError("the PS's exchange handler dropped the exchange unanswered"));
    }
  }
};

bool ExchangeHub::Run(std::shared_ptr<ExchangeBuffers> buffers, Deliver deliver) {
  uint64_t id;
  {
    std::lock_guard lock(mu_);
    if (closed_) return false;
    id = next_id_++;
    held_.emplace(id, std::move(deliver));
  }
  auto state = std::make_unique<DoneState>();
  state->hub = shared_from_this();
  state->id = id;
  state->buffers = buffers;
  handler_->OnExchange(buffers->request, buffers->reply,
                       [state = std::move(state)](absl::Status status) mutable {
                         state->called = true;
                         state->hub->Answer(state->id, *state->buffers, status);
                         state.reset();  // frees the memory now, not when the caller drops us
                       });
  return true;
}

void ExchangeHub::Answer(uint64_t id, ExchangeBuffers& buffers, const absl::Status& status) {
  {
    std::lock_guard lock(mu_);
    if (closed_ || !held_.contains(id)) return;  // cancelled, or answered twice
  }
  // Checksummed outside the lock: it reads the whole reply, and answers may come from many
  // threads at once.
  if (status.ok() && buffers.validate) {
    buffers.reply_checksums.clear();
    for (const auto& b : buffers.reply) buffers.reply_checksums.push_back(Checksum(b));
  }
  std::lock_guard lock(mu_);
  auto it = held_.find(id);
  if (it == held_.end()) return;  // cancelled meanwhile
  Deliver deliver = std::move(it->second);
  held_.erase(it);
  deliver(status, /*answered=*/true);
}

void ExchangeHub::Close(const absl::Status& status) {
  std::lock_guard lock(mu_);
  closed_ = true;
  for (auto& [id, deliver] : held_) deliver(status, /*answered=*/false);
  held_.clear();
}

size_t ExchangeHub::held() const {
  std::lock_guard lock(mu_);
  return held_.size();
}

absl::Status NoExchangeHandlerError() {
  return absl::FailedPreconditionError(
      "this PS does not serve exchanges (it has no exchange handler)");
}

absl::Status ExchangeCancelledError() {
  return absl::UnavailableError("the PS shut down while its handler held the exchange");
}

absl::Status CheckExchangePayloads(const Payload* request, const Payload* reply) {
  if (request == nullptr || reply == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "StartExchange: the ", request == nullptr ? "request" : "reply",
        " payload is not registered"));
  }
  if (request->sizes() != reply->sizes()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "StartExchange: the reply payload (%u buffers, %u bytes) must have exactly the "
        "request's buffer sizes (%u buffers, %u bytes)",
        reply->num_buffers(), reply->total_bytes(), request->num_buffers(),
        request->total_bytes()));
  }
  return absl::OkStatus();
}

absl::Status CheckExchange(size_t server, size_t num_servers, const Payload* request,
                           const Payload* reply) {
  if (server >= num_servers) {
    return absl::InvalidArgumentError(
        absl::StrCat("StartExchange: no PS ", server, " (", num_servers, " PS)"));
  }
  return CheckExchangePayloads(request, reply);
}

absl::Status ExchangeNeedsStartExchange() {
  return absl::InvalidArgumentError("kExchange needs a reply payload: use StartExchange");
}

absl::Status CheckReplySizes(const std::vector<uint64_t>& reply,
                             const std::vector<uint64_t>& request) {
  if (reply.size() != request.size()) {
    return absl::DataLossError(absl::StrFormat("the exchange reply has %u buffers, the request %u",
                                               reply.size(), request.size()));
  }
  for (size_t i = 0; i < reply.size(); ++i) {
    if (reply[i] != request[i]) {
      return absl::DataLossError(absl::StrFormat(
          "buffer %u of the exchange reply has %u bytes, the request's %u", i + 1, reply[i],
          request[i]));
    }
  }
  return absl::OkStatus();
}

std::vector<std::span<std::byte>> ReplyBuffers(const Payload& reply) {
  std::vector<std::span<std::byte>> out;
  out.reserve(reply.num_buffers());
  for (const iovec& v : reply.iov()) out.emplace_back(static_cast<std::byte*>(v.iov_base), v.iov_len);
  return out;
}

void ScatterWriter::Reset(std::span<const std::span<std::byte>> buffers) {
  buffers_ = buffers;
  buffer_ = 0;
  offset_ = 0;
  written_ = 0;
  capacity_ = 0;
  for (const auto& b : buffers) capacity_ += b.size();
}

bool ScatterWriter::Write(std::span<const std::byte> bytes) {
  if (bytes.size() > capacity_ - written_) return false;
  written_ += bytes.size();
  while (!bytes.empty()) {
    std::span<std::byte> b = buffers_[buffer_];
    uint64_t n = std::min<uint64_t>(bytes.size(), b.size() - offset_);
    if (n > 0) std::memcpy(b.data() + offset_, bytes.data(), n);
    bytes = bytes.subspan(n);
    offset_ += n;
    while (buffer_ < buffers_.size() && offset_ == buffers_[buffer_].size()) {
      ++buffer_;
      offset_ = 0;
    }
  }
  return true;
}

}  // namespace psbench
