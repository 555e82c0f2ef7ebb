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
  momentum_.assign(params_.size(), {});
  sum_.assign(params_.size(), {});
  for (size_t i = 0; i < params_.size(); ++i) {
    momentum_[i].assign(params_[i].size(), 0.f);
    sum_[i].assign(params_[i].size(), 0.f);
  }
  step_ = 0;
  arrived_.assign(h.num_workers, false);
  arrived_count_ = 0;
  updates_ = 0;
  accounting_.assign(h.num_workers, {});
}

void ParamStore::Apply(size_t t, std::span<const float> gradient, uint32_t divisor) {
  // SGD with momentum as PyTorch applies it: v = mu v + g; w -= lr v.
  const float lr = config_.learning_rate, mu = config_.momentum;
  float* w = params_[t].data();
  float* v = momentum_[t].data();
  const float* g = gradient.data();
  const size_t n = params_[t].size();
  if ((divisor & (divisor - 1)) == 0) {
    // 1/divisor is exact: multiplying is dividing.
    const float scale = 1.f / static_cast<float>(divisor);
    for (size_t i = 0; i < n; ++i) {
      v[i] = mu * v[i] + scale * g[i];
      w[i] -= lr * v[i];
    }
  } else {
    // The mean correctly rounded (a sum of W integers that is a multiple of W gives exactly
    // that integer, which multiplying by an inexact 1/W does not promise).
    const float d = static_cast<float>(divisor);
    for (size_t i = 0; i < n; ++i) {
      v[i] = mu * v[i] + g[i] / d;
      w[i] -= lr * v[i];
    }
  }
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
        for (size_t t = 0; t < params_.size(); ++t) Apply(t, Floats(request[t + 1], &scratch_), 1);
        ++updates_;
        Account(h.worker, h.step);
        CopyParams(reply);
        ReplyHeader(h, reply);
      } else if (h.step != step_) {
        status = absl::FailedPreconditionError(absl::StrCat(
            "worker ", h.worker, " sent gradients of step ", h.step, "; the PS is gathering step ", step_));
      } else if (arrived_[h.worker]) {
        status = absl::FailedPreconditionError(
            absl::StrCat("worker ", h.worker, " sent step ", h.step, " twice"));
      } else {
        for (size_t t = 0; t < params_.size(); ++t) {
          const std::span<const float> g = Floats(request[t + 1], &scratch_);
          float* sum = sum_[t].data();
          for (size_t i = 0; i < g.size(); ++i) sum[i] += g[i];
        }
        arrived_[h.worker] = true;
        ++arrived_count_;
        Pending p;
        p.reply_copy.assign(reply.begin(), reply.end());
        p.header = h;
        p.done = std::move(done);
        pending_.push_back(std::move(p));
        if (arrived_count_ < static_cast<int>(config_.num_workers)) return;  // held
        // The last worker of the step: apply the mean gradient, answer everyone.
        for (size_t t = 0; t < params_.size(); ++t)
          Apply(t, sum_[t], config_.num_workers);
        ++updates_;
        for (uint32_t w = 0; w < config_.num_workers; ++w) Account(w, step_);
        for (auto& s : sum_) std::fill(s.begin(), s.end(), 0.f);
        ++step_;
        arrived_.assign(config_.num_workers, false);
        arrived_count_ = 0;
        for (Pending& q : pending_) {
          CopyParams(q.reply_copy);
          ReplyHeader(q.header, q.reply_copy);
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
