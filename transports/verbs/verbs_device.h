// libibverbs plumbing shared by both sides of grpc+verbs: choosing and opening a device and
// port, registered memory, and a completion queue that can be polled or slept on.
#ifndef PSBENCH_TRANSPORTS_VERBS_VERBS_DEVICE_H_
#define PSBENCH_TRANSPORTS_VERBS_VERBS_DEVICE_H_

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "transports/transport.h"

namespace psbench::verbs {

// "Invalid argument (errno 22)": how verbs calls report failure.
std::string ErrnoText(int err);

// An opened device, its protection domain and the port and GID everything uses.
class Device {
 public:
  // Picks the device and port from `options` (defaults: the first device with an active port,
  // its first active port, GID index 0). Errors say what was found.
  static absl::StatusOr<std::unique_ptr<Device>> Open(const RdmaOptions& options);
  ~Device();

  ibv_context* context() const { return context_; }
  ibv_pd* pd() const { return pd_; }
  uint8_t port() const { return port_; }
  uint16_t lid() const { return lid_; }
  const ibv_gid& gid() const { return gid_; }
  int gid_index() const { return gid_index_; }
  bool use_grh() const { return use_grh_; }
  int mtu_bytes() const { return mtu_bytes_; }  // the flag's, else the port's active MTU
  int max_sge() const { return max_sge_; }
  int max_qp_wr() const { return max_qp_wr_; }
  int max_cqe() const { return max_cqe_; }
  const std::string& name() const { return name_; }
  // "rxe0 port 1 GID 0 MTU 1024 RoCE"
  std::string Describe() const;

 private:
  Device() = default;
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  uint8_t port_ = 1;
  uint16_t lid_ = 0;
  ibv_gid gid_{};
  int gid_index_ = 0;
  bool use_grh_ = false;
  int mtu_bytes_ = 1024;
  int max_sge_ = 1;
  int max_qp_wr_ = 1;
  int max_cqe_ = 1;
  std::string name_;
  std::string link_layer_;
};

ibv_mtu MtuEnum(int bytes);
int MtuBytes(ibv_mtu mtu);

// Page-aligned memory registered once for the life of a connection.
class Region {
 public:
  static absl::StatusOr<std::unique_ptr<Region>> Allocate(ibv_pd* pd, size_t bytes, int access,
                                                          const char* what);
  ~Region();
  std::byte* data() const { return data_; }
  size_t size() const { return bytes_; }
  uint32_t lkey() const { return mr_->lkey; }
  uint32_t rkey() const { return mr_->rkey; }
  uint64_t address() const { return reinterpret_cast<uint64_t>(data_); }

 private:
  Region() = default;
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
  ibv_mr* mr_ = nullptr;
};

// A completion queue with its completion channel: polled in a loop (--rdma-poll=busy) or
// armed and slept on (event). An eventfd lets another thread wake a sleeper.
class CompletionQueue {
 public:
  static absl::StatusOr<std::unique_ptr<CompletionQueue>> Create(const Device& device, int entries);
  ~CompletionQueue();
  ibv_cq* cq() const { return cq_; }
  int entries() const { return entries_; }
  int Poll(ibv_wc* wc, int n) { return ibv_poll_cq(cq_, n, wc); }
  // Arms the queue and polls once: completions found then are returned at once (into wc,
  // up to n). Otherwise sleeps until a completion event, a Wake() or `timeout` (at most 1 s)
  // and returns 0; the caller polls again.
  absl::StatusOr<int> Sleep(absl::Duration timeout, ibv_wc* wc, int n);
  void Wake();

 private:
  CompletionQueue() = default;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  int wake_fd_ = -1;
  int entries_ = 0;
  unsigned unacked_events_ = 0;
};

}  // namespace psbench::verbs

#endif  // PSBENCH_TRANSPORTS_VERBS_VERBS_DEVICE_H_
