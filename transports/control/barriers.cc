#include "transports/control/barriers.h"

#include <iterator>

#include "absl/strings/str_format.h"

namespace psbench::control {

// Arrivals expire before anything else is decided: one that is gone (a killed worker, a stray
// client) must keep neither its party count nor its barrier past its lease.
void Barriers::Expire(Clock::time_point now) {
  for (auto it = barriers_.begin(); it != barriers_.end();) {
    Barrier& b = it->second;
    std::erase_if(b.waiting, [&](const auto& w) { return now - w.second.seen > kLease; });
    const bool over = b.released.empty() ? b.waiting.empty() : now - b.released_at > kForget;
    it = over ? barriers_.erase(it) : std::next(it);
  }
}

// Room for one more barrier: the one released longest ago goes (it only answers late
// pollers); barriers with live arrivals stay. False: every barrier held has live arrivals.
bool Barriers::MakeRoom() {
  if (barriers_.size() < kMaxBarriers) return true;
  auto oldest = barriers_.end();
  for (auto it = barriers_.begin(); it != barriers_.end(); ++it) {
    if (it->second.released.empty()) continue;
    if (oldest == barriers_.end() || it->second.released_at < oldest->second.released_at) oldest = it;
  }
  if (oldest == barriers_.end()) return false;
  barriers_.erase(oldest);
  return true;
}

grpc::Status Barriers::Poll(const wire::BarrierRequest& r, wire::BarrierReply* reply, Clock::time_point now) {
  if (r.name().size() > kMaxName) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrFormat("a barrier name of %d bytes (at most %d)", r.name().size(), kMaxName));
  }
  if (r.parties() < 1 || r.worker_index() < 0 || r.worker_index() >= r.parties()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrFormat("barrier '%s': worker index %d is outside [0, %d)",
                                        r.name(), r.worker_index(), r.parties()));
  }
  std::lock_guard lock(mu_);
  Expire(now);
  if (!barriers_.contains(r.name()) && !MakeRoom()) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrFormat("the PS holds %d barriers with workers waiting, its most", kMaxBarriers));
  }
  Barrier& b = barriers_[r.name()];
  std::pair<int, uint64_t> me{r.worker_index(), r.nonce()};
  if (b.released.contains(me)) {
    reply->set_released(true);
    reply->set_arrived(b.parties);
    return grpc::Status::OK;
  }
  if (!b.released.empty() || b.waiting.empty()) {  // a new round, perhaps of a new run
    b.released.clear();
    b.parties = r.parties();
  }
  if (r.parties() != b.parties) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrFormat("barrier '%s' waits for %d workers, this one says %d "
                                        "(same --num-workers everywhere?)",
                                        r.name(), b.parties, r.parties()));
  }
  auto it = b.waiting.find(r.worker_index());
  if (it != b.waiting.end() && it->second.nonce != r.nonce() && now - it->second.seen < kDuplicate) {
    return grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                        absl::StrFormat("two live workers use --worker-index=%d at barrier '%s'",
                                        r.worker_index(), r.name()));
  }
  b.waiting[r.worker_index()] = {r.nonce(), now};
  if (static_cast<int>(b.waiting.size()) == b.parties) {
    for (const auto& [index, arrival] : b.waiting) b.released.insert({index, arrival.nonce});
    b.waiting.clear();
    b.released_at = now;
    reply->set_released(true);
    reply->set_arrived(b.parties);
    return grpc::Status::OK;
  }
  reply->set_arrived(static_cast<int>(b.waiting.size()));
  constexpr int kMaxMissing = 32;  // a bounded reply, whatever --num-workers says
  for (int i = 0; i < b.parties && reply->missing_size() < kMaxMissing; ++i) {
    if (!b.waiting.contains(i)) reply->add_missing(i);
  }
  return grpc::Status::OK;
}

size_t Barriers::size() {
  std::lock_guard lock(mu_);
  return barriers_.size();
}

}  // namespace psbench::control
