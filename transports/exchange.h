// kExchange plumbing shared by every transport. PS side: the memory a handler sees (pooled
// tensor memory where a request must be made contiguous or a reply needs room of its own),
// and the handler's answers, which may come later from any thread and even after the server
// has gone, so they reach the server only through an ExchangeHub that it closes on the way
// out. Worker side: the checks StartExchange makes, and copying a reply into its buffers.
#ifndef PSBENCH_TRANSPORTS_EXCHANGE_H_
#define PSBENCH_TRANSPORTS_EXCHANGE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "payloads/payload.h"
#include "transports/transport.h"

namespace psbench {

// Offsets of buffers of `sizes` laid out as Payload lays out its buffers (64-byte aligned,
// 4 KiB aligned from 4 KiB up); returns the bytes they span.
uint64_t LayOutBuffers(std::span<const uint64_t> sizes, std::vector<uint64_t>* offsets);

// Tensor memory (AllocateTensorMemory) for exchanges, reused from step to step: a PS sees
// the same request sizes every step. Thread-safe. A block returns to the pool when its last
// reference drops, on any thread; blocks keep their pool alive.
class BlockPool : public std::enable_shared_from_this<BlockPool> {
 public:
  class Block {
   public:
    std::byte* data() const { return data_; }
    size_t size() const { return size_; }
    uint32_t lkey() const { return lkey_; }  // what the registrar gave, e.g. an RDMA lkey

   private:
    friend class BlockPool;
    std::byte* data_ = nullptr;
    size_t size_ = 0;
    void* handle_ = nullptr;
    uint32_t lkey_ = 0;
  };

  // What a transport does once to each block before using it and before freeing it (RDMA:
  // register and deregister it). `prepare` returns a handle for `release` and a key.
  struct Registrar {
    std::function<absl::Status(std::byte* data, size_t size, void** handle, uint32_t* key)>
        prepare;
    std::function<void(void* handle)> release;
  };

  static std::shared_ptr<BlockPool> Create(Registrar registrar = {});
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // A block of at least `bytes` (contents undefined).
  absl::StatusOr<std::shared_ptr<Block>> Take(uint64_t bytes);

 private:
  explicit BlockPool(Registrar registrar) : registrar_(std::move(registrar)) {}
  void Return(Block* block);
  void Free(Block* block);

  const Registrar registrar_;
  std::mutex mu_;
  std::list<Block*> free_;  // most recently returned first
  size_t free_bytes_ = 0;
  size_t used_bytes_ = 0;
  size_t peak_used_bytes_ = 0;
};

// One exchange's buffers as its handler sees them, and the memory behind them. Shared by the
// transport and the handler's `done`, so it lives until both are finished with it: after a
// server shut down, a handler may still write its reply before calling `done`.
struct ExchangeBuffers {
  std::vector<std::span<const std::byte>> request;
  std::vector<std::span<std::byte>> reply;
  std::vector<uint64_t> sizes;
  // Declared before `keep`, so destroyed after it: what that memory needs (an RDMA device,
  // to deregister a region).
  std::shared_ptr<const void> keep_owner;
  std::shared_ptr<BlockPool::Block> block;  // pooled memory the spans may point into
  std::shared_ptr<const void> keep;         // other memory they point into (message, region)
  bool validate = false;                    // checksum the reply once the handler answered
  std::vector<uint64_t> reply_checksums;    // set before the transport is told (OK, validate)

  // Lays the reply out in `block` (Take()n for LayOutBuffers(sizes)) at `offsets`.
  void PlaceReply(const std::vector<uint64_t>& offsets);
};

// Checks a received request against the checksums its worker sent: DATA_LOSS naming the
// first buffer that differs.
absl::Status VerifyRequest(const ExchangeBuffers& buffers, const std::vector<uint64_t>& sent);

// The exchanges a PS's handler holds. The handler's `done` reaches the transport only through
// here: once the server closes the hub, a `done` does nothing (but free its memory).
class ExchangeHub : public std::enable_shared_from_this<ExchangeHub> {
 public:
  // How a transport answers one exchange. Runs at most once: with the handler's status
  // (`answered`), or with the status Close() was given (`answered` false: the handler still
  // holds the buffers, which must not be reused). Runs under the hub's lock, on the thread of
  // `done` or of Close(): it must be quick and must not call into the hub.
  using Deliver = absl::AnyInvocable<void(const absl::Status& status, bool answered)>;

  static std::shared_ptr<ExchangeHub> Create(ExchangeHandler* handler);

  ExchangeHandler* handler() const { return handler_; }
  // Hands an exchange to the handler; `deliver` answers it. Returns false, without calling
  // the handler, once the hub is closed. A `done` that the handler destroys without calling
  // answers INTERNAL, so no worker waits for it forever.
  bool Run(std::shared_ptr<ExchangeBuffers> buffers, Deliver deliver);
  // Delivers `status` to every exchange still held; later `done`s and Run()s do nothing.
  void Close(const absl::Status& status);
  size_t held() const;

 private:
  struct DoneState;
  explicit ExchangeHub(ExchangeHandler* handler) : handler_(handler) {}
  void Answer(uint64_t id, ExchangeBuffers& buffers, const absl::Status& status);

  ExchangeHandler* const handler_;
  mutable std::mutex mu_;
  bool closed_ = false;
  uint64_t next_id_ = 0;
  absl::flat_hash_map<uint64_t, Deliver> held_;
};

// "this PS serves no exchanges" (FAILED_PRECONDITION), and the status of exchanges a PS
// cancels when it shuts down (UNAVAILABLE).
absl::Status NoExchangeHandlerError();
absl::Status ExchangeCancelledError();

// Worker side: a StartExchange's payloads must both be registered, with equal buffer sizes.
// INVALID_ARGUMENT otherwise.
absl::Status CheckExchangePayloads(const Payload* request, const Payload* reply);
// The same, after checking that PS `server` is one of the client's `num_servers`.
absl::Status CheckExchange(size_t server, size_t num_servers, const Payload* request,
                           const Payload* reply);
// What Client::Start(Op::kExchange, ...) completes with: an exchange needs its reply payload.
absl::Status ExchangeNeedsStartExchange();
// DATA_LOSS unless a reply's buffer sizes are the request's.
absl::Status CheckReplySizes(const std::vector<uint64_t>& reply, const std::vector<uint64_t>& request);
// The buffers of a registered reply payload, which an exchange writes: registered payloads
// are const to a transport, but a reply payload is the caller's to have written.
std::vector<std::span<std::byte>> ReplyBuffers(const Payload& reply);

// Copies bytes that arrive in order, in pieces of any size, into consecutive buffers.
class ScatterWriter {
 public:
  void Reset(std::span<const std::span<std::byte>> buffers);
  // False (and nothing written) if `bytes` run past the last buffer.
  bool Write(std::span<const std::byte> bytes);
  uint64_t written() const { return written_; }

 private:
  std::span<const std::span<std::byte>> buffers_;
  size_t buffer_ = 0;
  uint64_t offset_ = 0;
  uint64_t written_ = 0;
  uint64_t capacity_ = 0;
};

}  // namespace psbench

#endif  // PSBENCH_TRANSPORTS_EXCHANGE_H_
