// Training batch normalization of NHWC tensors on the GPU, fused with the ReLU that follows
// it where there is one. cuDNN's batch norm is fast in NCHW but falls back to a slow kernel
// for FP32 NHWC tensors (an H100 normalized 205 MB in 6.5 ms: 30 GB/s), which would erase
// what channels-last gains in the convolutions; and it fuses no ReLU in FP32. These kernels
// are memory-bound passes: statistics (one read), normalization (one read, one write);
// backward: two sums (one read of x, y, dy) and the input gradient (one more read, one
// write). In NCHW cuDNN's stays faster (measured on an H100), and the engine uses it.
// Statistics are summed in double, per channel, in two stages (partial sums per block, then
// per channel), so a 200,000-element channel keeps FP32 accuracy without Welford.
#ifndef PSBENCH_WORKER_TRAINER_BATCH_NORM_H_
#define PSBENCH_WORKER_TRAINER_BATCH_NORM_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace psbench::trainer::gpu_kernels {

// An NHWC tensor: n x hw rows of c channels.
struct BnShape {
  int n = 0;       // images
  int c = 0;       // channels
  int64_t hw = 0;  // pixels per image
};

// Doubles each of the two partial-sum arrays needs for this shape.
size_t BnPartials(const BnShape& s);

// y = scale * (x - mean) / sqrt(var + eps) + shift (then max(y, 0) when relu), with the
// batch's mean and biased variance; saves mean and 1/sqrt(var + eps) for the backward pass.
// coeff: 2 * C floats of scratch; partials: 2 * BnPartials doubles. Returns the launch error.
cudaError_t BnForward(const BnShape& s, const float* x, float* y, const float* scale, const float* shift,
                      float eps, bool relu, float* mean, float* inv_std, float* coeff, double* partials,
                      cudaStream_t stream);

// The gradients of scale and shift (written) and of x (dx = grad + beta * dx), from dy and,
// when relu, the output y (the ReLU passes dy where y > 0). coeff: 3 * C floats of scratch.
cudaError_t BnBackward(const BnShape& s, const float* x, const float* y, const float* dy, float* dx,
                       float beta, const float* scale, const float* mean, const float* inv_std, bool relu,
                       float* dscale, float* dshift, float* coeff, double* partials, cudaStream_t stream);

}  // namespace psbench::trainer::gpu_kernels

#endif  // PSBENCH_WORKER_TRAINER_BATCH_NORM_H_
