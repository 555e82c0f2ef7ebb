#include "transports/verbs/verbs_device.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psbench::verbs {

std::string ErrnoText(int err) { return absl::StrCat(std::strerror(err), " (errno ", err, ")"); }

ibv_mtu MtuEnum(int bytes) {
  switch (bytes) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    default: return IBV_MTU_4096;
  }
}

int MtuBytes(ibv_mtu mtu) { return 128 << static_cast<int>(mtu); }

namespace {

const char* PortStateName(ibv_port_state s) { return ibv_port_state_str(s); }

bool GidIsZero(const ibv_gid& g) {
  for (uint8_t b : g.raw) {
    if (b != 0) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Device>> Device::Open(const RdmaOptions& options) {
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr || count == 0) {
    if (list != nullptr) ibv_free_device_list(list);
    return absl::FailedPreconditionError(
        absl::StrCat("no RDMA device found: ibv_get_device_list returned ", count,
                     list == nullptr ? absl::StrCat(" (", ErrnoText(errno), ")") : ""));
  }
  std::unique_ptr<ibv_device*, void (*)(ibv_device**)> guard(list, ibv_free_device_list);
  std::vector<std::string> seen;  // what was found, for the error message
  for (int i = 0; i < count; ++i) {
    std::string name = ibv_get_device_name(list[i]);
    if (!options.device.empty() && name != options.device) {
      seen.push_back(name);
      continue;
    }
    ibv_context* ctx = ibv_open_device(list[i]);
    if (ctx == nullptr) {
      seen.push_back(absl::StrCat(name, " (cannot open: ", ErrnoText(errno), ")"));
      continue;
    }
    ibv_device_attr dev{};
    if (int rc = ibv_query_device(ctx, &dev); rc != 0) {
      ibv_close_device(ctx);
      seen.push_back(absl::StrCat(name, " (query failed: ", ErrnoText(rc), ")"));
      continue;
    }
    int chosen = 0;
    ibv_port_attr chosen_attr{};
    std::vector<std::string> ports;
    for (int p = 1; p <= dev.phys_port_cnt; ++p) {
      if (options.port != 0 && p != options.port) continue;
      ibv_port_attr attr{};
      if (ibv_query_port(ctx, static_cast<uint8_t>(p), &attr) != 0) continue;
      ports.push_back(absl::StrCat("port ", p, " ", PortStateName(attr.state)));
      if (attr.state == IBV_PORT_ACTIVE && chosen == 0) {
        chosen = p;
        chosen_attr = attr;
      }
    }
    if (chosen == 0) {
      ibv_close_device(ctx);
      if (options.port != 0 && ports.empty()) {
        seen.push_back(absl::StrCat(name, " (has no port ", options.port, "; ports 1-",
                                    dev.phys_port_cnt, ")"));
      } else {
        seen.push_back(absl::StrCat(name, " (", absl::StrJoin(ports, ", "), ")"));
      }
      continue;
    }
    auto d = std::unique_ptr<Device>(new Device);
    d->context_ = ctx;
    d->name_ = name;
    d->port_ = static_cast<uint8_t>(chosen);
    d->lid_ = chosen_attr.lid;
    d->max_sge_ = dev.max_sge;
    d->max_qp_wr_ = dev.max_qp_wr;
    d->max_cqe_ = dev.max_cqe;
    d->link_layer_ = chosen_attr.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand";
    d->use_grh_ = chosen_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
    d->gid_index_ = options.gid_index;
    if (options.gid_index >= chosen_attr.gid_tbl_len) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--rdma-gid-index=", options.gid_index, ": ", name, " port ", chosen, " has ",
          chosen_attr.gid_tbl_len, " GIDs"));
    }
    if (int rc = ibv_query_gid(ctx, d->port_, options.gid_index, &d->gid_); rc != 0) {
      return absl::FailedPreconditionError(absl::StrCat("cannot read GID ", options.gid_index,
                                                        " of ", name, " port ", chosen, ": ",
                                                        ErrnoText(rc)));
    }
    if (GidIsZero(d->gid_) && d->use_grh_) {
      return absl::FailedPreconditionError(
          absl::StrCat("GID ", options.gid_index, " of ", name, " port ", chosen,
                       " is empty (RoCE needs a GID; does the netdev have an address? try "
                       "another --rdma-gid-index)"));
    }
    int active = MtuBytes(chosen_attr.active_mtu);
    if (options.mtu > active) {
      return absl::InvalidArgumentError(absl::StrCat("--rdma-mtu=", options.mtu, " exceeds ",
                                                     name, " port ", chosen,
                                                     "'s active MTU of ", active));
    }
    d->mtu_bytes_ = options.mtu != 0 ? options.mtu : active;
    d->pd_ = ibv_alloc_pd(ctx);
    if (d->pd_ == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("ibv_alloc_pd on ", name, " failed: ", ErrnoText(errno)));
    }
    return d;
  }
  if (!options.device.empty() && seen.size() == static_cast<size_t>(count)) {
    bool named = false;
    for (const auto& s : seen) named |= s.rfind(options.device + " ", 0) == 0;
    if (!named) {
      return absl::NotFoundError(absl::StrCat("--rdma-device=", options.device,
                                              " not found; devices: ", absl::StrJoin(seen, ", ")));
    }
  }
  return absl::FailedPreconditionError(
      absl::StrCat("no active RDMA port: ", absl::StrJoin(seen, "; ")));
}

Device::~Device() {
  if (pd_ != nullptr) ibv_dealloc_pd(pd_);
  if (context_ != nullptr) ibv_close_device(context_);
}

std::string Device::Describe() const {
  return absl::StrCat(name_, " port ", port_, " GID ", gid_index_, " MTU ", mtu_bytes_, " ",
                      link_layer_);
}

absl::StatusOr<std::unique_ptr<Region>> Region::Allocate(ibv_pd* pd, size_t bytes, int access,
                                                        const char* what) {
  auto r = std::unique_ptr<Region>(new Region);
  size_t rounded = (bytes + 4095) / 4096 * 4096;
  r->data_ = static_cast<std::byte*>(std::aligned_alloc(4096, rounded));
  if (r->data_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", rounded, " bytes for ", what));
  }
  std::memset(r->data_, 0, rounded);  // touch every page before pinning it
  r->bytes_ = rounded;
  r->mr_ = ibv_reg_mr(pd, r->data_, rounded, access);
  if (r->mr_ == nullptr) {
    int err = errno;
    return absl::ResourceExhaustedError(absl::StrCat(
        "ibv_reg_mr of ", rounded, " bytes for ", what, " failed: ", ErrnoText(err),
        err == ENOMEM || err == EPERM ? " (raise the memlock limit: ulimit -l unlimited)" : ""));
  }
  return r;
}

Region::~Region() {
  if (mr_ != nullptr) ibv_dereg_mr(mr_);
  std::free(data_);
}

absl::StatusOr<std::unique_ptr<CompletionQueue>> CompletionQueue::Create(const Device& device,
                                                                       int entries) {
  auto q = std::unique_ptr<CompletionQueue>(new CompletionQueue);
  q->channel_ = ibv_create_comp_channel(device.context());
  if (q->channel_ == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("ibv_create_comp_channel failed: ", ErrnoText(errno)));
  }
  int flags = fcntl(q->channel_->fd, F_GETFL);
  fcntl(q->channel_->fd, F_SETFL, flags | O_NONBLOCK);
  q->entries_ = std::min(entries, device.max_cqe());
  q->cq_ = ibv_create_cq(device.context(), q->entries_, nullptr, q->channel_, 0);
  if (q->cq_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("ibv_create_cq with ", q->entries_,
                                                     " entries failed: ", ErrnoText(errno)));
  }
  q->entries_ = q->cq_->cqe;
  q->wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (q->wake_fd_ < 0) return absl::InternalError(absl::StrCat("eventfd: ", ErrnoText(errno)));
  return q;
}

CompletionQueue::~CompletionQueue() {
  if (cq_ != nullptr) {
    if (unacked_events_ > 0) ibv_ack_cq_events(cq_, unacked_events_);
    ibv_destroy_cq(cq_);
  }
  if (channel_ != nullptr) ibv_destroy_comp_channel(channel_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

absl::StatusOr<int> CompletionQueue::Sleep(absl::Duration timeout, ibv_wc* wc, int n) {
  if (int rc = ibv_req_notify_cq(cq_, 0); rc != 0) {
    return absl::InternalError(absl::StrCat("ibv_req_notify_cq: ", ErrnoText(rc)));
  }
  // A completion that arrived between the caller's last poll and arming raises no event.
  int got = ibv_poll_cq(cq_, n, wc);
  if (got != 0) return got;
  pollfd fds[2] = {{channel_->fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  int ms = static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(timeout) + 1, 1000));
  if (timeout <= absl::ZeroDuration()) ms = 0;
  int ready = ::poll(fds, 2, ms);
  if (ready < 0 && errno != EINTR) {
    return absl::InternalError(absl::StrCat("poll: ", ErrnoText(errno)));
  }
  if (ready > 0 && (fds[0].revents & POLLIN)) {
    ibv_cq* cq;
    void* context;
    while (ibv_get_cq_event(channel_, &cq, &context) == 0) {
      // Acknowledging is costly (a lock); batch it.
      if (++unacked_events_ >= 64) {
        ibv_ack_cq_events(cq_, unacked_events_);
        unacked_events_ = 0;
      }
    }
  }
  if (ready > 0 && (fds[1].revents & POLLIN)) {
    uint64_t v;
    (void)!read(wake_fd_, &v, sizeof v);
  }
  return 0;
}

void CompletionQueue::Wake() {
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

}  // namespace psbench::verbs
