#include "worker/trainer/loss.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace psbench::trainer {

double SoftmaxCrossEntropy(const float* logits, const int* labels, int batch, int classes,
                           float* diff) {
  double loss = 0;
  // Each exponential once (they are most of the cost: the GPU engine waits for this).
  std::vector<double> e(classes);
  for (int n = 0; n < batch; ++n) {
    const float* row = logits + size_t(n) * classes;
    const float top = *std::max_element(row, row + classes);  // for a stable exp
    double sum = 0;
    for (int c = 0; c < classes; ++c) sum += e[c] = std::exp(double(row[c]) - top);
    const int label = labels[n];
    loss += std::log(sum) - (double(row[label]) - top);
    for (int c = 0; c < classes; ++c) {
      const double p = e[c] / sum;
      diff[size_t(n) * classes + c] = static_cast<float>((p - (c == label ? 1.0 : 0.0)) / batch);
    }
  }
  return loss / batch;
}

}  // namespace psbench::trainer
