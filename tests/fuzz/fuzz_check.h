// What every psbench fuzz target shares: a check that stops the run (libFuzzer then keeps the
// input as a crash) when a property of a parser or decoder does not hold.
#ifndef PSBENCH_TESTS_FUZZ_FUZZ_CHECK_H_
#define PSBENCH_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                              \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "%s:%d: fuzz property failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)

#endif  // PSBENCH_TESTS_FUZZ_FUZZ_CHECK_H_
