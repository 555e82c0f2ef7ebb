#include "transports/mpi/worker_op.h"

#include <span>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "transports/exchange.h"
#include "transports/grpc/raw_format.h"
#include "transports/mpi/mpi_job.h"

namespace psbench::mpi {
namespace {

// An exchange's reply is in its reply payload: the PS's verdict, then the request's sizes
// and, with --validate, the PS's checksums of what its handler wrote.
absl::Status JudgeExchange(PendingOp& o, bool validate, std::vector<uint64_t>* scratch) {
  const Payload& request = *o.reg->payload;
  ExchangeReplyMeta& reply = o.reply;
  if (absl::Status s = DecodeExchangeReplyMeta(
          std::span<const std::byte>(reinterpret_cast<const std::byte*>(o.ack.data()),
                                     static_cast<size_t>(o.ack_bytes)),
          &reply);
      !s.ok()) {
    return s;
  }
  if (reply.code != absl::StatusCode::kOk) return absl::Status(reply.code, reply.error);
  if (absl::Status s = CheckReplySizes(reply.sizes, request.sizes()); !s.ok()) return s;
  if (static_cast<uint64_t>(o.echo_bytes) != request.total_bytes()) {
    return absl::DataLossError(absl::StrFormat("the exchange reply brought %d of %u bytes",
                                               o.echo_bytes, request.total_bytes()));
  }
  if (!validate) return absl::OkStatus();
  if (reply.checksums.size() != request.num_buffers()) {
    return absl::DataLossError("the PS sent no checksums of its exchange reply");
  }
  o.reply_reg->payload->ComputeChecksums(scratch);
  return grpc_transport::CompareChecksums(reply.checksums, *scratch, request.sizes());
}

}  // namespace

absl::Status JudgeOp(PendingOp& o, bool validate, std::vector<uint64_t>* scratch) {
  if (o.first_error != MPI_SUCCESS) return absl::DataLossError(MpiErrorText(o.first_error));
  if (o.op == Op::kExchange) return JudgeExchange(o, validate, scratch);
  const Payload& payload = *o.reg->payload;
  AckMeta* ack = &o.decoded_ack;
  if (absl::Status s = DecodeAckMeta(
          std::span<const std::byte>(reinterpret_cast<const std::byte*>(o.ack.data()) + o.ack_offset,
                                     static_cast<size_t>(o.ack_bytes)),
          ack);
      !s.ok()) {
    return s;
  }
  if (!ack->ok) return absl::Status(ack->code, absl::StrCat("PS: ", ack->error));
  if (ack->bytes_received != payload.total_bytes()) {
    return absl::DataLossError(absl::StrFormat("PS received %u of %u bytes", ack->bytes_received,
                                               payload.total_bytes()));
  }
  if (o.op == Op::kPush) {
    if (!validate) return absl::OkStatus();
    return grpc_transport::CompareChecksums(payload.checksums(), ack->checksums, payload.sizes());
  }
  if (static_cast<uint64_t>(o.echo_bytes) != payload.total_bytes()) {
    return absl::DataLossError(absl::StrFormat("echo brought back %d of %u bytes", o.echo_bytes,
                                               payload.total_bytes()));
  }
  if (!validate) return absl::OkStatus();
  scratch->clear();
  uint64_t offset = 0;
  for (uint64_t size : payload.sizes()) {
    scratch->push_back(Checksum(std::span<const std::byte>(o.echo.data() + offset, size)));
    offset += size;
  }
  return grpc_transport::CompareChecksums(payload.checksums(), *scratch, payload.sizes());
}

}  // namespace psbench::mpi
