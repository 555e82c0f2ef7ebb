#include "ps/param_store.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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
    for (auto& [first, g] : gathers_) {
      for (Pending& p : g.pending) pending.push_back(std::move(p));
    }
    gathers_.clear();
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

std::string TestFault::ToString() const {
  const char* name = kind == kDrop ? "drop" : kind == kDuplicate ? "duplicate" : "wrong-tensor";
  return absl::StrCat(name, ":", worker, ":", step, ":", tensor);
}

absl::StatusOr<TestFault> ParseTestFault(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  TestFault f;
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "test fault '", text, "': expected drop|duplicate|wrong-tensor:WORKER:STEP:TENSOR"));
  };
  if (parts.size() != 4) return bad();
  if (parts[0] == "drop") f.kind = TestFault::kDrop;
  else if (parts[0] == "duplicate") f.kind = TestFault::kDuplicate;
  else if (parts[0] == "wrong-tensor") f.kind = TestFault::kWrongTensor;
  else return bad();
  if (!absl::SimpleAtoi(parts[1], &f.worker) || !absl::SimpleAtoi(parts[2], &f.step) ||
      !absl::SimpleAtoi(parts[3], &f.tensor))
    return bad();
  return f;
}

void ParamStore::SetTestFault(const TestFault& fault) {
  std::lock_guard<std::mutex> lock(mu_);
  fault_ = fault;
}

std::span<const float> ParamStore::Gradient(const Part& part, size_t i) {
  std::span<const float> g = Floats(part.values[i], &scratch_);
  if (!fault_ || part.header.worker != fault_->worker || part.header.step != fault_->step) return g;
  const uint32_t t = part.tensors[i];
  switch (fault_->kind) {
    case TestFault::kDrop:
      if (t != fault_->tensor) return g;
      fault_out_.assign(g.size(), 0.f);
      return fault_out_;
    case TestFault::kDuplicate:
      if (t != fault_->tensor) return g;
      fault_out_.assign(g.begin(), g.end());
      for (float& x : fault_out_) x *= 2;
      return fault_out_;
    case TestFault::kWrongTensor: {
      const auto at = std::find(part.tensors.begin(), part.tensors.end(), fault_->tensor);
      if (at == part.tensors.end() || part.tensors.size() < 2) return g;
      const size_t from = static_cast<size_t>(at - part.tensors.begin());
      if (i == from) {
        // Kept: applying this tensor may write its reply over the request's gradient.
        fault_from_.assign(g.begin(), g.end());
        fault_out_.assign(g.size(), 0.f);
        return fault_out_;
      }
      if (i != (from + 1) % part.tensors.size()) return g;
      fault_out_.assign(g.begin(), g.end());
      std::span<const float> moved = from < i ? std::span<const float>(fault_from_)
                                              : Floats(part.values[from], &fault_from_);
      for (size_t e = 0; e < std::min(moved.size(), fault_out_.size()); ++e) fault_out_[e] += moved[e];
      return fault_out_;
    }
  }
  return g;
}

void ParamStore::Account(uint32_t worker, uint64_t step) {
  UpdateReport::Worker& a = accounting_[worker];
  ++a.applied;
  if (!a.steps.Add(step)) a.duplicates.push_back(step);
}

void ParamStore::ReplyHeader(const ExchangeHeader& h, std::span<std::byte> out) const {
  ExchangeHeader reply = h;
  reply.updates_applied = updates_;
  if (out.size() >= sizeof(reply)) std::memcpy(out.data(), &reply, sizeof(reply));
}

absl::Status ParamStore::Check(const ExchangeHeader& h,
                               std::span<const std::span<const std::byte>> request) const {
  if (h.magic != ExchangeHeader::kMagic || h.version != ExchangeHeader::kVersion)
    return absl::InvalidArgumentError("not a psbench trainer exchange (bad header magic or version)");
  if (h.kind != ExchangeHeader::kInit && h.kind != ExchangeHeader::kStep)
    return absl::InvalidArgumentError(absl::StrCat("unknown exchange kind ", h.kind));
  if (h.num_workers < 1 || h.num_workers > ExchangeHeader::kMaxWorkers || h.worker >= h.num_workers)
    return absl::InvalidArgumentError(absl::StrCat("worker ", h.worker, " of ", h.num_workers));
  // A newer client's option is refused, not ignored.
  if (h.flags & ~uint32_t{ExchangeHeader::kSync | ExchangeHeader::kSubset})
    return absl::InvalidArgumentError(absl::StrFormat("unknown header flags 0x%x", h.flags));
  if (h.num_tensors > ExchangeHeader::kMaxTensors)
    return absl::InvalidArgumentError(
        absl::StrCat(h.num_tensors, " tensors, over the ", ExchangeHeader::kMaxTensors, " a PS holds"));
  if (h.flags & ExchangeHeader::kSubset) {
    // A part of the shard: checked against it once read (Read).
    if (h.kind != ExchangeHeader::kStep)
      return absl::InvalidArgumentError("initial values go whole, not as a part of the shard");
    if (h.num_tensors == 0 || h.num_tensors != request.size() - 2)
      return absl::InvalidArgumentError(absl::StrCat("header announces a part of ", h.num_tensors,
                                                     " tensors, request has ", request.size() - 2));
    return absl::OkStatus();
  }
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

absl::Status ParamStore::Read(const ExchangeHeader& h, std::span<const std::span<const std::byte>> request,
                              std::span<const std::span<std::byte>> reply, std::vector<uint32_t>* listed,
                              Part* part) const {
  part->header = h;
  part->reply_header = reply.empty() ? std::span<std::byte>() : reply[0];
  if (!(h.flags & ExchangeHeader::kSubset)) {
    part->tensors = all_tensors_;
    part->values = request.subspan(1);
    part->reply = reply.empty() ? reply : reply.subspan(1);
    return absl::OkStatus();
  }
  const std::span<const std::byte> list = request[1];
  if (list.size() != size_t{h.num_tensors} * sizeof(uint32_t))
    return absl::InvalidArgumentError(absl::StrCat("a part's index list has ", list.size(),
                                                   " bytes for ", h.num_tensors, " tensors"));
  listed->resize(h.num_tensors);
  std::memcpy(listed->data(), list.data(), list.size());
  for (size_t i = 0; i < listed->size(); ++i) {
    const uint32_t t = (*listed)[i];
    if (t >= params_.size() || (i > 0 && t <= (*listed)[i - 1]))
      return absl::InvalidArgumentError(absl::StrCat(
          "a part lists tensor ", t, " at ", i, ": indices must ascend within the shard's ",
          params_.size(), " tensors"));
    if (request[i + 2].size() != params_[t].size() * sizeof(float))
      return absl::InvalidArgumentError(absl::StrCat("tensor ", t, " has ", request[i + 2].size(),
                                                     " bytes; this run's has ", params_[t].size() * sizeof(float)));
  }
  part->tensors = *listed;
  part->values = request.subspan(2);
  part->reply = reply.size() > 2 ? reply.subspan(2) : std::span<const std::span<std::byte>>();
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
  all_tensors_.resize(params_.size());
  for (size_t i = 0; i < all_tensors_.size(); ++i) all_tensors_[i] = static_cast<uint32_t>(i);
  gathers_.clear();
  first_step_claimed_.assign(params_.size(), false);
  sync_applied_.clear();
  async_steps_.assign(h.num_workers, {});
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

// Where a reply tensor can take n floats directly (aligned, the tensor's size), else null.
float* FloatsOut(std::span<std::byte> b, size_t n) {
  if (n == 0 || b.size() != n * sizeof(float) || reinterpret_cast<uintptr_t>(b.data()) % alignof(float) != 0)
    return nullptr;
  return reinterpret_cast<float*>(b.data());
}

// The i-th of `reply`, or nothing when the reply is shorter.
std::span<std::byte> At(std::span<const std::span<std::byte>> reply, size_t i) {
  return i < reply.size() ? reply[i] : std::span<std::byte>();
}

}  // namespace

void ParamStore::Apply(size_t t, const float* sum, std::span<const float> gradient, uint32_t divisor,
                       std::span<std::byte> reply) {
  const size_t n = params_[t].size();
  float* w = params_[t].data();
  float* v = momentum_.empty() ? nullptr : momentum_[t].data();
  float* out = FloatsOut(reply, n);
  const float lr = config_.learning_rate, mu = config_.momentum;
  if (sum != nullptr) SgdKernel<true>(w, v, sum, gradient.data(), out, n, lr, mu, divisor);
  else SgdKernel<false>(w, v, nullptr, gradient.data(), out, n, lr, mu, divisor);
  // A reply that cannot take floats in place gets a copy.
  if (out == nullptr && !reply.empty()) std::memcpy(reply.data(), w, reply.size());
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

void ParamStore::CopyParams(std::span<const uint32_t> tensors,
                            std::span<const std::span<std::byte>> reply) const {
  for (size_t i = 0; i < tensors.size() && i < reply.size(); ++i) {
    if (!reply[i].empty()) std::memcpy(reply[i].data(), params_[tensors[i]].data(), reply[i].size());
  }
}

absl::Status ParamStore::ApplyAsync(const Part& part) {
  const ExchangeHeader& h = part.header;
  // A whole shard is a step of its own (a repeat is applied and reported as a duplicate); a
  // part is tracked until its step's parts have covered the shard.
  const bool whole = part.tensors.size() == params_.size();
  StepParts* sp = nullptr;
  if (!whole) {
    // A worker has a step or two in flight; steps it never completes must not pile up.
    constexpr size_t kMaxStepsInProgress = 64;
    auto& steps = async_steps_[h.worker];
    if (!steps.contains(h.step) && steps.size() >= kMaxStepsInProgress)
      return absl::FailedPreconditionError(absl::StrCat("worker ", h.worker, " has ", steps.size(),
                                                        " steps with parts still to come; step ", h.step, " is one too many"));
    sp = &steps[h.step];
    if (sp->applied.empty()) sp->applied.assign(params_.size(), false);
    for (uint32_t t : part.tensors) {
      if (sp->applied[t])
        return absl::FailedPreconditionError(
            absl::StrCat("worker ", h.worker, " sent tensor ", t, " of step ", h.step, " twice"));
    }
  }
  for (size_t i = 0; i < part.tensors.size(); ++i)
    Apply(part.tensors[i], nullptr, Gradient(part, i), 1, At(part.reply, i));
  bool step_done = whole;
  if (!whole) {
    for (uint32_t t : part.tensors) sp->applied[t] = true;
    sp->count += part.tensors.size();
    step_done = sp->count == params_.size();
    if (step_done) async_steps_[h.worker].erase(h.step);
  }
  if (step_done) {
    ++updates_;
    Account(h.worker, h.step);
  }
  ReplyHeader(h, part.reply_header);
  return absl::OkStatus();
}

absl::Status ParamStore::GatherSync(const Part& part, absl::AnyInvocable<void(absl::Status) &&>& done,
                                    std::vector<Pending>* ready) {
  const ExchangeHeader& h = part.header;
  const uint32_t first = part.tensors.empty() ? 0 : part.tensors[0];
  auto it = gathers_.find(first);
  const bool known = it != gathers_.end();
  // The run's first step splits the shard into parts; every later step must split it alike.
  if ((!known && updates_ > 0) ||
      (known && !std::equal(it->second.tensors.begin(), it->second.tensors.end(), part.tensors.begin(),
                            part.tensors.end()))) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", h.worker, " split step ", h.step, " otherwise than the run's first step (the part from tensor ",
        first, ")"));
  }
  const uint64_t gathering = known ? it->second.step : 0;
  if (h.step != gathering) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", h.worker, " sent gradients of step ", h.step, "; the PS is gathering step ", gathering,
        part.tensors.size() < params_.size() ? absl::StrCat(" of the part from tensor ", first) : ""));
  }
  if (known && it->second.arrived[h.worker])
    return absl::FailedPreconditionError(absl::StrCat("worker ", h.worker, " sent step ", h.step, " twice"));
  if (!known) {
    // A new part of the first step: its tensors must be in no other part.
    for (uint32_t t : part.tensors) {
      if (first_step_claimed_[t])
        return absl::FailedPreconditionError(absl::StrCat(
            "worker ", h.worker, " sent tensor ", t, " of step ", h.step, " in two parts"));
    }
    for (uint32_t t : part.tensors) first_step_claimed_[t] = true;
    Gather g;
    g.tensors.assign(part.tensors.begin(), part.tensors.end());
    g.arrived.assign(config_.num_workers, false);
    it = gathers_.emplace(first, std::move(g)).first;
  }
  Gather& g = it->second;
  const bool last = g.count + 1 == config_.num_workers;
  g.arrived[h.worker] = true;
  ++g.count;
  Pending p;
  p.header = h;
  p.tensors = g.tensors;
  p.reply_header = part.reply_header;
  p.reply.assign(part.reply.begin(), part.reply.end());
  p.done = std::move(done);
  g.pending.push_back(std::move(p));
  if (!last) {
    for (size_t i = 0; i < part.tensors.size(); ++i)
      Accumulate(part.tensors[i], Gradient(part, i), g.count == 1);
    return absl::OkStatus();  // held
  }
  // The last worker of the part: apply the mean gradient (the others' sum plus its own,
  // added in arrival order, in the same pass), answer everyone.
  for (size_t i = 0; i < part.tensors.size(); ++i) {
    const uint32_t t = part.tensors[i];
    Apply(t, config_.num_workers > 1 ? sum_[t].data() : nullptr, Gradient(part, i), config_.num_workers,
          At(part.reply, i));
  }
  size_t& applied = sync_applied_[g.step];
  applied += part.tensors.size();
  if (applied == params_.size()) {
    ++updates_;
    for (uint32_t w = 0; w < config_.num_workers; ++w) Account(w, g.step);
    sync_applied_.erase(g.step);
  }
  ++g.step;
  g.arrived.assign(config_.num_workers, false);
  g.count = 0;
  for (size_t i = 0; i < g.pending.size(); ++i) {
    // The last one's reply (this call's) was written by Apply.
    if (i + 1 < g.pending.size()) CopyParams(g.pending[i].tensors, g.pending[i].reply);
    ReplyHeader(g.pending[i].header, g.pending[i].reply_header);
  }
  ready->swap(g.pending);
  return absl::OkStatus();
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
  std::vector<uint32_t> listed;
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    status = Check(h, request);
    if (status.ok() && h.kind == ExchangeHeader::kInit) {
      if (!initialized_ || h.run_id != run_id_) {
        // A new run: whatever an earlier run left waiting is over (answered below).
        for (auto& [first, g] : gathers_) {
          for (Pending& p : g.pending) aborted.push_back(std::move(p));
        }
        Reset(h, request);
      }
      CopyParams(all_tensors_, reply.empty() ? reply : reply.subspan(1));
      if (!reply.empty()) ReplyHeader(h, reply[0]);
    } else if (status.ok()) {
      Part part;
      if (!initialized_) {
        status = absl::FailedPreconditionError(
            "the PS holds no parameters for this run (the worker must send its initial values first)");
      } else if (h.run_id != run_id_) {
        // Another run's initial values came since this one's: two jobs share this PS.
        status = absl::FailedPreconditionError(absl::StrFormat(
            "the PS now serves another run (%016x, %d worker%s), whose workers sent their initial "
            "values after this run's: two jobs on one PS, or a --run-id reused?",
            run_id_, config_.num_workers, config_.num_workers == 1 ? "" : "s"));
      } else if (h.num_workers != config_.num_workers ||
                 (h.flags & ExchangeHeader::kSync) != (config_.flags & ExchangeHeader::kSync)) {
        // The per-worker state is sized for the run's workers: a header that disagrees is refused.
        status = absl::FailedPreconditionError(absl::StrCat(
            "worker ", h.worker, " says the run has ", h.num_workers, " workers (",
            (h.flags & ExchangeHeader::kSync) ? "sync" : "async", "); the PS's run has ",
            config_.num_workers, " (", (config_.flags & ExchangeHeader::kSync) ? "sync" : "async", ")"));
      } else {
        status = Read(h, request, reply, &listed, &part);
        if (status.ok() && !(config_.flags & ExchangeHeader::kSync)) {
          status = ApplyAsync(part);
        } else if (status.ok()) {
          status = GatherSync(part, done, &ready);
          if (status.ok() && ready.empty()) return;  // held
        }
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
