// Order statistics shared by the tables, the report and the records.
#ifndef PSBENCH_BENCH_STATS_H_
#define PSBENCH_BENCH_STATS_H_

#include <algorithm>
#include <cmath>
#include <vector>

namespace psbench {

// The median (the mean of the middle two for an even count); 0 when empty.
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The q-quantile of `sorted` (ascending) by nearest rank: a value that was measured; 0 when
// empty.
inline double NearestRank(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

}  // namespace psbench

#endif  // PSBENCH_BENCH_STATS_H_
