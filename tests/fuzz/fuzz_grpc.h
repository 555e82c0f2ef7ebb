// A gRPC byte buffer cut into slices at places the input chooses, as the network delivers a
// message: the PS's decoders must not depend on where slices begin and end.
#ifndef PSBENCH_TESTS_FUZZ_FUZZ_GRPC_H_
#define PSBENCH_TESTS_FUZZ_FUZZ_GRPC_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace psbench::fuzz {

// `cuts` (one input byte) picks the slice sizes: 0 = one slice, else slices of 1..255 bytes
// cycling through cuts, cuts*7 % 251 + 1, ...; empty slices appear too.
inline grpc::ByteBuffer Fragmented(std::string_view bytes, uint8_t cuts) {
  std::vector<grpc::Slice> slices;
  if (cuts == 0) {
    slices.emplace_back(bytes.data(), bytes.size());
  } else {
    uint32_t piece = cuts;
    for (size_t at = 0; at < bytes.size();) {
      const size_t n = std::min<size_t>(piece % 64 == 0 ? 0 : piece, bytes.size() - at);
      slices.emplace_back(bytes.data() + at, n);
      at += n;
      piece = piece * 7 % 251 + 1;
    }
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

}  // namespace psbench::fuzz

#endif  // PSBENCH_TESTS_FUZZ_FUZZ_GRPC_H_
