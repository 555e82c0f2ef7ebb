// The PS's model state: parameters of the variables placed on this PS, their momentum, and
// the synchronous step in progress. It answers the trainer's kExchanges (see
// param_protocol.h): in sync mode it sums every worker's gradients of a step, applies SGD
// with momentum to their mean once the last one is in, and only then answers all of them
// with the new parameters; in async mode it applies each worker's gradients as they come.
// It accounts for every update it applies: which steps of which worker (Report), so that
// parameters read back can be explained exactly, even when a worker died mid-run.
#ifndef PSBENCH_PS_PARAM_STORE_H_
#define PSBENCH_PS_PARAM_STORE_H_

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "ps/param_protocol.h"
#include "transports/transport.h"

namespace psbench {

class ParamStore final : public ExchangeHandler {
 public:
  ParamStore() = default;
  ~ParamStore() override;

  void OnExchange(std::span<const std::span<const std::byte>> request,
                  std::span<const std::span<std::byte>> reply,
                  absl::AnyInvocable<void(absl::Status) &&> done) override;

  // Updates applied so far (steps in sync mode, worker pushes in async mode).
  uint64_t updates_applied() const;
  // Which updates of the current run were applied; nullopt before the first run.
  std::optional<UpdateReport> Report() const;

 private:
  struct Pending {
    std::vector<std::span<std::byte>> reply_copy;  // the spans outlive the call
    ExchangeHeader header;
    absl::AnyInvocable<void(absl::Status) &&> done;
  };

  absl::Status Check(const ExchangeHeader& h, std::span<const std::span<const std::byte>> request) const;
  void Reset(const ExchangeHeader& h, std::span<const std::span<const std::byte>> request);
  // SGD on tensor t with (sum + gradient) / divisor (sum may be null), the new values also
  // written into the reply's tensor t.
  void Apply(size_t t, const float* sum, std::span<const float> gradient, uint32_t divisor,
             std::span<const std::span<std::byte>> reply);
  // A sync step's gradient added to (first: copied into) sum_[t].
  void Accumulate(size_t t, std::span<const float> gradient, bool first);
  void CopyParams(std::span<const std::span<std::byte>> reply) const;
  // Writes the reply's header: the request's, with the updates applied so far.
  void ReplyHeader(const ExchangeHeader& h, std::span<const std::span<std::byte>> reply) const;
  void Account(uint32_t worker, uint64_t step);

  mutable std::mutex mu_;
  bool initialized_ = false;
  uint64_t run_id_ = 0;
  ExchangeHeader config_;  // hyperparameters of the run
  std::vector<std::vector<float>> params_, momentum_, sum_;
  std::vector<float> scratch_;  // a misaligned incoming tensor, copied
  uint64_t step_ = 0;  // sync: the step being gathered
  std::vector<bool> arrived_;
  int arrived_count_ = 0;
  std::vector<Pending> pending_;
  uint64_t updates_ = 0;
  std::vector<UpdateReport::Worker> accounting_;  // by worker
};

}  // namespace psbench

#endif  // PSBENCH_PS_PARAM_STORE_H_
