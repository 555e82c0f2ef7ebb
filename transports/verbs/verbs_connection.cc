#include "transports/verbs/verbs_connection.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"

namespace psbench::verbs {
namespace {

constexpr uint64_t kSendBit = 1ull << 63;
constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
constexpr uint64_t kMaxMetaBytes = 1 << 20;  // bounds the staging ring

absl::Status QpError(const char* step, int rc, const std::string& peer) {
  return absl::FailedPreconditionError(absl::StrCat("cannot move the RDMA queue pair to ", step,
                                                    " (peer ", peer, "): ", ErrnoText(rc)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Connection>> Connection::Create(const Device& device, ibv_cq* cq,
                                                              const RdmaOptions& options,
                                                              std::string peer, DataTally* tally) {
  auto c = std::unique_ptr<Connection>(new Connection);
  c->device_ = &device;
  c->tally_ = tally;
  c->peer_ = std::move(peer);
  c->queue_depth_ = static_cast<uint32_t>(options.queue_depth);
  c->slots_ = c->queue_depth_;
  c->slot_bytes_ = options.slot_bytes;
  auto region = Region::Allocate(device.pd(), c->slots_ * c->slot_bytes_, kAccess,
                                 "the RDMA receive region");
  if (!region.ok()) return region.status();
  c->recv_region_ = std::move(*region);

  // Incoming writes per direction are bounded by our slots (peer's data) and by the peer
  // slots we use, which we also cap at our queue depth (its credits coming back).
  uint32_t recv_wrs = 2 * c->queue_depth_ + 8;
  c->sq_capacity_ = std::min<uint32_t>(device.max_qp_wr(), 4 * c->queue_depth_ + 32);
  c->max_sge_ = std::min(device.max_sge(), 30);
  c->max_wrs_per_chunk_ = std::max<uint32_t>(1, c->sq_capacity_ / 2);
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = c->sq_capacity_;
  init.cap.max_recv_wr = recv_wrs;
  init.cap.max_send_sge = c->max_sge_;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = 256;
  c->qp_ = ibv_create_qp(device.pd(), &init);
  if (c->qp_ == nullptr) {
    init.cap.max_inline_data = 0;  // not every adapter inlines
    c->qp_ = ibv_create_qp(device.pd(), &init);
  }
  if (c->qp_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "ibv_create_qp on ", device.name(), " failed: ", ErrnoText(errno), " (send ",
        c->sq_capacity_, " WRs x ", c->max_sge_, " SGEs, receive ", recv_wrs, ")"));
  }
  c->max_inline_ = init.cap.max_inline_data;
  c->psn_ = std::random_device{}() & 0xffffff;

  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = device.port();
  attr.qp_access_flags = kAccess;
  if (int rc = ibv_modify_qp(c->qp_, &attr,
                             IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      rc != 0) {
    return QpError("INIT", rc, c->peer_);
  }
  return c;
}

Connection::~Connection() {
  if (qp_ != nullptr) ibv_destroy_qp(qp_);
}

wire::VerbsEndpoint Connection::LocalEndpoint() const {
  wire::VerbsEndpoint e;
  e.set_lid(device_->lid());
  e.set_gid(std::string(reinterpret_cast<const char*>(device_->gid().raw), 16));
  e.set_use_grh(device_->use_grh());
  e.set_qpn(qp_->qp_num);
  e.set_psn(psn_);
  e.set_mtu(device_->mtu_bytes());
  e.set_region_addr(recv_region_->address());
  e.set_rkey(recv_region_->rkey());
  e.set_slots(slots_);
  e.set_slot_bytes(slot_bytes_);
  e.set_device(device_->Describe());
  return e;
}

absl::Status Connection::ConnectTo(const wire::VerbsEndpoint& remote) {
  int mtu = static_cast<int>(remote.mtu());
  if (remote.gid().size() != 16 || remote.slots() == 0 || remote.slots() > kSlotMask + 1 ||
      remote.slot_bytes() < 4096 || remote.slot_bytes() > (1ull << 30) ||
      (mtu != 256 && mtu != 512 && mtu != 1024 && mtu != 2048 && mtu != 4096)) {
    return absl::InvalidArgumentError(
        absl::StrCat("peer ", peer_, " sent an invalid RDMA endpoint (slots ", remote.slots(),
                     " of ", remote.slot_bytes(), " bytes, MTU ", mtu, ")"));
  }
  remote_addr_ = remote.region_addr();
  remote_rkey_ = remote.rkey();
  remote_slot_bytes_ = remote.slot_bytes();
  // Both directions use a ring of min(our slots, peer's slots): each side knows both.
  ring_out_ = std::min(remote.slots(), slots_);
  ring_in_ = ring_out_;
  slot_done_.assign(ring_in_, false);
  // Headers and metadata only: the adapter reads them, nobody writes them remotely. Sized
  // for a deep queue of headers plus the largest metadata one slot can hold twice over.
  uint64_t max_meta = std::min<uint64_t>(remote_slot_bytes_, kMaxMetaBytes);
  auto staging = Region::Allocate(device_->pd(),
                                  std::max<uint64_t>(kHeaderBytes * sq_capacity_, 2 * max_meta) +
                                      (256 << 10),
                                  IBV_ACCESS_LOCAL_WRITE, "the RDMA staging ring");
  if (!staging.ok()) return staging.status();
  staging_ = std::move(*staging);

  // Receives carry no buffer: the data of a write-with-immediate lands in the slot.
  for (uint32_t i = 0; i < 2 * queue_depth_ + 8; ++i) {
    ibv_recv_wr wr{}, *bad = nullptr;
    if (int rc = ibv_post_recv(qp_, &wr, &bad); rc != 0) {
      return absl::ResourceExhaustedError(absl::StrCat("ibv_post_recv: ", ErrnoText(rc)));
    }
  }
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = MtuEnum(std::min(device_->mtu_bytes(), mtu));
  attr.dest_qp_num = remote.qpn();
  attr.rq_psn = remote.psn();
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  attr.ah_attr.dlid = static_cast<uint16_t>(remote.lid());
  attr.ah_attr.port_num = device_->port();
  if (device_->use_grh() || remote.use_grh()) {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid().data(), 16);
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(device_->gid_index());
    attr.ah_attr.grh.hop_limit = 64;
  }
  if (int rc = ibv_modify_qp(qp_, &attr,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
      rc != 0) {
    return QpError("RTR", rc, peer_);
  }
  attr = {};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = 14;   // 4.096 us * 2^14 = 67 ms per try
  attr.retry_cnt = 7;  // so a vanished peer fails a send within about half a second
  attr.rnr_retry = 7;
  attr.sq_psn = psn_;
  attr.max_rd_atomic = 1;
  if (int rc = ibv_modify_qp(qp_, &attr,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                 IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
      rc != 0) {
    return QpError("RTS", rc, peer_);
  }
  connected_ = true;
  return absl::OkStatus();
}

uint64_t Connection::MaxMetaBytes() const {
  return std::min(ChunkCapacity(0), kMaxMetaBytes);
}

uint64_t Connection::ChunkCapacity(uint64_t meta_bytes) const {
  uint64_t used = kHeaderBytes + meta_bytes;
  return remote_slot_bytes_ > used ? remote_slot_bytes_ - used : 0;
}

void Connection::Send(OutMessage message) {
  if (!failure_.ok()) return;
  if (message.payload_total == 0) message.payload_total = message.data_bytes;
  out_.push_back(std::move(message));
  Flush();
}

void Connection::MarkReleased(uint32_t slot) {
  slot_done_[slot] = true;
  while (freed_ < received_chunks_ && slot_done_[freed_ % ring_in_]) {
    slot_done_[freed_ % ring_in_] = false;
    ++freed_;
  }
}

void Connection::ReleaseSlot(uint32_t slot) {
  MarkReleased(slot);
  // Usually the credit rides back in a chunk soon; alone only when half the ring waits
  // (the peer may be blocked on them; it is never blocked on fewer while more are coming).
  if (freed_ - reported_ >= std::max<uint32_t>(1, ring_in_ / 2)) credit_update_pending_ = true;
  Flush();
}

void Connection::Flush() {
  if (!failure_.ok() || !connected_) return;
  while (!out_.empty() && PostChunk(out_.front())) {
  }
  if (credit_update_pending_) PostCreditUpdate();
}

bool Connection::StagingAlloc(uint64_t bytes, uint64_t* offset) {
  uint64_t size = staging_->size();
  uint64_t n = (bytes + 63) / 64 * 64;
  uint64_t pos = staging_head_ % size;
  uint64_t pad = pos + n > size ? size - pos : 0;
  if (staging_head_ + pad + n - staging_tail_ > size) return false;
  staging_head_ += pad;
  *offset = staging_head_ % size;
  staging_head_ += n;
  return true;
}

// Completions are what frees send-queue entries and staging memory, but each costs a CQ
// entry to poll: ask for one only every so often.
bool Connection::ShouldSignal(uint32_t wrs) const {
  return unsignaled_wrs_ + wrs >= sq_capacity_ / 4 ||
         staging_head_ - staging_tail_ >= staging_->size() / 4;
}

bool Connection::PostChunk(OutMessage& m) {
  if (sent_chunks_ - peer_freed_ >= ring_out_) return false;  // no credit
  bool first = !out_started_;
  std::string_view meta = m.meta();
  std::span<const ibv_sge> data = m.data();
  uint64_t meta_bytes = first ? meta.size() : 0;
  if (first && meta_bytes > MaxMetaBytes()) {
    Fail(absl::InvalidArgumentError(absl::StrCat(
        "payload metadata of ", meta_bytes, " bytes does not fit the peer's RDMA slots of ",
        remote_slot_bytes_, " bytes (fewer buffers, or a larger --rdma-slot-size)")));
    return false;
  }
  uint64_t capacity = ChunkCapacity(meta_bytes);
  // Gather this chunk's bytes, limited by the slot and by the WRs one chunk may use.
  uint64_t want = std::min(capacity, m.data_bytes - out_sent_);
  size_t max_sges = static_cast<size_t>(max_wrs_per_chunk_) * max_sge_ - 1;
  sge_scratch_.clear();
  sge_scratch_.push_back(ibv_sge{});  // the header, filled below
  size_t sge = out_sge_;
  uint64_t sge_offset = out_sge_offset_;
  uint64_t take = 0;
  while (take < want && sge < data.size() && sge_scratch_.size() <= max_sges) {
    const ibv_sge& src = data[sge];
    uint64_t n = std::min<uint64_t>(src.length - sge_offset, want - take);
    sge_scratch_.push_back({src.addr + sge_offset, static_cast<uint32_t>(n), src.lkey});
    take += n;
    sge_offset += n;
    if (sge_offset == src.length) {
      ++sge;
      sge_offset = 0;
    }
  }
  uint32_t wrs = static_cast<uint32_t>((sge_scratch_.size() + max_sge_ - 1) / max_sge_);
  if (sq_used_ + wrs > sq_capacity_) return false;
  uint64_t staged;
  if (!StagingAlloc(kHeaderBytes + meta_bytes, &staged)) {
    // Only a completion frees staging: make sure one is coming.
    SendsRetired();
    return false;
  }

  bool last = out_sent_ + take == m.data_bytes;
  if (last && m.release_slot >= 0) MarkReleased(static_cast<uint32_t>(m.release_slot));
  auto* h = reinterpret_cast<ChunkHeader*>(staging_->data() + staged);
  std::memset(h, 0, kHeaderBytes);
  h->magic = kChunkMagic;
  h->kind = m.kind;
  h->flags = m.flags | (first && m.payload_offset == 0 ? kFirst : 0) |
             (last && m.payload_offset + m.data_bytes == m.payload_total ? kLast : 0);
  h->request_id = m.request_id;
  h->meta_bytes = static_cast<uint32_t>(meta_bytes);
  h->data_bytes = take;
  h->offset = m.payload_offset + out_sent_;
  h->total_bytes = m.payload_total;
  h->credits = freed_;
  if (meta_bytes > 0) std::memcpy(staging_->data() + staged + kHeaderBytes, meta.data(), meta_bytes);
  sge_scratch_[0] = {staging_->address() + staged, static_cast<uint32_t>(kHeaderBytes + meta_bytes),
                     staging_->lkey()};

  uint32_t slot = static_cast<uint32_t>(sent_chunks_ % ring_out_);
  uint64_t remote = remote_addr_ + slot * remote_slot_bytes_;
  // Memory a message holds (pooled, reused for the next one) comes back once its last write
  // is retired: ask for that completion rather than wait for the next periodic one.
  bool signaled = ShouldSignal(wrs) || (last && m.hold != nullptr);
  wr_scratch_.assign(wrs, ibv_send_wr{});
  uint64_t chunk_bytes = kHeaderBytes + meta_bytes + take;
  size_t next = 0;
  for (uint32_t i = 0; i < wrs; ++i) {
    ibv_send_wr& wr = wr_scratch_[i];
    size_t n = std::min<size_t>(max_sge_, sge_scratch_.size() - next);
    wr.sg_list = &sge_scratch_[next];
    wr.num_sge = static_cast<int>(n);
    wr.wr.rdma.remote_addr = remote;
    wr.wr.rdma.rkey = remote_rkey_;
    wr.wr_id = kSendBit;
    for (size_t k = 0; k < n; ++k) remote += sge_scratch_[next + k].length;
    next += n;
    if (i + 1 < wrs) {
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.next = &wr_scratch_[i + 1];
    } else {
      // The immediate goes with the last write: by then the whole chunk is in the slot.
      wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      wr.imm_data = htonl(slot);
      if (signaled) wr.send_flags = IBV_SEND_SIGNALED;
      if (wrs == 1 && chunk_bytes <= max_inline_) wr.send_flags |= IBV_SEND_INLINE;
    }
  }
  // Counted before it is posted: the peer may answer before this thread runs again, and a
  // count read after the answer must hold it (a failed post fails the connection).
  tally_->Sent(chunk_bytes, take, wrs);
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_, wr_scratch_.data(), &bad); rc != 0) {
    Fail(absl::InternalError(absl::StrCat("ibv_post_send to ", peer_, ": ", ErrnoText(rc))));
    return false;
  }
  ++sent_chunks_;
  reported_ = freed_;
  credit_update_pending_ = false;
  sq_used_ += wrs;
  unsignaled_wrs_ = signaled ? 0 : unsignaled_wrs_ + wrs;
  out_sent_ += take;
  out_started_ = true;
  out_sge_ = sge;
  out_sge_offset_ = sge_offset;
  sends_.push_back({wrs, staging_head_, signaled, last ? std::move(m.hold) : nullptr});
  if (last) {
    out_.pop_front();
    out_sent_ = 0;
    out_started_ = false;
    out_sge_ = 0;
    out_sge_offset_ = 0;
  }
  return true;
}

void Connection::PostCreditUpdate() {
  if (!failure_.ok() || !connected_ || sq_used_ >= sq_capacity_) return;
  ibv_send_wr wr{}, *bad = nullptr;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.imm_data = htonl(kCreditBit | static_cast<uint32_t>(freed_ & ~kCreditBit));
  wr.wr.rdma.remote_addr = remote_addr_;  // zero bytes, but a valid target all the same
  wr.wr.rdma.rkey = remote_rkey_;
  wr.wr_id = kSendBit;
  bool signaled = ShouldSignal(1);
  if (signaled) wr.send_flags = IBV_SEND_SIGNALED;
  tally_->Sent(0, 0);
  if (int rc = ibv_post_send(qp_, &wr, &bad); rc != 0) {
    Fail(absl::InternalError(absl::StrCat("ibv_post_send to ", peer_, ": ", ErrnoText(rc))));
    return;
  }
  reported_ = freed_;
  credit_update_pending_ = false;
  ++sq_used_;
  unsignaled_wrs_ = signaled ? 0 : unsignaled_wrs_ + 1;
  sends_.push_back({1, staging_head_, signaled, nullptr});
}

void Connection::Probe() {
  if (!failure_.ok() || !connected_ || sq_used_ >= sq_capacity_) return;
  ibv_send_wr wr{}, *bad = nullptr;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma.remote_addr = remote_addr_;
  wr.wr.rdma.rkey = remote_rkey_;
  wr.wr_id = kSendBit;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (ibv_post_send(qp_, &wr, &bad) != 0) return;
  tally_->Sent(0, 0);  // a probe: no peer answers it
  ++sq_used_;
  unsignaled_wrs_ = 0;
  sends_.push_back({1, staging_head_, true, nullptr});
}

bool Connection::SendsRetired() {
  if (sends_.empty()) return true;
  bool signaled = false;
  for (const SentRecord& r : sends_) signaled |= r.signaled;
  if (!signaled) Probe();
  return false;
}

void Connection::Fail(absl::Status status) {
  if (!failure_.ok()) return;
  failure_ = std::move(status);
  // A message partly posted may still be read by the adapter until the QP is destroyed.
  for (OutMessage& m : out_) {
    if (m.hold) failed_holds_.push_back(std::move(m.hold));
  }
  out_.clear();
  // Flush whatever is still posted, so the queue pair goes quiet.
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(qp_, &attr, IBV_QP_STATE);
}

absl::Status Connection::OnCompletion(const ibv_wc& wc,
                                      const std::function<void(const InChunk&)>& on_chunk) {
  if (!failure_.ok()) return failure_;
  if (wc.status != IBV_WC_SUCCESS) {
    Fail(absl::UnavailableError(absl::StrCat(
        "RDMA connection to ", peer_, " failed: ", ibv_wc_status_str(wc.status),
        " (vendor error ", wc.vendor_err, ")",
        wc.status == IBV_WC_RETRY_EXC_ERR ? "; the peer stopped answering (did it exit?)" : "")));
    return failure_;
  }
  if (wc.wr_id & kSendBit) {
    // Retires every unsignaled request before this signaled one, and it.
    while (true) {
      if (sends_.empty()) {
        Fail(absl::InternalError("send completion without a send"));
        return failure_;
      }
      SentRecord record = std::move(sends_.front());
      sends_.pop_front();
      sq_used_ -= record.wrs;
      tally_->Completed(record.wrs);
      staging_tail_ = record.staging_end;
      if (record.signaled) break;
    }
    Flush();
    return failure_;
  }
  if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM) {
    Fail(absl::InternalError(absl::StrCat("unexpected receive opcode ", wc.opcode, " from ", peer_)));
    return failure_;
  }
  ibv_recv_wr wr{}, *bad = nullptr;
  if (int rc = ibv_post_recv(qp_, &wr, &bad); rc != 0) {
    Fail(absl::InternalError(absl::StrCat("ibv_post_recv: ", ErrnoText(rc))));
    return failure_;
  }
  uint32_t imm = ntohl(wc.imm_data);
  auto take_credits = [&](uint64_t freed) {
    if (freed > sent_chunks_) {
      Fail(absl::InternalError(absl::StrCat("peer ", peer_, " returned credits it does not hold")));
      return false;
    }
    peer_freed_ = std::max(peer_freed_, freed);
    return true;
  };
  if (imm & kCreditBit) {
    tally_->Received(0, 0);
    // The low 31 bits of a count that never runs more than a ring ahead of ours.
    uint64_t freed = CreditsFromImm(peer_freed_, imm);
    if (take_credits(freed)) Flush();
    return failure_;
  }
  uint32_t slot = imm & kSlotMask;
  if (slot != received_chunks_ % ring_in_) {
    Fail(absl::DataLossError(absl::StrCat("peer ", peer_, " wrote to slot ", slot, ", expected ",
                                          received_chunks_ % ring_in_)));
    return failure_;
  }
  std::byte* base = recv_region_->data() + slot * slot_bytes_;
  // A copy: the peer can write the slot at any time, so checked fields must not change.
  std::memcpy(&header_, base, kHeaderBytes);
  const ChunkHeader& h = header_;
  if (!ChunkHeaderValid(h, slot_bytes_)) {
    Fail(absl::DataLossError(absl::StrCat("malformed RDMA chunk from ", peer_)));
    return failure_;
  }
  ++received_chunks_;
  tally_->Received(kHeaderBytes + h.meta_bytes + h.data_bytes, h.data_bytes);
  if (!take_credits(h.credits)) return failure_;
  InChunk chunk{slot, &header_, {base + kHeaderBytes, h.meta_bytes},
                {base + kHeaderBytes + h.meta_bytes, h.data_bytes}, recv_region_->lkey()};
  on_chunk(chunk);
  Flush();
  return failure_;
}

}  // namespace psbench::verbs
