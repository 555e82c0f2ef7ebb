// ExchangeHandlers and payload helpers for the kExchange tests of every transport (grpc in
// process, grpc+mpi under mpirun, grpc+verbs in the Soft-RoCE guest).
#ifndef PSBENCH_TESTS_INTEGRATION_EXCHANGE_HANDLERS_H_
#define PSBENCH_TESTS_INTEGRATION_EXCHANGE_HANDLERS_H_

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "payloads/payload.h"
#include "transports/transport.h"

namespace psbench::testing {

// Floats at any alignment: a transport's spans need not be aligned.
inline float LoadFloat(const std::byte* p) {
  float f;
  std::memcpy(&f, p, sizeof f);
  return f;
}
inline void StoreFloat(std::byte* p, float f) { std::memcpy(p, &f, sizeof f); }

// Sizes as a trainer sends them: a small header buffer, then one buffer per variable.
// Multiples of 4 (floats); `large` adds buffers that gRPC and RDMA deliver in pieces.
inline std::vector<uint64_t> TrainingSizes(bool large) {
  std::vector<uint64_t> sizes = {16, 4096, 40, 65536};
  if (large) {
    sizes.push_back(1 << 20);
    sizes.push_back((3 << 20) + 12);
  }
  return sizes;
}

// Gives every float of `p` the value seed + its index within its buffer (modulo 1000, so that
// sums stay exact): new bytes each step, as gradients are.
inline void FillFloats(Payload& p, float seed) {
  for (size_t i = 0; i < p.num_buffers(); ++i) {
    std::span<std::byte> b = p.mutable_buffer(i);
    for (size_t j = 0; j + 4 <= b.size(); j += 4) {
      StoreFloat(b.data() + j, seed + static_cast<float>((j / 4) % 1000));
    }
  }
}

// Empty when every float of `reply` is expected(request float); else the first difference.
template <typename F>
std::string CompareFloats(const Payload& request, const Payload& reply, F expected) {
  for (size_t i = 0; i < request.num_buffers(); ++i) {
    auto in = request.buffer(i), out = reply.buffer(i);
    if (in.size() != out.size()) return absl::StrFormat("buffer %u: sizes differ", i);
    for (size_t j = 0; j + 4 <= in.size(); j += 4) {
      float want = expected(LoadFloat(in.data() + j)), got = LoadFloat(out.data() + j);
      if (want != got) {
        return absl::StrFormat("buffer %u float %u: %g, expected %g", i, j / 4, got, want);
      }
    }
  }
  return "";
}

// reply[j] = f(request[j]) over the floats of one buffer, reading each before writing it (the
// two may be the same memory).
template <typename F>
void MapFloats(std::span<const std::byte> request, std::span<std::byte> reply, F f) {
  for (size_t j = 0; j + 4 <= request.size(); j += 4) {
    StoreFloat(reply.data() + j, f(LoadFloat(request.data() + j)));
  }
}

// Answers at once: every float plus one.
class AddOneHandler final : public ExchangeHandler {
 public:
  void OnExchange(std::span<const std::span<const std::byte>> request,
                  std::span<const std::span<std::byte>> reply,
                  absl::AnyInvocable<void(absl::Status) &&> done) override {
    bool aliased = false;
    for (size_t i = 0; i < request.size(); ++i) {
      aliased |= !request[i].empty() && request[i].data() == reply[i].data();
      MapFloats(request[i], reply[i], [](float x) { return x + 1; });
    }
    {
      std::lock_guard lock(mu_);
      ++calls_;
      aliased_ |= aliased;
    }
    std::move(done)(absl::OkStatus());
  }
  int calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }
  // Whether some reply was written over its request (the transport saved a copy).
  bool aliased() const {
    std::lock_guard lock(mu_);
    return aliased_;
  }

 private:
  mutable std::mutex mu_;
  int calls_ = 0;
  bool aliased_ = false;
};

// A synchronous step: holds every request until `workers` have arrived, then answers all of
// them from a thread of its own with the element-wise sum of their floats, as a PS answers
// with parameters updated from every worker's gradients.
class SyncStepHandler final : public ExchangeHandler {
 public:
  explicit SyncStepHandler(size_t workers) : workers_(workers) {}
  ~SyncStepHandler() override {
    for (auto& t : threads_) t.join();
  }

  void OnExchange(std::span<const std::span<const std::byte>> request,
                  std::span<const std::span<std::byte>> reply,
                  absl::AnyInvocable<void(absl::Status) &&> done) override {
    std::lock_guard lock(mu_);
    pending_.push_back({{request.begin(), request.end()}, {reply.begin(), reply.end()}, std::move(done)});
    max_held_ = std::max(max_held_, pending_.size());
    if (pending_.size() < workers_) return;
    ++steps_;
    threads_.emplace_back([step = std::move(pending_)]() mutable { Answer(step); });
    pending_.clear();
  }

  int steps() const {
    std::lock_guard lock(mu_);
    return steps_;
  }
  size_t max_held() const {
    std::lock_guard lock(mu_);
    return max_held_;
  }

 private:
  struct Held {
    std::vector<std::span<const std::byte>> request;
    std::vector<std::span<std::byte>> reply;
    absl::AnyInvocable<void(absl::Status) &&> done;
  };

  static void Answer(std::vector<Held>& step) {
    // Every request is read before any reply is written: they may share memory.
    std::vector<std::vector<float>> sums(step[0].request.size());
    for (size_t i = 0; i < sums.size(); ++i) {
      sums[i].assign(step[0].request[i].size() / 4, 0.0f);
      for (const Held& h : step) {
        for (size_t j = 0; j < sums[i].size(); ++j) sums[i][j] += LoadFloat(h.request[i].data() + 4 * j);
      }
    }
    for (Held& h : step) {
      for (size_t i = 0; i < sums.size(); ++i) {
        for (size_t j = 0; j < sums[i].size(); ++j) StoreFloat(h.reply[i].data() + 4 * j, sums[i][j]);
      }
      std::move(h.done)(absl::OkStatus());
    }
  }

  const size_t workers_;
  mutable std::mutex mu_;
  std::vector<Held> pending_;
  size_t max_held_ = 0;
  int steps_ = 0;
  std::vector<std::thread> threads_;
};

// Holds every exchange until told: for a PS that shuts down while holding them.
class HoldingHandler final : public ExchangeHandler {
 public:
  void OnExchange(std::span<const std::span<const std::byte>>,
                  std::span<const std::span<std::byte>> reply,
                  absl::AnyInvocable<void(absl::Status) &&> done) override {
    std::lock_guard lock(mu_);
    held_.push_back({{reply.begin(), reply.end()}, std::move(done)});
    cv_.notify_all();
  }

  // Waits until `n` exchanges are held; false if they were not within `timeout`.
  bool WaitHeld(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return held_.size() >= n; });
  }

  // Writes every held reply (its memory must still be valid) and answers with `status`.
  void AnswerAll(const absl::Status& status) {
    std::vector<Held> held;
    {
      std::lock_guard lock(mu_);
      held.swap(held_);
    }
    for (Held& h : held) {
      for (auto b : h.reply) std::memset(b.data(), 0x11, b.size());
      std::move(h.done)(status);
    }
  }

 private:
  struct Held {
    std::vector<std::span<std::byte>> reply;
    absl::AnyInvocable<void(absl::Status) &&> done;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Held> held_;
};

// Fails every exchange with `status`; or, with a non-OK status and `drop`, forgets it without
// answering.
class FailingHandler final : public ExchangeHandler {
 public:
  explicit FailingHandler(absl::Status status, bool drop = false)
      : status_(std::move(status)), drop_(drop) {}
  void OnExchange(std::span<const std::span<const std::byte>>, std::span<const std::span<std::byte>>,
                  absl::AnyInvocable<void(absl::Status) &&> done) override {
    if (!drop_) std::move(done)(status_);
  }

 private:
  const absl::Status status_;
  const bool drop_;
};

}  // namespace psbench::testing

#endif  // PSBENCH_TESTS_INTEGRATION_EXCHANGE_HANDLERS_H_
