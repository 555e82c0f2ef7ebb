#include "transports/mpi/ps_request.h"

#include "absl/strings/str_cat.h"
#include "payloads/size.h"
#include "transports/grpc/raw_format.h"
#include "transports/mpi/mpi_job.h"

namespace psbench::mpi {

absl::Status OversizeError(const PsRequest& r, uint64_t max_message_bytes) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "a request of ", r.total, " bytes is over the PS's --max-message-size=",
      FormatSize(max_message_bytes)));
}

absl::Status JudgeAndAcknowledge(PsRequest& r, uint64_t max_message_bytes) {
  absl::Status verdict;
  r.checksums.clear();
  const int count = static_cast<int>(r.received);
  if (r.oversize) {
    verdict = OversizeError(r, max_message_bytes);
  } else if (r.first_error != MPI_SUCCESS) {
    verdict = absl::DataLossError(absl::StrCat("receiving the payload: ", MpiErrorText(r.first_error)));
  }
  std::span<std::byte> data(r.buffer.data(), static_cast<size_t>(count));
  // Injected faults hit a push before the PS checks it, an echo after (the worker checks).
  bool damage = r.corrupt && !data.empty();
  if (damage && r.kind == kPush) data[data.size() / 2] ^= std::byte{0x5a};
  if (verdict.ok() && r.received != r.total) {
    verdict = absl::DataLossError(absl::StrCat("received ", r.received, " of ", r.total, " bytes"));
  } else if (verdict.ok() && r.validate) {
    uint64_t offset = 0;
    for (uint64_t size : r.meta.sizes) {
      r.checksums.push_back(Checksum(data.subspan(offset, size)));
      offset += size;
    }
    verdict = grpc_transport::CompareChecksums(r.meta.checksums, r.checksums, r.meta.sizes);
  }
  if (damage && r.kind == kEcho) data[data.size() / 2] ^= std::byte{0x5a};
  r.ack.bytes_received = static_cast<uint64_t>(count);
  r.ack.ok = verdict.ok();
  r.ack.code = verdict.code();
  r.ack.checksums.clear();
  // Only checksums of this payload, when they were computed (never a previous request's).
  if (r.validate && r.kind == kPush && verdict.ok()) r.ack.checksums = r.checksums;
  r.ack.error.clear();
  if (!verdict.ok()) r.ack.error = std::string(verdict.message()).substr(0, kMaxAckErrorBytes);
  if (r.eager && r.kind == kEcho) {  // one message: the acknowledgement, then the payload
    EncodeAckMeta(r.ack, &r.reply_bytes);
    EncodeEagerReply(r.reply_bytes,
                     ArrivedWhole(r) ? std::span<const std::byte>(data) : std::span<const std::byte>(),
                     &r.ack_bytes);
  } else {
    EncodeAckMeta(r.ack, &r.ack_bytes);
  }
  return verdict;
}

}  // namespace psbench::mpi
