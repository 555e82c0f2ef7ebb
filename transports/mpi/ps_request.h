// One request as the grpc+mpi PS (mpi_server.cc) handles it, from its header to its answer,
// and how a push's or echo's payload is judged and acknowledged once it is in.
// Used only by the PS's progress thread.
#ifndef PSBENCH_TRANSPORTS_MPI_PS_REQUEST_H_
#define PSBENCH_TRANSPORTS_MPI_PS_REQUEST_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <mpi.h>

#include "absl/status/status.h"
#include "transports/data_meta.h"
#include "transports/exchange.h"
#include "transports/mpi/mpi_requests.h"
#include "transports/mpi/mpi_wire.h"

namespace psbench::mpi {

struct PsRequest {
  int source = 0;
  int data_tag = 0;
  RequestKind kind = kPush;
  bool validate = false;
  bool eager = false;  // the payload came in the header's message; an echo answers in one
  bool corrupt = false;
  uint64_t total = 0;
  std::string meta_bytes;  // kMetaFollows: the metadata, received on the data tag
  PayloadMeta meta;
  absl::Status meta_status;
  AlignedBuffer buffer;  // the payload, reused from request to request
  std::vector<std::span<std::byte>> spans;  // its buffers in `buffer` (kept: no allocation per request)
  std::vector<uint64_t> checksums;
  AckMeta ack;
  std::string ack_bytes;
  int outstanding = 0;  // MPI requests of this request not yet finished
  // Receiving the payload, one message per buffer: the first error, and the bytes so far.
  int first_error = MPI_SUCCESS;
  uint64_t received = 0;
  bool replied = false;
  // Over --max-message-size: drained into no memory at all (MPI truncates it) and refused.
  bool oversize = false;
  // kExchange: the request as its handler sees it, received straight into pooled memory laid
  // out like a payload; the reply overwrites it there and goes back from there.
  std::shared_ptr<ExchangeBuffers> exchange;
  ExchangeReplyMeta reply;
  std::string reply_bytes;
};

// RESOURCE_EXHAUSTED: a request over the PS's --max-message-size.
absl::Status OversizeError(const PsRequest& r, uint64_t max_message_bytes);

// A push's or echo's payload is in `r.buffer` (or failed): judges it (every byte arrived, and
// under --validate each buffer's checksum), applies an injected fault (a push before the check,
// an echo after it: the worker's check catches that one), and encodes the acknowledgement into
// `r.ack_bytes` (for an eager echo, one message: its length, the acknowledgement, the payload
// when it came whole). Returns the verdict.
absl::Status JudgeAndAcknowledge(PsRequest& r, uint64_t max_message_bytes);

// Whether the payload came in whole: an echo sends it back only then.
inline bool ArrivedWhole(const PsRequest& r) {
  return r.first_error == MPI_SUCCESS && r.received == r.total && !r.oversize;
}

}  // namespace psbench::mpi

#endif  // PSBENCH_TRANSPORTS_MPI_PS_REQUEST_H_
