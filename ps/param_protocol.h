// What a trainer's kExchange carries (ps-lite's KV push-pull, TensorFlow's PS variables):
// buffer 0 is this header, buffers 1..n the worker's shard of the model on that PS, always
// in the same order. Going out they hold gradients (or initial values); coming back the PS's
// current parameters. The PS needs nothing else to serve a model. A PS also reports, over the
// control plane (ServerInfo::updates), which updates of its run it applied: UpdateReport.
//
// A step's gradients may also go in parts, each as soon as it is ready (a replayed backward
// pass: TensorFlow's PS mode sends each variable's gradient when it is computed): flag kSubset,
// buffer 1 then lists the part's tensors as `num_tensors` uint32 indices into the shard,
// ascending, and buffers 2.. hold those tensors (the reply is laid out alike). Every worker
// splits every step of a run the same way, and a step's parts cover the shard once. In sync mode the PS
// gathers each part over the workers on its own (TensorFlow's per-variable accumulators) and
// answers that part once every worker's is in; a step counts as applied once all its parts
// are. Initial values always go whole.
#ifndef PSBENCH_PS_PARAM_PROTOCOL_H_
#define PSBENCH_PS_PARAM_PROTOCOL_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace psbench {

struct ExchangeHeader {
  static constexpr uint32_t kMagic = 0x54585350;  // "PSXT"
  static constexpr uint16_t kVersion = 1;
  enum Kind : uint16_t {
    kInit = 1,  // buffers hold initial values; the first init of a run sets the PS's
    kStep = 2,  // buffers hold gradients of step `step`
  };
  enum Flags : uint32_t {
    kSync = 1,
    kSubset = 2,  // kStep: a part of the shard, listed in buffer 1
  };
  // The most workers a run may have: the PS keeps state per worker, sized by the first
  // header of a run, so a header must not ask for billions of them.
  static constexpr uint32_t kMaxWorkers = 1u << 16;
  // The most tensors a shard may have (a trace holds at most 100,000): the PS keeps a few
  // vectors per tensor, so an empty one must not cost it more than its bytes on the wire.
  static constexpr uint32_t kMaxTensors = 1u << 17;

  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  uint16_t kind = kInit;
  uint32_t worker = 0;
  uint32_t num_workers = 1;
  uint64_t step = 0;
  uint32_t flags = kSync;
  float learning_rate = 0.01f;
  float momentum = 0.9f;
  uint32_t num_tensors = 0;  // tensors after this header (and, with kSubset, the index list)
  uint64_t run_id = 0;       // all workers of a run agree on it; a new run resets the PS
  // In the PS's reply: the updates of this run the PS had applied when it answered (steps in
  // sync mode, pushes in async mode), to match parameters read back with the PS's report of
  // which updates it applied (ParamStore::Report). Zero going out.
  uint64_t updates_applied = 0;
  uint8_t reserved[8] = {};
};
static_assert(sizeof(ExchangeHeader) == 64);

// A set of step numbers as disjoint, non-adjacent ranges: one range for a worker whose steps
// were all applied in order. Text form "0-41,43,45-99" (empty: none).
class StepSet {
 public:
  // Adds `step`; false when it was already there.
  bool Add(uint64_t step);
  bool Contains(uint64_t step) const;
  uint64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // first -> last (inclusive), ascending.
  const std::map<uint64_t, uint64_t>& ranges() const { return ranges_; }
  std::string ToString() const;
  static absl::StatusOr<StepSet> Parse(const std::string& text);
  bool operator==(const StepSet& other) const { return ranges_ == other.ranges_; }

 private:
  std::map<uint64_t, uint64_t> ranges_;
  uint64_t size_ = 0;
};

// What a PS applied in its current run, per worker.
struct UpdateReport {
  struct Worker {
    uint64_t applied = 0;            // updates applied, duplicates included
    StepSet steps;                   // the distinct steps applied
    std::vector<uint64_t> duplicates;  // steps applied more than once, once per extra time
  };
  uint64_t run_id = 0;
  bool sync = true;
  uint64_t updates = 0;  // steps (sync) or pushes (async) applied
  std::vector<Worker> workers;  // by worker index

  // {"run_id", "sync", "num_workers", "updates", "workers": [{"worker", "applied", "steps",
  // "duplicates"}]}
  nlohmann::json ToJson() const;
  static absl::StatusOr<UpdateReport> FromJson(const nlohmann::json& j);
};

}  // namespace psbench

#endif  // PSBENCH_PS_PARAM_PROTOCOL_H_
