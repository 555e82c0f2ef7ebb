// The no-lost-update check's arithmetic (--benchmark=updates, updates_worker.h): the
// gradients every worker sends, the exact parameters a PS must hold after the updates it
// applied, and, when it holds others, which update explains a tensor's difference.
//
// Worker w's gradient of step s for element i of tensor t is 1 + ((A_j(w, s) + B(t, i)) mod 4),
// times the worker count in sync mode (the PS applies the mean). B is a seeded 2-bit hash of
// the element; A_j is the 2-bit group j = i mod kGroups of the update's 32-bit code, which is
// the update's index (w x steps + s) masked by the seed: no two updates of a run share a code,
// so no two have the same gradient on a tensor of kGroups elements or more, and a tensor off
// by exactly one update's gradient names that update. Values stay integers in [1, 4]: the
// exactness bound (kMaxUpdates) is the one of a 2-bit code; in sync mode the PS's sum of a
// step's gradients bounds the worker count too (SyncSumsExact).
#ifndef PSBENCH_WORKER_UPDATE_CODES_H_
#define PSBENCH_WORKER_UPDATE_CODES_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace psbench::update_codes {

inline constexpr int kGroups = 16;

// Element (t, i)'s code B in [0, 4) and its initial value, an integer in [0, 1024).
uint32_t ElementCode(uint64_t seed, uint64_t tensor, uint64_t i);
float Initial(uint64_t seed, uint64_t tensor, uint64_t i);

// In sync mode each gradient is W x k (k in [1, 4]) and the PS adds a step's W of them before
// dividing by W: every partial sum W x K (K <= 4W) must be exact in float32, or a rounded sum
// would read as a lost update. True when W's odd part times 4W - 1 is below 2^24: every W up
// to 2048 and every power of two up to 2^22, but not 2049.
bool SyncSumsExact(uint32_t workers);

class Codes {
 public:
  Codes(uint64_t seed, uint32_t workers, uint64_t steps) : seed_(seed), workers_(workers), steps_(steps) {}

  // The 32-bit code of worker w's step s (injective over the run's updates).
  uint32_t UpdateCode(uint32_t worker, uint64_t step) const;
  // g[i] = unit x (1 + ((A_{i mod kGroups} + b[i]) mod 4)) for the update with `code`.
  static void FillGradient(float* g, const uint8_t* b, uint64_t n, uint32_t code, float unit);

  // What a PS applied, as counts per group of each 2-bit value of A, and from them the
  // amount every element (group j, code b) lost: the sum over applied updates of
  // 1 + ((A_j + b) mod 4).
  class Applied {
   public:
    void Add(uint32_t code);
    // out[j][b]: what an element of group j with code b lost.
    void Decrements(double out[kGroups][4]) const;
   private:
    uint64_t count_[kGroups][4] = {};
  };

  // Why a tensor's elements differ from the exact values: one update (worker, step) that the
  // PS left out (`missing`: every element is higher by that update's gradient) or applied
  // once more (`extra`: lower), or none that explains them.
  struct Explanation {
    enum Kind { kNone, kMissing, kExtra } kind = kNone;
    std::vector<std::pair<uint32_t, uint64_t>> updates;  // (worker, step): those that fit, at most 8
    uint64_t fitting = 0;                                  // how many fit in all
  };
  // `diff[i]` = got - expected for element i of a tensor whose element codes are `b`.
  Explanation Explain(std::span<const double> diff, std::span<const uint8_t> b) const;

 private:
  uint64_t seed_;
  uint32_t workers_;
  uint64_t steps_;
};

// "worker 1's step 3", or "one of 5 updates (worker 0's step 2, ...)".
std::string DescribeUpdates(const Codes::Explanation& e);

}  // namespace psbench::update_codes

#endif  // PSBENCH_WORKER_UPDATE_CODES_H_
