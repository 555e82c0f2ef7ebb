// Softmax cross-entropy, shared by the engines: computed in double on the host (batch x
// classes is small next to any layer), giving the mean loss and its gradient.
#ifndef PSBENCH_WORKER_TRAINER_LOSS_H_
#define PSBENCH_WORKER_TRAINER_LOSS_H_

namespace psbench::trainer {

// logits: batch x classes, row-major. Writes diff = (softmax - onehot(label)) / batch and
// returns the mean of -log softmax[label].
double SoftmaxCrossEntropy(const float* logits, const int* labels, int batch, int classes,
                           float* diff);

}  // namespace psbench::trainer

#endif  // PSBENCH_WORKER_TRAINER_LOSS_H_
