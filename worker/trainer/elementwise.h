// Elementwise kernels of the GPU engine that cuDNN has no single call for. A residual
// block's add and the ReLU after it are two cuDNN calls forward (an add reading two tensors
// and writing one, a ReLU reading and writing it again) and three backward (the ReLU's
// gradient, a copy of it to one input and an axpy into the other): one pass each way here.
// Layout-blind: the inputs and the output are packed tensors of one shape in one layout.
#ifndef PSBENCH_WORKER_TRAINER_ELEMENTWISE_H_
#define PSBENCH_WORKER_TRAINER_ELEMENTWISE_H_

#include <cuda_runtime.h>

#include <cstddef>

namespace psbench::trainer::gpu_kernels {

// y = max(a + b, 0) over n floats. Returns the launch error.
cudaError_t AddReluForward(const float* a, const float* b, float* y, size_t n, cudaStream_t stream);

// g = dy where y > 0, else 0; then da = g + beta_a * da and db = g + beta_b * db (beta 0 or 1;
// a null da or db is skipped). da and db must not be the same buffer.
cudaError_t AddReluBackward(const float* y, const float* dy, float* da, float beta_a, float* db, float beta_b,
                            size_t n, cudaStream_t stream);

}  // namespace psbench::trainer::gpu_kernels

#endif  // PSBENCH_WORKER_TRAINER_ELEMENTWISE_H_
