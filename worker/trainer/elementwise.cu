// The engine's fused elementwise passes (see elementwise.h): grid-stride loops, four floats
// per load where the tensor's size allows (every buffer is cudaMalloc'ed, so 16-byte aligned).
#include <algorithm>
#include <cstdint>

#include "worker/trainer/elementwise.h"

namespace psbench::trainer::gpu_kernels {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

unsigned Blocks(int64_t items) {
  return static_cast<unsigned>(std::clamp<int64_t>((items + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

__device__ float4 AddRelu(float4 a, float4 b) {
  return make_float4(fmaxf(a.x + b.x, 0.f), fmaxf(a.y + b.y, 0.f), fmaxf(a.z + b.z, 0.f), fmaxf(a.w + b.w, 0.f));
}

__device__ float4 Passed(float4 y, float4 dy) {
  return make_float4(y.x > 0.f ? dy.x : 0.f, y.y > 0.f ? dy.y : 0.f, y.z > 0.f ? dy.z : 0.f, y.w > 0.f ? dy.w : 0.f);
}

__device__ float4 Accumulate(float4 g, const float4* d, int64_t i, float beta) {
  if (beta == 0.f) return g;
  const float4 o = d[i];
  return make_float4(g.x + o.x, g.y + o.y, g.z + o.z, g.w + o.w);
}

__global__ void AddReluForward4(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ y,
                                int64_t n4) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = AddRelu(a[i], b[i]);
}

__global__ void AddReluForward1(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ y,
                                int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = fmaxf(a[i] + b[i], 0.f);
}

__global__ void AddReluBackward4(const float4* __restrict__ y, const float4* __restrict__ dy, float4* __restrict__ da,
                                 float beta_a, float4* __restrict__ db, float beta_b, int64_t n4) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += int64_t(gridDim.x) * blockDim.x) {
    const float4 g = Passed(y[i], dy[i]);
    if (da) da[i] = Accumulate(g, da, i, beta_a);
    if (db) db[i] = Accumulate(g, db, i, beta_b);
  }
}

__global__ void AddReluBackward1(const float* __restrict__ y, const float* __restrict__ dy, float* __restrict__ da,
                                 float beta_a, float* __restrict__ db, float beta_b, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float g = y[i] > 0.f ? dy[i] : 0.f;
    if (da) da[i] = beta_a == 0.f ? g : g + da[i];
    if (db) db[i] = beta_b == 0.f ? g : g + db[i];
  }
}

}  // namespace

cudaError_t AddReluForward(const float* a, const float* b, float* y, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (n % 4 == 0) {
    const int64_t n4 = int64_t(n / 4);
    AddReluForward4<<<Blocks(n4), kThreads, 0, stream>>>(reinterpret_cast<const float4*>(a),
                                                         reinterpret_cast<const float4*>(b),
                                                         reinterpret_cast<float4*>(y), n4);
  } else {
    AddReluForward1<<<Blocks(int64_t(n)), kThreads, 0, stream>>>(a, b, y, int64_t(n));
  }
  return cudaGetLastError();
}

cudaError_t AddReluBackward(const float* y, const float* dy, float* da, float beta_a, float* db, float beta_b,
                            size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (n % 4 == 0) {
    const int64_t n4 = int64_t(n / 4);
    AddReluBackward4<<<Blocks(n4), kThreads, 0, stream>>>(
        reinterpret_cast<const float4*>(y), reinterpret_cast<const float4*>(dy), reinterpret_cast<float4*>(da),
        beta_a, reinterpret_cast<float4*>(db), beta_b, n4);
  } else {
    AddReluBackward1<<<Blocks(int64_t(n)), kThreads, 0, stream>>>(y, dy, da, beta_a, db, beta_b, int64_t(n));
  }
  return cudaGetLastError();
}

}  // namespace psbench::trainer::gpu_kernels
