#include "ps/param_store.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace psbench {
namespace {

// Transports hand over bytes at any alignment (a gRPC slice starts where it starts): read
// floats in place when they are aligned, else from a copy in `scratch`.
std::span<const float> Floats(std::span<const std::byte> bytes, std::vector<float>* scratch) {
  const size_t n = bytes.size() / sizeof(float);
  if (n == 0) return {};  // an empty tensor's pointer may be null (memcpy wants real ones)
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) == 0)
    return {reinterpret_cast<const float*>(bytes.data()), n};
  scratch->resize(n);
  std::memcpy(scratch->data(), bytes.data(), bytes.size());
  return *scratch;
}

}  // namespace

ParamStore::~ParamStore() {
  std::vector<Pending> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending.swap(pending_);
  }
  for (Pending& p : pending) std::move(p.done)(absl::CancelledError("the PS is shutting down"));
}

uint64_t ParamStore::updates_applied() const {
  std::lock_guard<std::mutex> lock(mu_);
  return updates_;
}

std::optional<UpdateReport> ParamStore::Report() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialized_) return std::nullopt;
  UpdateReport r;
  r.run_id = run_id_;
  r.sync = (config_.flags & ExchangeHeader::kSync) != 0;
  r.updates = updates_;
  r.workers = accounting_;
  return r;
}

void ParamStore::Account(uint32_t worker, uint64_t step) {
  UpdateReport::Worker& a = accounting_[worker];
  ++a.applied;
  if (!a.steps.Add(step)) a.duplicates.push_back(step);
}

void ParamStore::ReplyHeader(const ExchangeHeader& h, std::span<const std::span<std::byte>> reply) const {
  ExchangeHeader out = h;
  out.updates_applied = updates_;
  std::memcpy(reply[0].data(), &out, sizeof(out));
}

absl::Status ParamStore::Check(const ExchangeHeader& h,
                               std::span<const std::span<const std::byte>> request) const {
  if (h.magic != ExchangeHeader::kMagic || h.version != ExchangeHeader::kVersion)
    return absl::InvalidArgumentError("not a psbench trainer exchange (bad header magic or version)");
  if (h.kind != ExchangeHeader::kInit && h.kind != ExchangeHeader::kStep)
    return absl::InvalidArgumentError(absl::StrCat("unknown exchange kind ", h.kind));
  if (h.num_workers < 1 || h.num_workers > ExchangeHeader::kMaxWorkers || h.worker >= h.num_workers)
    return absl::InvalidArgumentError(absl::StrCat("worker ", h.worker, " of ", h.num_workers));
  if (h.num_tensors != request.size() - 1)
    return absl::InvalidArgumentError(absl::StrCat("header announces ", h.num_tensors,
                                                   " tensors, request has ", request.size() - 1));
  // Counted before the sizes, which are compared with this run's tensors one by one.
  if (initialized_ && h.run_id == run_id_ && request.size() - 1 != params_.size())
    return absl::InvalidArgumentError(absl::StrCat("request has ", request.size() - 1,
                                                   " tensors; this run's shard has ", params_.size()));
  for (size_t i = 1; i < request.size(); ++i) {
    if (request[i].size() % sizeof(float) != 0)
      return absl::InvalidArgumentError(absl::StrCat("tensor ", i - 1, " is not float32 data"));
    if (initialized_ && h.run_id == run_id_ && request[i].size() != params_[i - 1].size() * sizeof(float))
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", i - 1, " has ", request[i].size(), " bytes; this run's has ",
                       params_[i - 1].size() * sizeof(float)));
  }
  return absl::OkStatus();
}

void ParamStore::Reset(const ExchangeHeader& h, std::span<const std::span<const std::byte>> request) {
  initialized_ = true;
  run_id_ = h.run_id;
  config_ = h;
  params_.assign(request.size() - 1, {});
  for (size_t i = 1; i < request.size(); ++i) {
    params_[i - 1].resize(request[i].size() / sizeof(float));
    if (!request[i].empty()) {  // an empty tensor's pointers may be null
      std::memcpy(params_[i - 1].data(), request[i].data(), request[i].size());
    }
  }
  // Only what the run uses: momentum buffers with momentum, sums for a sync step of several
  // workers (each is a copy of the model).
  momentum_.clear();
  sum_.clear();
  if (h.momentum != 0.f) {
    momentum_.resize(params_.size());
    for (size_t i = 0; i < params_.size(); ++i) momentum_[i].assign(params_[i].size(), 0.f);
  }
  if ((h.flags & ExchangeHeader::kSync) && h.num_workers > 1) {
    sum_.resize(params_.size());
    for (size_t i = 0; i < params_.size(); ++i) sum_[i].resize(params_[i].size());
  }
  step_ = 0;
  arrived_.assign(h.num_workers, false);
  arrived_count_ = 0;
  updates_ = 0;
  accounting_.assign(h.num_workers, {});
}

namespace {

// One pass over a tensor (memory-bound: every stream it touches costs a pass over the model's
// bytes). The step is g, or sum + g when the sync step's last worker adds its own gradient, over
// the divisor; with momentum it goes through v as PyTorch's SGD does (v = mu v + g; w -= lr v),
// without it v is never touched (PyTorch keeps no buffer then either). The new values go to
// `out` as well when the reply has a place for them, which may be the request's own gradient
// memory (`out` == `g`: each element is read before it is written, in the same iteration).
template <bool kSum, bool kMomentum, bool kDivide, bool kOut>
void SgdKernel(float* __restrict w, float* __restrict v, const float* sum, const float* g, float* out,
               size_t n, float lr, float mu, float divisor_or_scale) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) {
    float step = kSum ? sum[i] + g[i] : g[i];
    step = kDivide ? step / divisor_or_scale : divisor_or_scale * step;
    if constexpr (kMomentum) {
      step = mu * v[i] + step;
      v[i] = step;
    }
    const float nw = w[i] - lr * step;
    w[i] = nw;
    if constexpr (kOut) out[i] = nw;
  }
}

template <bool kSum, bool kMomentum, bool kDivide>
void SgdKernel(float* w, float* v, const float* sum, const float* g, float* out, size_t n, float lr,
               float mu, float divisor_or_scale) {
  if (out != nullptr) {
    SgdKernel<kSum, kMomentum, kDivide, true>(w, v, sum, g, out, n, lr, mu, divisor_or_scale);
  } else {
    SgdKernel<kSum, kMomentum, kDivide, false>(w, v, sum, g, out, n, lr, mu, divisor_or_scale);
  }
}

template <bool kSum>
void SgdKernel(float* w, float* v, const float* sum, const float* g, float* out, size_t n, float lr,
               float mu, uint32_t divisor) {
  // 1/divisor is exact for a power of two: multiplying is dividing. Otherwise divide, so that
  // the mean is correctly rounded (a sum of W integers that is a multiple of W gives exactly
  // that integer, which multiplying by an inexact 1/W does not promise).
  const bool divide = (divisor & (divisor - 1)) != 0;
  const float d = divide ? static_cast<float>(divisor) : 1.f / static_cast<float>(divisor);
  if (mu != 0.f) {
    if (divide) SgdKernel<kSum, true, true>(w, v, sum, g, out, n, lr, mu, d);
    else SgdKernel<kSum, true, false>(w, v, sum, g, out, n, lr, mu, d);
  } else {
    if (divide) SgdKernel<kSum, false, true>(w, v, sum, g, out, n, lr, mu, d);
    else SgdKernel<kSum, false, false>(w, v, sum, g, out, n, lr, mu, d);
  }
}

// Where the reply's tensor t can take floats directly (aligned, the tensor's size), else null.
float* FloatsOut(std::span<const std::span<std::byte>> reply, size_t t, size_t n) {
  if (t + 1 >= reply.size() || n == 0) return nullptr;
  const std::span<std::byte> b = reply[t + 1];
  if (b.size() != n * sizeof(float) || reinterpret_cast<uintptr_t>(b.data()) % alignof(float) != 0)
    return nullptr;
  return reinterpret_cast<float*>(b.data());
}

}  // namespace

void ParamStore::Apply(size_t t, const float* sum, std::span<const float> gradient, uint32_t divisor,
                       std::span<const std::span<std::byte>> reply) {
  const size_t n = params_[t].size();
  float* w = params_[t].data();
  float* v = momentum_.empty() ? nullptr : momentum_[t].data();
  float* out = FloatsOut(reply, t, n);
  const float lr = config_.learning_rate, mu = config_.momentum;
  if (sum != nullptr) SgdKernel<true>(w, v, sum, gradient.data(), out, n, lr, mu, divisor);
  else SgdKernel<false>(w, v, nullptr, gradient.data(), out, n, lr, mu, divisor);
  // A reply that cannot take floats in place gets a copy.
  if (out == nullptr && t + 1 < reply.size() && !reply[t + 1].empty())
    std::memcpy(reply[t + 1].data(), w, reply[t + 1].size());
}

void ParamStore::Accumulate(size_t t, std::span<const float> gradient, bool first) {
  float* sum = sum_[t].data();
  const float* g = gradient.data();
  const size_t n = gradient.size();
  if (first) {
    if (n > 0) std::memcpy(sum, g, n * sizeof(float));
    return;
  }
#pragma omp simd
  for (size_t i = 0; i < n; ++i) sum[i] += g[i];
}

void ParamStore::CopyParams(std::span<const std::span<std::byte>> reply) const {
  // reply[0] echoes the header (it may alias the request's, which is already there).
  for (size_t i = 1; i < reply.size(); ++i) {
    if (!reply[i].empty()) std::memcpy(reply[i].data(), params_[i - 1].data(), reply[i].size());
  }
}

void ParamStore::OnExchange(std::span<const std::span<const std::byte>> request,
                            std::span<const std::span<std::byte>> reply,
                            absl::AnyInvocable<void(absl::Status) &&> done) {
  if (request.empty() || request[0].size() != sizeof(ExchangeHeader)) {
    std::move(done)(absl::InvalidArgumentError(
        "not a psbench trainer exchange (buffer 0 must be the 64-byte header)"));
    return;
  }
  ExchangeHeader h;
  std::memcpy(&h, request[0].data(), sizeof(h));
  std::vector<Pending> ready, aborted;
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    status = Check(h, request);
    if (status.ok() && h.kind == ExchangeHeader::kInit) {
      if (!initialized_ || h.run_id != run_id_) {
        // A new run: whatever an earlier run left waiting is over (answered below).
        aborted.swap(pending_);
        Reset(h, request);
      }
      CopyParams(reply);
      ReplyHeader(h, reply);
    } else if (status.ok()) {
      if (!initialized_ || h.run_id != run_id_) {
        status = absl::FailedPreconditionError(
            "the PS holds no parameters for this run (the worker must send its initial values first)");
      } else if (h.num_workers != config_.num_workers || h.flags != config_.flags) {
        // arrived_ is sized for the run's workers: a header that disagrees is refused.
        status = absl::FailedPreconditionError(absl::StrCat(
            "worker ", h.worker, " says the run has ", h.num_workers, " workers (",
            (h.flags & ExchangeHeader::kSync) ? "sync" : "async", "); the PS's run has ",
            config_.num_workers, " (", (config_.flags & ExchangeHeader::kSync) ? "sync" : "async", ")"));
      } else if (!(config_.flags & ExchangeHeader::kSync)) {
        for (size_t t = 0; t < params_.size(); ++t)
          Apply(t, nullptr, Floats(request[t + 1], &scratch_), 1, reply);
        ++updates_;
        Account(h.worker, h.step);
        ReplyHeader(h, reply);
      } else if (h.step != step_) {
        status = absl::FailedPreconditionError(absl::StrCat(
            "worker ", h.worker, " sent gradients of step ", h.step, "; the PS is gathering step ", step_));
      } else if (arrived_[h.worker]) {
        status = absl::FailedPreconditionError(
            absl::StrCat("worker ", h.worker, " sent step ", h.step, " twice"));
      } else {
        const bool last = arrived_count_ + 1 == static_cast<int>(config_.num_workers);
        arrived_[h.worker] = true;
        ++arrived_count_;
        Pending p;
        p.reply_copy.assign(reply.begin(), reply.end());
        p.header = h;
        p.done = std::move(done);
        pending_.push_back(std::move(p));
        if (!last) {
          for (size_t t = 0; t < params_.size(); ++t)
            Accumulate(t, Floats(request[t + 1], &scratch_), arrived_count_ == 1);
          return;  // held
        }
        // The last worker of the step: apply the mean gradient (the others' sum plus its own,
        // added in arrival order, in the same pass), answer everyone.
        for (size_t t = 0; t < params_.size(); ++t) {
          Apply(t, config_.num_workers > 1 ? sum_[t].data() : nullptr, Floats(request[t + 1], &scratch_),
                config_.num_workers, reply);
        }
        ++updates_;
        for (uint32_t w = 0; w < config_.num_workers; ++w) Account(w, step_);
        ++step_;
        arrived_.assign(config_.num_workers, false);
        arrived_count_ = 0;
        for (size_t i = 0; i < pending_.size(); ++i) {
          // The last one's reply (this call's) was written by Apply.
          if (i + 1 < pending_.size()) CopyParams(pending_[i].reply_copy);
          ReplyHeader(pending_[i].header, pending_[i].reply_copy);
        }
        ready.swap(pending_);
      }
    }
  }
  for (Pending& p : aborted)
    std::move(p.done)(absl::AbortedError("a new training run started on this PS"));
  if (!ready.empty()) {
    for (Pending& p : ready) std::move(p.done)(absl::OkStatus());
    return;
  }
  std::move(done)(status);
}

}  // namespace psbench
