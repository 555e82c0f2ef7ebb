// The worker's memory registrations, one per arena: payloads over the same memory
// (Payload::View) share the registration of the arena they lie in, instead of each pinning it
// again. Registration is once per payload, never per message: buffers are sent from where
// they are.
#ifndef PSBENCH_TRANSPORTS_VERBS_ARENA_REGISTRY_H_
#define PSBENCH_TRANSPORTS_VERBS_ARENA_REGISTRY_H_

#include <infiniband/verbs.h>

#include <cstddef>
#include <map>
#include <memory>
#include <span>
#include <utility>

#include "absl/status/statusor.h"

namespace psbench::verbs {

class ArenaRegistry {
 public:
  // The registration covering `arena` (made now if no live payload holds one); it is
  // deregistered when its last holder lets go. Must not outlive the protection domain.
  absl::StatusOr<std::shared_ptr<ibv_mr>> Register(ibv_pd* pd, std::span<const std::byte> arena);

 private:
  std::map<std::pair<const std::byte*, size_t>, std::weak_ptr<ibv_mr>> mrs_;
};

}  // namespace psbench::verbs

#endif  // PSBENCH_TRANSPORTS_VERBS_ARENA_REGISTRY_H_
