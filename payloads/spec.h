// What payload to send: a PayloadSpec (from flags or a scenario file) resolves to a
// PayloadPlan, the exact list of buffer sizes of every payload. Knows nothing of networks.
#ifndef PSBENCH_PAYLOADS_SPEC_H_
#define PSBENCH_PAYLOADS_SPEC_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "inputs/input_file.h"

namespace psbench {

// TF-gRPC-Bench's buffer categories (seed 001, Table 1).
enum class Category { kSmall, kMedium, kLarge };
inline constexpr uint64_t kKiB = 1024;
inline constexpr uint64_t kMiB = 1024 * 1024;
// Inclusive bounds of each category: Small [1 B, 1 KiB), Medium [1 KiB, 1 MiB), Large [1 MiB, 10 MiB].
uint64_t CategoryMin(Category c);
uint64_t CategoryMax(Category c);
std::string_view CategoryName(Category c);    // "small", "medium", "large"
char CategoryLetter(Category c);              // 'S', 'M', 'L'
absl::StatusOr<Category> ParseCategory(std::string_view text);  // S|M|L|small|medium|large

enum class Scheme { kUniform, kRandom, kSkew, kTrace };
std::string_view SchemeName(Scheme s);        // "uniform", "random", "skew", "trace"
absl::StatusOr<Scheme> ParseScheme(std::string_view text);

inline constexpr uint64_t kDefaultSeed = 20180324;  // fixed and printed in every report

struct PayloadSpec {
  Scheme scheme = Scheme::kUniform;
  std::vector<Category> categories = {Category::kSmall, Category::kMedium, Category::kLarge};
  uint64_t small_bytes = 10;
  uint64_t medium_bytes = 10 * kKiB;
  uint64_t large_bytes = 1 * kMiB;
  int buffers = 10;
  Category skew_bias = Category::kLarge;
  uint64_t seed = kDefaultSeed;
  std::string trace_path;  // scheme == kTrace only

  uint64_t SizeOf(Category c) const;
};

// Checks a spec without reading files. Errors name the flag, e.g.
// "--medium=2M is outside the Medium category [1KiB, 1MiB)".
absl::Status ValidateSpec(const PayloadSpec& spec);

// "S,M,L" for the given categories; ParseCategories reads it back.
std::string CategoriesText(const std::vector<Category>& categories);

// Parses "S,M,L" (any non-empty subset, any order, no repeats).
absl::StatusOr<std::vector<Category>> ParseCategories(std::string_view text);

// Buffers in one payload, at most (--buffers, a trace's group): large enough for any
// realistic model (Inception-v3 has 284 tensors, a large transformer a few thousand), small
// enough that a typo or a hostile trace cannot ask for millions of iovec entries.
inline constexpr int kMaxBuffersPerPayload = 100000;

// One tensor of a payload: its size and, where known (traces), its name.
struct BufferPlan {
  uint64_t bytes = 0;
  std::string name;  // empty for synthetic schemes
};

// What a psbench-trace/2 (a captured training job) adds to its sizes: per step, when each
// tensor's gradient became ready and how long the step computed.
struct TraceTiming {
  struct Step {
    double start_us = 0;    // from the first step's start
    double compute_us = 0;  // the step's own time (forward, backward, optimizer)
    std::vector<std::optional<double>> ready_us;  // per tensor, from the step's start; none: no gradient
  };
  std::vector<BufferPlan> tensors;           // model order
  std::vector<std::string> dtypes;           // per tensor
  std::vector<std::vector<size_t>> buckets;  // DDP-style gradient buckets, when captured
  std::vector<Step> steps;
};

// The resolved plan: one or more payloads, each an ordered list of buffers. Synthetic schemes
// give exactly one payload; a trace gives one payload per group. Iteration i sends payload
// i % payloads.size().
struct PayloadPlan {
  std::vector<std::vector<BufferPlan>> payloads;
  std::shared_ptr<const TraceTiming> timing;  // psbench-trace/2 only

  std::vector<uint64_t> Sizes(size_t payload) const;
  std::vector<uint64_t> AllSizes() const;  // every payload's, in order
  uint64_t Bytes(size_t payload) const;
  uint64_t TotalBytes() const;    // over all payloads
  uint64_t ArenaBytes() const;    // the memory they take, as Payload lays them out
  size_t TotalBuffers() const;
  // Compact summary such as "6x1MiB 3x10KiB 1x10B" (per payload, "; " between payloads,
  // abbreviated after a few payloads).
  std::string Summary() const;
};

// Resolves a valid spec into its plan (reads the trace file for kTrace). Definitions:
//  uniform: equal count per chosen category, remainder to the first chosen ones, buffers in
//           round-robin category order (S,M,L,S,M,L,...).
//  random:  each buffer's category drawn uniformly from the chosen ones with mt19937_64(seed);
//           every buffer takes its category's size.
//  skew:    the bias category gets 60 %; the other chosen categories share 40 % in the ratio
//           30:10 (nearer category to the bias first: large -> M then S, small -> M then L,
//           medium -> L then S). Counts are rounded by largest remainder (ties to the bias
//           order); each chosen category keeps at least one buffer when buffers >= categories.
//           Order: round-robin over the bias order while a category has buffers left.
//  trace:   see LoadTrace.
// A trace file over `max_trace_bytes` is refused before it is read.
absl::StatusOr<PayloadPlan> ResolvePlan(const PayloadSpec& spec,
                                        uint64_t max_trace_bytes = kDefaultMaxInputBytes);

// A single-buffer plan (size sweeps).
PayloadPlan SingleBufferPlan(uint64_t bytes);

// Trace files (JSON), accepted forms:
//   [10, 10240, 1048576]                          one payload of those buffer sizes
//   [[10, 20], [1048576]]                         one payload per inner list (group)
//   [{"name": "fc.weight", "bytes": 4096}, ...]   one payload of named tensors
//   {"groups": [{"tensors": [{"name":..,"bytes":..}, ...]}, ...]}   psbench trace format
//   {"params": [{"name":..,"bytes":..,"grad_ready_order":..}, ...]} reference traces
//                                                 (one payload in gradient-ready order)
//   {"format": "psbench-trace/2", "tensors": [...], "steps": [...]}   a captured job: one
//                                                 payload in the first step's ready order, and
//                                                 its timing (docs/replay.md)
// Every size must be an integer in [1, 1 GiB]; errors name the file and the entry.
// Only a regular file of at most `max_bytes` is read (inputs/input_file.h).
absl::StatusOr<PayloadPlan> LoadTrace(const std::string& path,
                                      uint64_t max_bytes = kDefaultMaxInputBytes);
// The same for a trace's text already read; `path` only names it in errors.
absl::StatusOr<PayloadPlan> ParseTrace(std::string_view text, const std::string& path);

}  // namespace psbench

#endif  // PSBENCH_PAYLOADS_SPEC_H_
