// Batch normalization kernels for NHWC tensors (see batch_norm.h). Reductions give one
// partial sum per (block row, channel), each warp reading 32 consecutive channels of a row
// (128 bytes); a second kernel sums each channel's partials. Elementwise passes run flat
// over the tensor, the channel being the index mod C.
#include <algorithm>
#include <cstdint>

#include "worker/trainer/batch_norm.h"

namespace psbench::trainer::gpu_kernels {
namespace {

constexpr int kLanes = 32;          // channels per block of an NHWC reduction
constexpr int kRows = 8;            // rows per block step of an NHWC reduction
constexpr int kThreads = 256;       // threads of the elementwise and per-channel kernels
constexpr int kTargetBlocks = 1024; // enough blocks to keep every SM of a large GPU busy

// x over groups of 32 channels, y over groups of rows (one partial sum each).
dim3 ReduceGrid(const BnShape& s) {
  const int64_t rows = int64_t(s.n) * s.hw;
  const int64_t bx = (s.c + kLanes - 1) / kLanes;
  const int64_t gy = std::clamp<int64_t>(kTargetBlocks / bx, 1, (rows + kRows - 1) / kRows);
  return dim3(static_cast<unsigned>(bx), static_cast<unsigned>(gy));
}

// Σ x and Σ x² per channel.
struct StatsTerms {
  const float* __restrict__ x;
  __device__ void operator()(int64_t i, int c, double& a, double& b) const {
    const double v = x[i];
    a += v;
    b += v * v;
  }
};

// Σ g and Σ g (x - mean) per channel, g = dy where the ReLU (if any) passed it.
struct GradTerms {
  const float* __restrict__ x;
  const float* __restrict__ y;
  const float* __restrict__ dy;
  const float* __restrict__ mean;
  bool relu;
  __device__ void operator()(int64_t i, int c, double& a, double& b) const {
    float g = dy[i];
    if (relu && y[i] <= 0.f) g = 0.f;
    a += g;
    b += double(g) * (double(x[i]) - double(mean[c]));
  }
};

template <typename Terms>
__global__ void ReduceRows(Terms terms, int64_t rows, int C, double* p1, double* p2) {
  const int c = blockIdx.x * kLanes + threadIdx.x;
  double a = 0, b = 0;
  if (c < C) {
    for (int64_t r = int64_t(blockIdx.y) * kRows + threadIdx.y; r < rows; r += int64_t(gridDim.y) * kRows)
      terms(r * C + c, c, a, b);
  }
  __shared__ double sa[kRows][kLanes], sb[kRows][kLanes];
  sa[threadIdx.y][threadIdx.x] = a;
  sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    for (int r = 1; r < kRows; ++r) {
      a += sa[r][threadIdx.x];
      b += sb[r][threadIdx.x];
    }
    p1[int64_t(blockIdx.y) * C + c] = a;
    p2[int64_t(blockIdx.y) * C + c] = b;
  }
}

template <typename Terms>
void Reduce(const BnShape& s, Terms terms, double* partials, cudaStream_t stream) {
  const dim3 grid = ReduceGrid(s);
  double* p1 = partials;
  double* p2 = partials + BnPartials(s);
  ReduceRows<<<grid, dim3(kLanes, kRows), 0, stream>>>(terms, int64_t(s.n) * s.hw, s.c, p1, p2);
}

// Channel c's two sums over the reductions' partial sums.
__device__ inline void SumPartials(const double* p1, const double* p2, int groups, int C, int c, double* s,
                                   double* q) {
  *s = 0;
  *q = 0;
  for (int g = 0; g < groups; ++g) {
    *s += p1[int64_t(g) * C + c];
    *q += p2[int64_t(g) * C + c];
  }
}

// coeff[c] = scale / std, coeff[C + c] = shift - mean * scale / std.
__global__ void FinishStats(const double* p1, const double* p2, int groups, int C, double count, float eps,
                            const float* scale, const float* shift, float* mean, float* inv_std, float* coeff) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  double s, q;
  SumPartials(p1, p2, groups, C, c, &s, &q);
  const double m = s / count;
  const double var = fmax(q / count - m * m, 0.0);  // biased, as training normalizes
  const double is = 1.0 / sqrt(var + double(eps));
  mean[c] = static_cast<float>(m);
  inv_std[c] = static_cast<float>(is);
  coeff[c] = static_cast<float>(scale[c] * is);
  coeff[C + c] = static_cast<float>(shift[c] - m * scale[c] * is);
}

// dscale = Σ g x̂, dshift = Σ g; dx = k1 (g - k2 - (x - mean) k3) with k1 = scale / std,
// k2 = mean of g, k3 = mean of g x̂, over std.
__global__ void FinishGrads(const double* p1, const double* p2, int groups, int C, double count,
                            const float* scale, const float* inv_std, float* dscale, float* dshift, float* coeff) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  double s, q;
  SumPartials(p1, p2, groups, C, c, &s, &q);
  const double is = inv_std[c];
  dscale[c] = static_cast<float>(q * is);
  dshift[c] = static_cast<float>(s);
  coeff[c] = static_cast<float>(scale[c] * is);
  coeff[C + c] = static_cast<float>(s / count);
  coeff[2 * C + c] = static_cast<float>(q / count * is * is);
}

struct NormalizeOp {
  const float* __restrict__ x;
  float* __restrict__ y;
  const float* __restrict__ coeff;
  int C;
  bool relu;
  __device__ void operator()(int64_t i, int c) const {
    float v = x[i] * coeff[c] + coeff[C + c];
    if (relu) v = fmaxf(v, 0.f);
    y[i] = v;
  }
};

struct InputGradOp {
  const float* __restrict__ x;
  const float* __restrict__ y;
  const float* __restrict__ dy;
  float* dx;
  const float* __restrict__ mean;
  const float* __restrict__ coeff;
  int C;
  float beta;
  bool relu;
  __device__ void operator()(int64_t i, int c) const {
    float g = dy[i];
    if (relu && y[i] <= 0.f) g = 0.f;
    const float v = coeff[c] * (g - coeff[C + c] - (x[i] - mean[c]) * coeff[2 * C + c]);
    dx[i] = beta == 0.f ? v : v + beta * dx[i];
  }
};

// Channel = index mod C, in 32-bit arithmetic where the tensor allows (a 64-bit remainder
// costs several times more instructions than the memory access it indexes).
template <typename Index, typename Op>
__global__ void EachRows(Op op, Index total, Index C) {
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += Index(gridDim.x) * blockDim.x)
    op(int64_t(i), int(i % C));
}

template <typename Op>
void Each(const BnShape& s, Op op, cudaStream_t stream) {
  const int64_t total = int64_t(s.n) * s.c * s.hw;
  const int64_t blocks = std::clamp<int64_t>((total + kThreads - 1) / kThreads, 1, 8 * kTargetBlocks);
  if (total < (int64_t{1} << 31)) {  // the index plus a grid stride stays below 2^32
    EachRows<uint32_t><<<unsigned(blocks), kThreads, 0, stream>>>(op, uint32_t(total), uint32_t(s.c));
  } else {
    EachRows<int64_t><<<unsigned(blocks), kThreads, 0, stream>>>(op, total, int64_t(s.c));
  }
}

}  // namespace

size_t BnPartials(const BnShape& s) {
  return size_t(ReduceGrid(s).y) * size_t(s.c);
}

cudaError_t BnForward(const BnShape& s, const float* x, float* y, const float* scale, const float* shift,
                      float eps, bool relu, float* mean, float* inv_std, float* coeff, double* partials,
                      cudaStream_t stream) {
  Reduce(s, StatsTerms{x}, partials, stream);
  const unsigned blocks = unsigned((s.c + kThreads - 1) / kThreads);
  FinishStats<<<blocks, kThreads, 0, stream>>>(partials, partials + BnPartials(s), ReduceGrid(s).y, s.c,
                                               double(s.n) * double(s.hw), eps, scale, shift, mean, inv_std,
                                               coeff);
  Each(s, NormalizeOp{x, y, coeff, s.c, relu}, stream);
  return cudaGetLastError();
}

cudaError_t BnBackward(const BnShape& s, const float* x, const float* y, const float* dy, float* dx,
                       float beta, const float* scale, const float* mean, const float* inv_std, bool relu,
                       float* dscale, float* dshift, float* coeff, double* partials, cudaStream_t stream) {
  Reduce(s, GradTerms{x, y, dy, mean, relu}, partials, stream);
  const unsigned blocks = unsigned((s.c + kThreads - 1) / kThreads);
  FinishGrads<<<blocks, kThreads, 0, stream>>>(partials, partials + BnPartials(s), ReduceGrid(s).y, s.c,
                                               double(s.n) * double(s.hw), scale, inv_std, dscale, dshift,
                                               coeff);
  Each(s, InputGradOp{x, y, dy, dx, mean, coeff, s.c, beta, relu}, stream);
  return cudaGetLastError();
}

}  // namespace psbench::trainer::gpu_kernels
