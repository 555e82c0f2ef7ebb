// One request as the grpc+mpi worker (mpi_client.cc) has it in flight, from Start to its
// completion, and how its answer is judged once every MPI request of it is done.
// Used only by the thread that owns MPI.
#ifndef PSBENCH_TRANSPORTS_MPI_WORKER_OP_H_
#define PSBENCH_TRANSPORTS_MPI_WORKER_OP_H_

#include <cstdint>
#include <string>
#include <vector>

#include <mpi.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "payloads/payload.h"
#include "transports/data_meta.h"
#include "transports/mpi/mpi_requests.h"
#include "transports/transport.h"

namespace psbench::mpi {

// A payload as Register prepares it. It travels as one MPI message per buffer (mpi_wire.h):
// each contiguous, so that MPI moves a large one with a single copy (CMA on one node) instead
// of packing it through its pipeline, which stalls whenever the peer is not running.
struct Registered {
  const Payload* payload = nullptr;
  std::string header;  // RequestHeader (kind and tag filled in per request) + metadata
  std::string meta_follows;  // the metadata, when it did not fit in the header (kMetaFollows)
  bool eager = false;  // echoes and pushes carry the payload in the header's message (after it)
  size_t max_ack = 0;
  size_t max_reply = 0;  // an exchange's reply metadata, at most
};

struct PendingOp {
  uint64_t tag = 0;
  Op op = Op::kPush;
  const Registered* reg = nullptr;
  const Registered* reply_reg = nullptr;  // kExchange: received straight into its buffers
  size_t server = 0;
  int data_tag = 0;
  absl::Time deadline;
  int outstanding = 0;  // MPI requests not yet finished
  int first_error = MPI_SUCCESS;    // of a request that finished in error
  int post_error = MPI_SUCCESS;     // of a request that could not be posted
  std::string header;
  std::string meta_follows;  // kExchange: the metadata, when it did not fit in the header
  const Registered* header_of = nullptr;  // whose header `header` holds
  AckMeta decoded_ack;
  std::string ack;  // receive buffer for the acknowledgement
  int ack_bytes = 0;
  int ack_offset = 0;  // where the acknowledgement starts in `ack` (an eager echo's answer)
  bool eager = false;
  AlignedBuffer echo;  // receive buffer for an echo, reused
  int echo_bytes = 0;
  std::vector<uint64_t> sent_checksums;  // kExchange: of the request as it was sent
  ExchangeReplyMeta reply;
  bool expired = false;  // reported failed; its MPI requests may still be pending
};

// Every MPI request of `o` is done: the PS's verdict in its acknowledgement (or an
// exchange's reply metadata), the bytes that came back, and under `validate` their
// checksums. `scratch` is reused for checksums from call to call.
absl::Status JudgeOp(PendingOp& o, bool validate, std::vector<uint64_t>* scratch);

}  // namespace psbench::mpi

#endif  // PSBENCH_TRANSPORTS_MPI_WORKER_OP_H_
