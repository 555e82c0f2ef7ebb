// The PS's model state: parameters of the variables placed on this PS, their momentum, and
// the synchronous step in progress. It answers the trainer's kExchanges (see
// param_protocol.h): in sync mode it sums every worker's gradients of a step, applies SGD
// with momentum to their mean once the last one is in, and only then answers all of them
// with the new parameters; in async mode it applies each worker's gradients as they come.
// A step may come in parts (kSubset): each part is gathered over the workers on its own.
// It accounts for every update it applies: which steps of which worker (Report), so that
// parameters read back can be explained exactly, even when a worker died mid-run (a step
// whose parts did not all arrive is applied in part, and not counted).
#ifndef PSBENCH_PS_PARAM_STORE_H_
#define PSBENCH_PS_PARAM_STORE_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "ps/param_protocol.h"
#include "transports/transport.h"

namespace psbench {

// A deliberate error of the store, for the tests of the no-lost-update check only: psbench-ps
// arms it from the environment variable PSBENCH_TEST_PS_FAULT (no flag, so no command line
// reaches it). For tensor `tensor` of this PS's shard, the update of worker `worker`'s step
// `step` is left out (kDrop), applied twice (kDuplicate), or applied to the next tensor of the
// same exchange instead (kWrongTensor: that one gets it on top of its own, over the elements
// both have). The store still accounts the update as applied once, as a store with such a bug
// would: only the parameters show it.
struct TestFault {
  enum Kind { kDrop, kDuplicate, kWrongTensor } kind = kDrop;
  uint32_t worker = 0;
  uint64_t step = 0;
  uint32_t tensor = 0;
  std::string ToString() const;  // as parsed
};
// "drop:W:S:T", "duplicate:W:S:T" or "wrong-tensor:W:S:T".
absl::StatusOr<TestFault> ParseTestFault(absl::string_view text);

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
  // Arms a test fault (TestFault) for every run after this call.
  void SetTestFault(const TestFault& fault);

 private:
  // One exchange as the store reads it: which tensors of the shard it carries, in order, their
  // values, and where the reply's header and tensors go.
  struct Part {
    ExchangeHeader header;
    std::span<const uint32_t> tensors;
    std::span<const std::span<const std::byte>> values;
    std::span<std::byte> reply_header;
    std::span<const std::span<std::byte>> reply;  // may be shorter than `values`
  };
  struct Pending {
    ExchangeHeader header;
    std::vector<uint32_t> tensors;
    std::span<std::byte> reply_header;
    std::vector<std::span<std::byte>> reply;  // the spans outlive the call
    absl::AnyInvocable<void(absl::Status) &&> done;
  };
  // A sync part being gathered over the workers, keyed by its first tensor.
  struct Gather {
    uint64_t step = 0;
    std::vector<uint32_t> tensors;  // as the step's first worker split it
    std::vector<bool> arrived;
    uint32_t count = 0;
    std::vector<Pending> pending;
  };
  // An async worker's step in parts: the tensors applied so far.
  struct StepParts {
    std::vector<bool> applied;
    size_t count = 0;
  };

  absl::Status Check(const ExchangeHeader& h, std::span<const std::span<const std::byte>> request) const;
  // The gradient of the part's i-th tensor as the store uses it: as received, or as the armed
  // test fault changes it.
  std::span<const float> Gradient(const Part& part, size_t i);
  // Reads a step's request into *part (kSubset: its index list into *listed, checked against
  // the shard, as its tensors' sizes).
  absl::Status Read(const ExchangeHeader& h, std::span<const std::span<const std::byte>> request,
                    std::span<const std::span<std::byte>> reply, std::vector<uint32_t>* listed,
                    Part* part) const;
  void Reset(const ExchangeHeader& h, std::span<const std::span<const std::byte>> request);
  // SGD on tensor t with (sum + gradient) / divisor (sum may be null), the new values also
  // written into `out` (when it is not empty).
  void Apply(size_t t, const float* sum, std::span<const float> gradient, uint32_t divisor,
             std::span<std::byte> out);
  // A sync step's gradient added to (first: copied into) sum_[t].
  void Accumulate(size_t t, std::span<const float> gradient, bool first);
  // The parameters of `tensors` into `reply`, in order.
  void CopyParams(std::span<const uint32_t> tensors, std::span<const std::span<std::byte>> reply) const;
  // Writes the reply's header: the request's, with the updates applied so far.
  void ReplyHeader(const ExchangeHeader& h, std::span<std::byte> out) const;
  void Account(uint32_t worker, uint64_t step);
  // Async: applies a worker's part at once (refused when it repeats a tensor of its step).
  absl::Status ApplyAsync(const Part& part);
  // Sync: gathers a worker's part. Either refuses it, or holds it (takes `done`), or, as the
  // part's last worker, applies the part and moves every exchange it answers into *ready.
  absl::Status GatherSync(const Part& part, absl::AnyInvocable<void(absl::Status) &&>& done,
                          std::vector<Pending>* ready);

  mutable std::mutex mu_;
  bool initialized_ = false;
  uint64_t run_id_ = 0;
  ExchangeHeader config_;  // hyperparameters of the run
  std::vector<std::vector<float>> params_, momentum_, sum_;
  std::vector<uint32_t> all_tensors_;  // 0..n-1: a whole shard's part
  std::vector<float> scratch_;  // a misaligned incoming tensor, copied
  std::optional<TestFault> fault_;
  std::vector<float> fault_out_, fault_from_;  // a gradient as the fault changed it; its source
  // Sync: the parts, keyed by first tensor; the run's first step splits the shard into them,
  // and every later step must be split alike.
  std::map<uint32_t, Gather> gathers_;
  std::vector<bool> first_step_claimed_;           // tensors in a part of the first step
  std::map<uint64_t, size_t> sync_applied_;        // tensors applied, per step not yet whole
  std::vector<std::map<uint64_t, StepParts>> async_steps_;  // per worker, steps not yet whole
  uint64_t updates_ = 0;
  std::vector<UpdateReport::Worker> accounting_;  // by worker
};

}  // namespace psbench

#endif  // PSBENCH_PS_PARAM_STORE_H_
