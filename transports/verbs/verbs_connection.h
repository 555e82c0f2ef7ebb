// One RC queue pair between a worker and a PS, and the chunk protocol of verbs_wire.h on it:
// credits for the peer's slots, chunking, scatter-gather sends, the staging ring for headers.
// Not thread-safe: a connection is driven by the one thread that polls its completion queue.
#ifndef PSBENCH_TRANSPORTS_VERBS_VERBS_CONNECTION_H_
#define PSBENCH_TRANSPORTS_VERBS_VERBS_CONNECTION_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "psbench.pb.h"
#include "transports/data_counts.h"
#include "transports/verbs/verbs_device.h"
#include "transports/verbs/verbs_wire.h"

namespace psbench::verbs {

// A message to send: header fields, metadata (copied into registered staging memory), and
// payload bytes as a gather list over registered memory (sent from where they are).
// A registered payload's metadata and gather list are views, not copies: the payload
// outlives every message that sends it.
struct OutMessage {
  ChunkKind kind = kPush;
  uint8_t flags = 0;  // kValidate, kPsMismatch; kFirst/kLast are set per chunk
  uint32_t request_id = 0;
  std::string_view shared_meta;  // e.g. a registered payload's
  std::string own_meta;          // or made for this message (an acknowledgement)
  std::span<const ibv_sge> shared_data;  // e.g. a registered payload's buffers
  ibv_sge own_sge{};                     // or one range of our own (an echo from its slot)
  uint64_t data_bytes = 0;
  // Echo replies continue a payload: their offset in it and its total size.
  uint64_t payload_offset = 0;
  uint64_t payload_total = 0;
  // A slot of ours the message's data comes from (echo): freed when the last chunk is
  // posted, so its credit rides in that chunk. Safe: the peer can reuse the slot only after
  // that chunk reached it, and by then our adapter has read every byte sent before it.
  int64_t release_slot = -1;
  // Memory the data lies in (and the gather list, when it is not the payload's), kept until
  // the adapter is done with the message: released when its last write is retired.
  std::shared_ptr<const void> hold;

  std::string_view meta() const { return own_meta.empty() ? shared_meta : own_meta; }
  std::span<const ibv_sge> data() const {
    return own_sge.length > 0 ? std::span<const ibv_sge>(&own_sge, 1) : shared_data;
  }
};

struct InChunk {
  uint32_t slot;
  const ChunkHeader* header;  // a checked copy
  std::span<const std::byte> meta;
  std::span<std::byte> data;  // in the slot, valid until ReleaseSlot(slot)
  uint32_t lkey;              // of the receive region, to send the data on from the slot
};

class Connection {
 public:
  // Creates the QP (moved to INIT), the receive region and the staging ring. What it moves
  // goes on `tally` (RDMA writes posted, retired and received; chunk and payload bytes),
  // which outlives it and is written by the same one thread.
  static absl::StatusOr<std::unique_ptr<Connection>> Create(const Device& device, ibv_cq* cq,
                                                           const RdmaOptions& options,
                                                           std::string peer, DataTally* tally);
  ~Connection();

  uint32_t qpn() const { return qp_->qp_num; }
  // The receive region, for a receiver that lends a slot's bytes out beyond the connection's
  // life (an exchange its handler holds). Deregistering it needs the device.
  std::shared_ptr<Region> recv_region() const { return recv_region_; }
  const std::string& peer() const { return peer_; }
  wire::VerbsEndpoint LocalEndpoint() const;
  // Moves the QP through RTR and RTS towards `remote` and posts the receives.
  absl::Status ConnectTo(const wire::VerbsEndpoint& remote);
  // Bytes of payload one chunk to the peer can carry after `meta_bytes` of metadata.
  uint64_t ChunkCapacity(uint64_t meta_bytes) const;
  // The most metadata one message may carry: what the peer's slot and our staging hold.
  uint64_t MaxMetaBytes() const;

  // Queues a message and sends as much as credits and the send queue allow.
  void Send(OutMessage message);
  // The receiver is done with a slot. Its credit goes back in the next chunk to the peer,
  // or alone once half the ring waits.
  void ReleaseSlot(uint32_t slot);
  // Posts a zero-byte RDMA write that the peer's adapter must acknowledge: if the peer is
  // gone, it fails with an error completion instead of waiting forever.
  void Probe();

  // Handles one work completion of this QP. Chunks are handed to `on_chunk`. Returns an error
  // once the connection failed (error completion, protocol violation); it stays failed.
  absl::Status OnCompletion(const ibv_wc& wc, const std::function<void(const InChunk&)>& on_chunk);
  const absl::Status& failure() const { return failure_; }
  // Gives up on the connection: the QP goes to the error state (the peer's next send to it
  // fails), queued messages are dropped, later completions are ignored.
  void Fail(absl::Status status);
  // True once every posted write is retired; otherwise makes sure a completion that will
  // retire them is coming (posts a signaled probe if none is).
  bool SendsRetired();

 private:
  Connection() = default;
  void Flush();
  bool PostChunk(OutMessage& m);
  void PostCreditUpdate();
  void MarkReleased(uint32_t slot);
  bool ShouldSignal(uint32_t wrs) const;
  // Staging ring for headers and metadata, released in send order.
  bool StagingAlloc(uint64_t bytes, uint64_t* offset);

  // Posted work requests, oldest first. Only some are signaled: the completion of a
  // signaled one retires it and every unsignaled one before it.
  struct SentRecord {
    uint32_t wrs;
    uint64_t staging_end;  // ring position to release up to
    bool signaled;
    std::shared_ptr<const void> hold;  // a message's OutMessage::hold, on its last write
  };

  const Device* device_ = nullptr;
  DataTally* tally_ = nullptr;
  std::string peer_;
  ibv_qp* qp_ = nullptr;
  uint32_t psn_ = 0;
  int max_sge_ = 1;
  uint32_t max_inline_ = 0;
  std::shared_ptr<Region> recv_region_;
  uint32_t slots_ = 0;
  uint64_t slot_bytes_ = 0;
  std::unique_ptr<Region> staging_;
  uint64_t staging_head_ = 0;  // monotonic byte counters; position = counter % size
  uint64_t staging_tail_ = 0;

  // The peer's receive region.
  uint64_t remote_addr_ = 0;
  uint32_t remote_rkey_ = 0;
  uint64_t remote_slot_bytes_ = 0;

  // Ring credits. Out: chunks we wrote into the peer's ring, and how many of them the peer
  // has freed. In: chunks the peer wrote into ours, how many we freed (in ring order), and
  // how many of those we told it about.
  uint32_t ring_out_ = 0;
  uint64_t sent_chunks_ = 0;
  uint64_t peer_freed_ = 0;
  uint32_t ring_in_ = 0;
  uint64_t received_chunks_ = 0;
  uint64_t freed_ = 0;
  uint64_t reported_ = 0;
  std::vector<bool> slot_done_;
  bool credit_update_pending_ = false;
  uint32_t unsignaled_wrs_ = 0;

  uint32_t sq_capacity_ = 0;
  uint32_t sq_used_ = 0;
  std::deque<SentRecord> sends_;
  std::deque<OutMessage> out_;
  std::vector<std::shared_ptr<const void>> failed_holds_;  // see Fail()
  uint64_t out_sent_ = 0;  // bytes of out_.front() already sent
  bool out_started_ = false;
  size_t out_sge_ = 0;         // gather cursor in out_.front().data
  uint64_t out_sge_offset_ = 0;
  uint32_t max_wrs_per_chunk_ = 1;
  uint32_t queue_depth_ = 0;
  std::vector<ibv_sge> sge_scratch_;
  std::vector<ibv_send_wr> wr_scratch_;
  bool connected_ = false;
  absl::Status failure_;
  ChunkHeader header_{};  // the chunk being handed out, copied out of its slot
};

}  // namespace psbench::verbs

#endif  // PSBENCH_TRANSPORTS_VERBS_VERBS_CONNECTION_H_
