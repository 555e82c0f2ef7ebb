#include "transports/grpc/serialized_format.h"

#include <span>
#include <string>

#include "payloads/payload.h"
#include "transports/grpc/raw_format.h"

namespace psbench::grpc_transport {

absl::Status VerifyPayloadMessage(const wire::PayloadMessage& m, std::vector<uint64_t>* computed,
                                  uint64_t* bytes) {
  *bytes = 0;
  computed->clear();
  std::vector<uint64_t> sizes;
  for (const std::string& b : m.buffers()) {
    *bytes += b.size();
    sizes.push_back(b.size());
  }
  if (m.checksums_size() == 0) return absl::OkStatus();
  if (m.checksums_size() != m.buffers_size()) {
    return absl::DataLossError("checksum count differs from buffer count");
  }
  for (const std::string& b : m.buffers()) {
    computed->push_back(Checksum(std::as_bytes(std::span(b.data(), b.size()))));
  }
  std::vector<uint64_t> sent(m.checksums().begin(), m.checksums().end());
  return CompareChecksums(sent, *computed, sizes);
}

void ExchangeBuffersFromMessage(wire::PayloadMessage& m, ExchangeBuffers* buffers) {
  buffers->validate = m.checksums_size() > 0;
  for (std::string& b : *m.mutable_buffers()) {
    buffers->sizes.push_back(b.size());
    buffers->request.emplace_back(reinterpret_cast<const std::byte*>(b.data()), b.size());
    buffers->reply.emplace_back(reinterpret_cast<std::byte*>(b.data()), b.size());
  }
}

}  // namespace psbench::grpc_transport
