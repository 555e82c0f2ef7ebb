#include "transports/verbs/arena_registry.h"

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "transports/verbs/verbs_device.h"

namespace psbench::verbs {

absl::StatusOr<std::shared_ptr<ibv_mr>> ArenaRegistry::Register(ibv_pd* pd, std::span<const std::byte> arena) {
  std::weak_ptr<ibv_mr>& shared = mrs_[{arena.data(), arena.size()}];
  if (std::shared_ptr<ibv_mr> mr = shared.lock()) return mr;
  ibv_mr* mr = ibv_reg_mr(pd, const_cast<std::byte*>(arena.data()), arena.size(), IBV_ACCESS_LOCAL_WRITE);
  if (mr == nullptr) {
    int err = errno;
    return absl::ResourceExhaustedError(absl::StrCat(
        "ibv_reg_mr of a ", arena.size(), "-byte payload failed: ", ErrnoText(err),
        err == ENOMEM || err == EPERM ? " (raise the memlock limit: ulimit -l unlimited)" : ""));
  }
  std::shared_ptr<ibv_mr> owned(mr, [](ibv_mr* m) { ibv_dereg_mr(m); });
  shared = owned;
  return owned;
}

}  // namespace psbench::verbs
