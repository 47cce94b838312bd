#include "validate/kernels.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace tpsim::validate {
namespace {

constexpr int kThreads = 256;

__device__ float BlockSum(float v, float* sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = 0;
  for (int i = 0; i < static_cast<int>(blockDim.x >> 5); ++i) r += sh[i];
  __syncthreads();
  return r;
}

__device__ float BlockMax(float v, float* sh) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = -INFINITY;
  for (int i = 0; i < static_cast<int>(blockDim.x >> 5); ++i) r = fmaxf(r, sh[i]);
  __syncthreads();
  return r;
}

// One block per (row, group).
__global__ void RmsNormKernel(const bf16* x, bf16* y, uint64_t cols, uint32_t group, uint64_t groups) {
  __shared__ float sh[32];
  const uint64_t row = blockIdx.x / groups, g = blockIdx.x % groups;
  const bf16* xi = x + row * cols + g * group;
  bf16* yi = y + row * cols + g * group;
  float ss = 0;
  for (uint32_t c = threadIdx.x; c < group; c += blockDim.x) {
    float v = __bfloat162float(xi[c]);
    ss += v * v;
  }
  const float inv = rsqrtf(BlockSum(ss, sh) / group + 1e-6f);
  for (uint32_t c = threadIdx.x; c < group; c += blockDim.x)
    yi[c] = __float2bfloat16(__bfloat162float(xi[c]) * inv);
}

__global__ void RopeKernel(const bf16* x, bf16* y, uint64_t rows, uint64_t cols, uint32_t hd, uint32_t pos0) {
  const uint32_t half = hd / 2;
  const uint64_t pairs_per_row = cols / hd * half;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < rows * pairs_per_row;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t row = i / pairs_per_row, p = i % pairs_per_row;
    const uint64_t base = row * cols + (p / half) * hd;
    const uint32_t c = p % half;
    const float ang = static_cast<float>(pos0 + row) * powf(10000.0f, -2.0f * c / hd);
    float sn, cs;
    sincosf(ang, &sn, &cs);
    const float x0 = __bfloat162float(x[base + c]), x1 = __bfloat162float(x[base + c + half]);
    y[base + c] = __float2bfloat16(x0 * cs - x1 * sn);
    y[base + c + half] = __float2bfloat16(x0 * sn + x1 * cs);
  }
}

// One block per row.
__global__ void SoftmaxKernel(const bf16* x, bf16* y, uint64_t cols, float scale, uint32_t cached,
                              uint32_t tokens) {
  __shared__ float sh[32];
  const uint64_t row = blockIdx.x;
  const uint64_t limit = tokens ? min(cols, uint64_t{cached} + row % tokens + 1) : cols;
  const bf16* xi = x + row * cols;
  bf16* yi = y + row * cols;
  float mx = -INFINITY;
  for (uint64_t j = threadIdx.x; j < limit; j += blockDim.x) mx = fmaxf(mx, __bfloat162float(xi[j]) * scale);
  mx = BlockMax(mx, sh);
  float sum = 0;
  for (uint64_t j = threadIdx.x; j < limit; j += blockDim.x)
    sum += __expf(__bfloat162float(xi[j]) * scale - mx);
  sum = BlockSum(sum, sh);
  const float inv = 1.0f / sum;
  for (uint64_t j = threadIdx.x; j < cols; j += blockDim.x)
    yi[j] = __float2bfloat16(j < limit ? __expf(__bfloat162float(xi[j]) * scale - mx) * inv : 0.0f);
}

__device__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The threads that share one row of the register-held row kernels: a warp (its lane, stride 32)
// or a block of kThreads (its thread, stride kThreads; the reductions sync the block).
struct WarpRow {
  static constexpr uint32_t kStride = 32;
  uint32_t t;
  __device__ float Sum(float v) const { return WarpSum(v); }
  __device__ float Max(float v) const { return WarpMax(v); }
};
struct BlockRow {
  static constexpr uint32_t kStride = kThreads;
  uint32_t t;
  float* sh;  // 32 floats of shared memory
  __device__ float Sum(float v) const { return BlockSum(v, sh); }
  __device__ float Max(float v) const { return BlockMax(v, sh); }
};

// RMSNorm of one group of `group` <= G::kStride N columns at x, y, held in registers: one read,
// one write.
template <int N, class G>
__device__ void RmsNormRow(const bf16* x, bf16* y, uint32_t group, const G& g) {
  float v[N];
  float ss = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const uint32_t j = g.t + G::kStride * i;
    v[i] = j < group ? __bfloat162float(x[j]) : 0.0f;
    ss += v[i] * v[i];
  }
  const float inv = rsqrtf(g.Sum(ss) / group + 1e-6f);
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const uint32_t j = g.t + G::kStride * i;
    if (j < group) y[j] = __float2bfloat16(v[i] * inv);
  }
}

// Softmax of one row of `cols` <= G::kStride N columns (SoftmaxKernel's semantics: the columns
// from `limit` on are written as 0), held in registers.
template <int N, class G>
__device__ void SoftmaxRow(const bf16* xi, bf16* yi, uint32_t cols, uint32_t limit, float scale, const G& g) {
  float v[N];
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const uint32_t j = g.t + G::kStride * i;
    v[i] = j < limit ? __bfloat162float(xi[j]) * scale : -INFINITY;
    mx = fmaxf(mx, v[i]);
  }
  mx = g.Max(mx);
  float sum = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const uint32_t j = g.t + G::kStride * i;
    v[i] = j < limit ? __expf(v[i] - mx) : 0.0f;
    sum += v[i];
  }
  const float inv = 1.0f / g.Sum(sum);
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const uint32_t j = g.t + G::kStride * i;
    if (j < cols) yi[j] = __float2bfloat16(v[i] * inv);
  }
}

// One warp per (row, group) of at most 32 N columns.
template <int N>
__global__ void RmsNormWarpKernel(const bf16* x, bf16* y, uint32_t units, uint64_t cols, uint32_t group,
                                  uint32_t groups) {
  const uint32_t unit = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (unit >= units) return;
  const uint64_t base = uint64_t{unit / groups} * cols + uint64_t{unit % groups} * group;
  RmsNormRow<N>(x + base, y + base, group, WarpRow{threadIdx.x & 31});
}

// One warp per row of at most 32 N columns.
template <int N>
__global__ void SoftmaxWarpKernel(const bf16* x, bf16* y, uint32_t rows, uint32_t cols, float scale,
                                  uint32_t cached, uint32_t tokens) {
  const uint32_t row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (row >= rows) return;
  const uint32_t limit = tokens ? min(cols, cached + row % tokens + 1) : cols;
  SoftmaxRow<N>(x + uint64_t{row} * cols, y + uint64_t{row} * cols, cols, limit, scale,
                WarpRow{threadIdx.x & 31});
}

// One block of kThreads per (row, group) of at most kThreads N columns.
template <int N>
__global__ void RmsNormBlockKernel(const bf16* x, bf16* y, uint64_t cols, uint32_t group, uint32_t groups) {
  __shared__ float sh[32];
  const uint64_t base = uint64_t{blockIdx.x / groups} * cols + uint64_t{blockIdx.x % groups} * group;
  RmsNormRow<N>(x + base, y + base, group, BlockRow{threadIdx.x, sh});
}

// One block of kThreads per row of at most kThreads N columns.
template <int N>
__global__ void SoftmaxBlockKernel(const bf16* x, bf16* y, uint32_t cols, float scale, uint32_t cached,
                                   uint32_t tokens) {
  __shared__ float sh[32];
  const uint32_t row = blockIdx.x;
  const uint32_t limit = tokens ? min(cols, cached + row % tokens + 1) : cols;
  SoftmaxRow<N>(x + uint64_t{row} * cols, y + uint64_t{row} * cols, cols, limit, scale,
                BlockRow{threadIdx.x, sh});
}

// RopeKernel with one grid row per row and 32-bit index math.
__global__ void RopeRowKernel(const bf16* x, bf16* y, uint32_t cols, uint32_t hd, uint32_t pos0) {
  const uint32_t half = hd / 2, pairs = cols / hd * half, row = blockIdx.y;
  const uint64_t rbase = uint64_t{row} * cols;
  for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < pairs; p += gridDim.x * blockDim.x) {
    const uint32_t c = p % half;
    const uint64_t base = rbase + (p / half) * hd;
    // 10000^(-2c/hd) = 2^(-2c/hd * log2(10000))
    const float ang = static_cast<float>(pos0 + row) * exp2f(-2.0f * c / hd * 13.287712379549449f);
    float sn, cs;
    sincosf(ang, &sn, &cs);
    const float x0 = __bfloat162float(x[base + c]), x1 = __bfloat162float(x[base + c + half]);
    y[base + c] = __float2bfloat16(x0 * cs - x1 * sn);
    y[base + c + half] = __float2bfloat16(x0 * sn + x1 * cs);
  }
}

// BinaryKernel two elements at a time (n even, every pointer 4-byte aligned).
template <int Op>
__global__ void BinaryPairKernel(const __nv_bfloat162* a, const __nv_bfloat162* b, __nv_bfloat162* y,
                                 uint64_t pairs) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < pairs;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const float2 va = __bfloat1622float2(a[i]);
    float2 r = va;
    if (Op == 0) {
      const float2 vb = __bfloat1622float2(b[i]);
      r.x = va.x / (1.0f + __expf(-va.x)) * vb.x;
      r.y = va.y / (1.0f + __expf(-va.y)) * vb.y;
    }
    if (Op == 1) {
      const float2 vb = __bfloat1622float2(b[i]);
      r.x = va.x + vb.x;
      r.y = va.y + vb.y;
    }
    y[i] = __float22bfloat162_rn(r);
  }
}

template <int Op>  // 0 silu_mul, 1 add, 2 copy
__global__ void BinaryKernel(const bf16* a, const bf16* b, bf16* y, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const float va = __bfloat162float(a[i]);
    float r = va;
    if (Op == 0) r = va / (1.0f + __expf(-va)) * __bfloat162float(b[i]);
    if (Op == 1) r = va + __bfloat162float(b[i]);
    y[i] = __float2bfloat16(r);
  }
}

__global__ void FillKernel(bf16* y, uint64_t n, uint64_t seed, float scale) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + i;  // splitmix64
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    y[i] = __float2bfloat16((static_cast<float>(z >> 40) / 16777216.0f * 2.0f - 1.0f) * scale);
  }
}

// ---- fp32 view kernels (numerics check) ----

__device__ float Store(float v, bool round) { return round ? __bfloat162float(__float2bfloat16(v)) : v; }
__device__ float& At(const F32View& v, uint64_t i, uint64_t j) { return v.p[i * v.ld + j * v.cs]; }

// One block per (row, group).
__global__ void ViewRmsNormKernel(F32View x, F32View y, uint32_t group, uint32_t groups, bool round) {
  __shared__ float sh[32];
  const uint64_t row = blockIdx.x / groups, c0 = uint64_t{blockIdx.x % groups} * group;
  float ss = 0;
  for (uint32_t c = threadIdx.x; c < group; c += blockDim.x) {
    const float v = At(x, row, c0 + c);
    ss += v * v;
  }
  const float inv = 1.0f / sqrtf(BlockSum(ss, sh) / group + 1e-6f);
  for (uint32_t c = threadIdx.x; c < group; c += blockDim.x)
    At(y, row, c0 + c) = Store(At(x, row, c0 + c) * inv, round);
}

__global__ void ViewRopeKernel(F32View x, F32View y, uint32_t hd, uint32_t pos0, bool round) {
  const uint32_t half = hd / 2;
  const uint64_t pairs_per_row = uint64_t{x.cols} / hd * half, n = x.rows * pairs_per_row;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t row = i / pairs_per_row, p = i % pairs_per_row;
    const uint64_t base = (p / half) * hd;
    const uint32_t c = p % half;
    const double ang = static_cast<double>(pos0 + row) * pow(10000.0, -2.0 * c / hd);
    double sn, cs;
    sincos(ang, &sn, &cs);
    const double x0 = At(x, row, base + c), x1 = At(x, row, base + c + half);
    At(y, row, base + c) = Store(static_cast<float>(x0 * cs - x1 * sn), round);
    At(y, row, base + c + half) = Store(static_cast<float>(x0 * sn + x1 * cs), round);
  }
}

// One block per row.
__global__ void ViewSoftmaxKernel(F32View x, F32View y, float scale, uint32_t cached, uint32_t tokens,
                                  uint32_t row0, bool round) {
  __shared__ float sh[32];
  const uint64_t row = blockIdx.x;
  const uint64_t limit = min(uint64_t{x.cols}, uint64_t{cached} + (row0 + row) % tokens + 1);
  float mx = -INFINITY;
  for (uint64_t j = threadIdx.x; j < limit; j += blockDim.x) mx = fmaxf(mx, At(x, row, j) * scale);
  mx = BlockMax(mx, sh);
  float sum = 0;
  for (uint64_t j = threadIdx.x; j < limit; j += blockDim.x) sum += expf(At(x, row, j) * scale - mx);
  sum = BlockSum(sum, sh);
  for (uint64_t j = threadIdx.x; j < x.cols; j += blockDim.x)
    At(y, row, j) = j < limit ? Store(expf(At(x, row, j) * scale - mx) / sum, round) : 0.0f;
}

__global__ void ViewBinaryKernel(int op, F32View a, F32View b, F32View y, bool round) {
  const uint64_t n = uint64_t{y.rows} * y.cols;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t r = i / y.cols, c = i % y.cols;
    const float va = At(a, r, c);
    float v = va;
    if (op == static_cast<int>(ViewOp::kSiluMul)) v = va / (1.0f + expf(-va)) * At(b, r, c);
    if (op == static_cast<int>(ViewOp::kAdd)) v = va + At(b, r, c);
    At(y, r, c) = Store(v, round);
  }
}

unsigned Blocks(uint64_t n) {
  uint64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 8 ? (b ? b : 1) : 65535 * 8);
}

// The register count of a warp-per-row kernel: 32 N columns, N a power of two up to 32.
int WarpColumns(uint64_t cols) {
  int n = 1;
  while (n < 32 && uint64_t{32} * n < cols) n *= 2;
  return uint64_t{32} * n >= cols ? n : 0;
}

// Calls f(std::integral_constant<int, N>{}) for N = n (1, 2, 4, 8, 16; anything else: 32): the
// per-thread column count of the row kernels, a template argument. N below Min is not made.
template <int Min, typename F>
void WithColumns(int n, F&& f) {
  if constexpr (Min <= 1)
    if (n == 1) return f(std::integral_constant<int, 1>{});
  if constexpr (Min <= 2)
    if (n == 2) return f(std::integral_constant<int, 2>{});
  if constexpr (Min <= 4)
    if (n == 4) return f(std::integral_constant<int, 4>{});
  if (n == 8) return f(std::integral_constant<int, 8>{});
  if (n == 16) return f(std::integral_constant<int, 16>{});
  return f(std::integral_constant<int, 32>{});
}

// Blocks of kThreads for one warp per unit.
unsigned WarpBlocks(uint64_t units) { return static_cast<unsigned>((units * 32 + kThreads - 1) / kThreads); }

// Per thread of a block-per-row kernel: 8, 16 or 32 of the row's columns (rows wider than a
// warp's 1024 and at most 8192 wide), else 0.
int BlockColumns(uint64_t cols) {
  for (int n : {8, 16, 32})
    if (uint64_t{kThreads} * n >= cols) return n;
  return 0;
}

bool PairAligned(const void* a, const void* b, const void* y, uint64_t n) {
  const auto bits =
      reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) | reinterpret_cast<uintptr_t>(y);
  return n % 2 == 0 && bits % 4 == 0;
}

template <int Op>
void LaunchBinary(const bf16* a, const bf16* b, bf16* y, uint64_t n, cudaStream_t s) {
  if (!n) return;
  if (PairAligned(a, b, y, n))
    BinaryPairKernel<Op><<<Blocks(n / 2), kThreads, 0, s>>>(reinterpret_cast<const __nv_bfloat162*>(a),
                                                            reinterpret_cast<const __nv_bfloat162*>(b),
                                                            reinterpret_cast<__nv_bfloat162*>(y), n / 2);
  else
    BinaryKernel<Op><<<Blocks(n), kThreads, 0, s>>>(a, b, y, n);
}

}  // namespace

void LaunchRmsNorm(const bf16* x, bf16* y, uint64_t rows, uint64_t cols, uint32_t group, cudaStream_t s) {
  if (!rows || !group || cols < group) return;
  const uint64_t groups = cols / group;
  const int n = WarpColumns(group);
  if (n && rows * groups < (uint64_t{1} << 26)) {
    WithColumns<1>(n, [&](auto c) {
      RmsNormWarpKernel<decltype(c)::value><<<WarpBlocks(rows * groups), kThreads, 0, s>>>(
          x, y, static_cast<uint32_t>(rows * groups), cols, group, static_cast<uint32_t>(groups));
    });
    return;
  }
  const unsigned units = static_cast<unsigned>(rows * groups);
  if (const int nb = rows * groups < (uint64_t{1} << 31) ? BlockColumns(group) : 0) {
    WithColumns<8>(nb, [&](auto c) {
      RmsNormBlockKernel<decltype(c)::value>
          <<<units, kThreads, 0, s>>>(x, y, cols, group, static_cast<uint32_t>(groups));
    });
    return;
  }
  RmsNormKernel<<<units, group >= 256 ? 256 : 64, 0, s>>>(x, y, cols, group, groups);
}

void LaunchRope(const bf16* x, bf16* y, uint64_t rows, uint64_t cols, uint32_t head_dim, uint32_t pos0,
                cudaStream_t s) {
  if (!rows || head_dim < 2 || cols < head_dim) return;
  if (rows <= 65535 && cols <= (uint64_t{1} << 30)) {
    const uint64_t pairs = cols / head_dim * (head_dim / 2);
    const dim3 grid(static_cast<unsigned>(std::min<uint64_t>((pairs + kThreads - 1) / kThreads, 64)),
                    static_cast<unsigned>(rows));
    RopeRowKernel<<<grid, kThreads, 0, s>>>(x, y, static_cast<uint32_t>(cols), head_dim, pos0);
    return;
  }
  RopeKernel<<<Blocks(rows * cols / 2), kThreads, 0, s>>>(x, y, rows, cols, head_dim, pos0);
}

void LaunchSoftmax(const bf16* x, bf16* y, uint64_t rows, uint64_t cols, float scale, uint32_t cached,
                   uint32_t tokens, cudaStream_t s) {
  if (!rows || !cols) return;
  const int n = WarpColumns(cols);
  if (n && rows < (uint64_t{1} << 26)) {
    WithColumns<1>(n, [&](auto c) {
      SoftmaxWarpKernel<decltype(c)::value><<<WarpBlocks(rows), kThreads, 0, s>>>(
          x, y, static_cast<uint32_t>(rows), static_cast<uint32_t>(cols), scale, cached, tokens);
    });
    return;
  }
  const unsigned r = static_cast<unsigned>(rows);
  if (const int nb = rows < (uint64_t{1} << 31) ? BlockColumns(cols) : 0) {
    WithColumns<8>(nb, [&](auto c) {
      SoftmaxBlockKernel<decltype(c)::value>
          <<<r, kThreads, 0, s>>>(x, y, static_cast<uint32_t>(cols), scale, cached, tokens);
    });
    return;
  }
  SoftmaxKernel<<<r, kThreads, 0, s>>>(x, y, cols, scale, cached, tokens);
}

void LaunchSiluMul(const bf16* a, const bf16* b, bf16* y, uint64_t n, cudaStream_t s) {
  LaunchBinary<0>(a, b, y, n, s);
}
void LaunchAdd(const bf16* a, const bf16* b, bf16* y, uint64_t n, cudaStream_t s) {
  LaunchBinary<1>(a, b, y, n, s);
}
void LaunchCopy(const bf16* a, bf16* y, uint64_t n, cudaStream_t s) { LaunchBinary<2>(a, a, y, n, s); }
void LaunchFill(bf16* y, uint64_t n, uint64_t seed, float scale, cudaStream_t s) {
  if (n) FillKernel<<<Blocks(n), kThreads, 0, s>>>(y, n, seed, scale);
}

__device__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void GateKernel(const volatile int* open, int* timed_out, uint64_t timeout_ns) {
  const uint64_t t0 = GlobalTimerNs();
  while (*open == 0) {
    if (GlobalTimerNs() - t0 > timeout_ns) {
      *timed_out = 1;
      return;
    }
    __nanosleep(1000);
  }
}

void LaunchGate(const volatile int* open, int* timed_out, uint64_t timeout_ns, cudaStream_t s) {
  GateKernel<<<1, 1, 0, s>>>(open, timed_out, timeout_ns);
}

void LaunchViewRmsNorm(F32View x, F32View y, uint32_t group, bool round_bf16, cudaStream_t s) {
  if (!x.rows || !group || x.cols < group) return;
  const uint32_t groups = x.cols / group;
  ViewRmsNormKernel<<<static_cast<unsigned>(uint64_t{x.rows} * groups), group >= 256 ? 256 : 64, 0, s>>>(
      x, y, group, groups, round_bf16);
}

void LaunchViewRope(F32View x, F32View y, uint32_t head_dim, uint32_t pos0, bool round_bf16, cudaStream_t s) {
  if (!x.rows || head_dim < 2 || x.cols < head_dim) return;
  ViewRopeKernel<<<Blocks(uint64_t{x.rows} * x.cols / 2), kThreads, 0, s>>>(x, y, head_dim, pos0, round_bf16);
}

void LaunchViewSoftmax(F32View x, F32View y, float scale, uint32_t cached, uint32_t tokens, uint32_t row0,
                       bool round_bf16, cudaStream_t s) {
  if (!x.rows || !x.cols || !tokens) return;
  ViewSoftmaxKernel<<<x.rows, kThreads, 0, s>>>(x, y, scale, cached, tokens, row0, round_bf16);
}

void LaunchViewBinary(ViewOp op, F32View a, F32View b, F32View y, bool round_bf16, cudaStream_t s) {
  const uint64_t n = uint64_t{y.rows} * y.cols;
  if (n) ViewBinaryKernel<<<Blocks(n), kThreads, 0, s>>>(static_cast<int>(op), a, b, y, round_bf16);
}

// Row-major Y = X.W is column-major Y^T = W^T . X^T: cuBLAS computes C[n,m] = W'[n,k] . X'[k,m].
cublasStatus_t Gemm(cublasHandle_t h, const bf16* x, const bf16* w, bf16* y, int m, int n, int k,
                    bool transpose_b) {
  const float one = 1.0f, zero = 0.0f;
  return cublasGemmEx(h, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, w, CUDA_R_16BF,
                      transpose_b ? k : n, x, CUDA_R_16BF, k, &zero, y, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                      CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t GemmBatched(cublasHandle_t h, const bf16* x, const bf16* w, bf16* y, int batch, int m, int n,
                           int k) {
  const float one = 1.0f, zero = 0.0f;
  return cublasGemmStridedBatchedEx(
      h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, w, CUDA_R_16BF, n, static_cast<long long>(k) * n, x,
      CUDA_R_16BF, k, static_cast<long long>(m) * k, &zero, y, CUDA_R_16BF, n, static_cast<long long>(m) * n,
      batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

}  // namespace tpsim::validate
