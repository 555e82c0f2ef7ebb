// The worker side of the kExchange tests that run over more than one transport (the
// conformance suite, tests/conformance/): one exchange, and one worker of a synchronous step
// against SyncStepHandler. GoogleTest binaries only.
#ifndef PSBENCH_TESTS_INTEGRATION_EXCHANGE_STEPS_H_
#define PSBENCH_TESTS_INTEGRATION_EXCHANGE_STEPS_H_

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/exchange_handlers.h"

namespace psbench::testing {

// One exchange with PS 0, waited for.
inline absl::Status ExchangeOnce(Client& c, int request, int reply, uint64_t tag = 7) {
  c.StartExchange(0, request, reply, tag);
  auto done = c.Next(absl::Now() + absl::Seconds(30));
  if (!done.ok()) return done.status();
  EXPECT_EQ(done->tag, tag);
  return done->status;
}

// Worker w of `workers`, for `steps` synchronous steps: sends floats step * (w + 1) + index
// and expects the sum over the workers back. Returns what went wrong, or "".
inline std::string SyncSumWorker(Client& c, const std::vector<uint64_t>& sizes, int w,
                                 int workers, int steps) {
  Payload request(sizes, 3), reply(sizes, 4);
  auto req = c.Register(request);
  auto rep = c.Register(reply);
  if (!req.ok() || !rep.ok()) return "register failed";
  for (int step = 1; step <= steps; ++step) {
    FillFloats(request, static_cast<float>(step * (w + 1)));
    absl::Status s = ExchangeOnce(c, *req, *rep, step);
    if (!s.ok()) return absl::StrCat("step ", step, ": ", s.ToString());
    // The sum over workers of step * (w + 1) + index: step * (1 + ... + workers) + workers * index.
    std::string diff = CompareFloats(request, reply, [&](float x) {
      float index = x - static_cast<float>(step * (w + 1));
      return static_cast<float>(step * workers * (workers + 1) / 2) + workers * index;
    });
    if (!diff.empty()) return absl::StrCat("step ", step, ": ", diff);
  }
  return "";
}

}  // namespace psbench::testing

#endif  // PSBENCH_TESTS_INTEGRATION_EXCHANGE_STEPS_H_
