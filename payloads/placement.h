// Placing tensors over PS by bytes, as tf_cnn_benchmarks places variables: each tensor, in
// order, goes to the part with the fewest bytes so far (the lowest index on a tie).
#ifndef PSBENCH_PAYLOADS_PLACEMENT_H_
#define PSBENCH_PAYLOADS_PLACEMENT_H_

#include <algorithm>
#include <cstdint>
#include <vector>

namespace psbench {

struct Shard {
  std::vector<size_t> tensors;  // indices into the sizes placed, in order
  uint64_t bytes = 0;
};

inline std::vector<Shard> PlaceByBytes(const std::vector<uint64_t>& sizes, size_t parts) {
  std::vector<Shard> shards(parts);
  if (parts == 0) return shards;
  for (size_t t = 0; t < sizes.size(); ++t) {
    auto least = std::min_element(shards.begin(), shards.end(),
                                  [](const Shard& a, const Shard& b) { return a.bytes < b.bytes; });
    least->tensors.push_back(t);
    least->bytes += sizes[t];
  }
  return shards;
}

}  // namespace psbench

#endif  // PSBENCH_PAYLOADS_PLACEMENT_H_
