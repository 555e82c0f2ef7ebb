// The PS's model state: parameters of the variables placed on this PS, their momentum, and
// the synchronous step in progress. It answers the trainer's kExchanges (see
// param_protocol.h): in sync mode it sums every worker's gradients of a step, applies SGD
// with momentum to their mean once the last one is in, and only then answers all of them
// with the new parameters; in async mode it applies each worker's gradients as they come.
#ifndef PSBENCH_PS_PARAM_STORE_H_
#define PSBENCH_PS_PARAM_STORE_H_

#include <cstdint>
#include <mutex>
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

 private:
  struct Pending {
    std::vector<std::span<std::byte>> reply_copy;  // the spans outlive the call
    absl::AnyInvocable<void(absl::Status) &&> done;
  };

  absl::Status Check(const ExchangeHeader& h, std::span<const std::span<const std::byte>> request) const;
  void Reset(const ExchangeHeader& h, std::span<const std::span<const std::byte>> request);
  // SGD on tensor t with scale x gradient.
  void Apply(size_t t, std::span<const float> gradient, float scale);
  void CopyParams(std::span<const std::span<std::byte>> reply) const;

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
};

}  // namespace psbench

#endif  // PSBENCH_PS_PARAM_STORE_H_
