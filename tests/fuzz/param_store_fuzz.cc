// The trainer's parameter store (ps/param_store.h) as the PS's exchange handler: a sequence
// of kExchange requests, each an ExchangeHeader and float32 tensors, against one ParamStore.
// Input, repeated: 64 header bytes, one byte = tensors (low 3 bits, 0..7) and whether the
// reply aliases the request (bit 3), then per tensor one byte of size in floats (0..31,
// times 4 bytes, plus 1..3 stray bytes when bit 5 is set) and its bytes. Every exchange is
// answered exactly once (at once, when its step completes, or when the store is destroyed)
// and only writes its own reply buffers.
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "ps/param_protocol.h"
#include "ps/param_store.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using namespace psbench;

struct Exchange {
  std::vector<std::vector<std::byte>> request;
  std::vector<std::vector<std::byte>> reply;  // own memory unless aliasing
  std::vector<std::span<const std::byte>> request_spans;
  std::vector<std::span<std::byte>> reply_spans;
  int answered = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::unique_ptr<Exchange>> exchanges;
  {
    ParamStore store;
    size_t at = 0;
    auto take = [&](size_t n) {
      const size_t k = std::min(n, size - at);
      std::vector<std::byte> out(n);
      if (k > 0) std::memcpy(out.data(), data + at, k);
      at += k;
      return out;
    };
    while (at < size && exchanges.size() < 64) {
      auto x = std::make_unique<Exchange>();
      x->request.push_back(take(sizeof(ExchangeHeader)));
      const uint8_t shape = at < size ? data[at++] : 0;
      const size_t tensors = shape & 7;
      const bool alias = shape & 8;
      for (size_t t = 0; t < tensors; ++t) {
        const uint8_t b = at < size ? data[at++] : 0;
        const size_t bytes = (b & 31) * sizeof(float) + ((b & 32) ? (b >> 6) + 1 : 0);
        x->request.push_back(take(bytes));
      }
      for (auto& r : x->request) {
        x->reply.emplace_back(r.size());
        x->request_spans.emplace_back(r);
      }
      for (size_t i = 0; i < x->request.size(); ++i) {
        x->reply_spans.emplace_back(alias ? std::span<std::byte>(x->request[i])
                                          : std::span<std::byte>(x->reply[i]));
      }
      Exchange* raw = x.get();
      exchanges.push_back(std::move(x));
      store.OnExchange(raw->request_spans, raw->reply_spans,
                       [raw](absl::Status) { ++raw->answered; });
    }
  }  // the store answers what it still holds
  for (const auto& x : exchanges) FUZZ_CHECK(x->answered == 1);
  return 0;
}
