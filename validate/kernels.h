#pragma once
// The harness's own CUDA kernels (bf16 data, fp32 math) and cuBLAS GEMM wrappers.
// Conventions match validate/reference.h (host references, tested on the CPU).
// Every Launch* call is asynchronous on `stream`; errors surface at the next sync.

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tpsim::validate {

using bf16 = __nv_bfloat16;

// y = x / sqrt(mean(x^2) + 1e-6) over each group of `group` columns of each row.
void LaunchRmsNorm(const bf16* x, bf16* y, uint64_t rows, uint64_t cols, uint32_t group, cudaStream_t s);
// Rotary embedding over groups of head_dim columns, position pos0 + row.
void LaunchRope(const bf16* x, bf16* y, uint64_t rows, uint64_t cols, uint32_t head_dim, uint32_t pos0,
                cudaStream_t s);
// Row softmax of x * scale, numerically stable; row r sees columns < cached + r % tokens + 1
// (tokens = 0: all), the others are written as 0.
void LaunchSoftmax(const bf16* x, bf16* y, uint64_t rows, uint64_t cols, float scale, uint32_t cached,
                   uint32_t tokens, cudaStream_t s);
void LaunchSiluMul(const bf16* a, const bf16* b, bf16* y, uint64_t n, cudaStream_t s);
void LaunchAdd(const bf16* a, const bf16* b, bf16* y, uint64_t n, cudaStream_t s);
void LaunchCopy(const bf16* a, bf16* y, uint64_t n, cudaStream_t s);
// Deterministic pseudo-random values in [-scale, scale) from (seed, index).
void LaunchFill(bf16* y, uint64_t n, uint64_t seed, float scale, cudaStream_t s);
// One thread that holds stream `s` until the host sets *open (mapped host memory) or timeout_ns
// have passed on the GPU's clock; then it sets *timed_out = 1.
void LaunchGate(const volatile int* open, int* timed_out, uint64_t timeout_ns, cudaStream_t s);

// ---- fp32 kernels on strided views, for the numerics check (validate/func_exec.cu). Element
// (i, j) of a view is p[i * ld + j * cs]. Arithmetic is fp32; with `round_bf16` every value
// written is rounded to the nearest bf16 (ties to even), i.e. bf16 storage as the timed kernels.
struct F32View {
  float* p = nullptr;
  uint32_t rows = 0, cols = 0;
  int64_t ld = 0, cs = 1;
};
enum class ViewOp : int { kSiluMul = 0, kAdd = 1, kCopy = 2 };
// y = x / sqrt(mean(x^2) + 1e-6) per group of `group` columns of each row (in place allowed).
void LaunchViewRmsNorm(F32View x, F32View y, uint32_t group, bool round_bf16, cudaStream_t s);
// Rotary embedding per group of head_dim columns at position pos0 + row (angle in double).
void LaunchViewRope(F32View x, F32View y, uint32_t head_dim, uint32_t pos0, bool round_bf16, cudaStream_t s);
// Row softmax of x * scale; row r sees columns < min(cols, cached + (row0 + r) % tokens + 1).
void LaunchViewSoftmax(F32View x, F32View y, float scale, uint32_t cached, uint32_t tokens, uint32_t row0,
                       bool round_bf16, cudaStream_t s);
// y = op(a, b) element-wise (b unused for kCopy); kCopy with round_bf16 on y itself rounds y.
void LaunchViewBinary(ViewOp op, F32View a, F32View b, F32View y, bool round_bf16, cudaStream_t s);

// Row-major Y[m,n] = X[m,k] . W[k,n] (W^T stored [n,k] when transpose_b), bf16 in,
// fp32 accumulate (CUBLAS_COMPUTE_32F), bf16 out.
cublasStatus_t Gemm(cublasHandle_t h, const bf16* x, const bf16* w, bf16* y, int m, int n, int k,
                    bool transpose_b);
// `batch` independent row-major products with strides of m*k, k*n and m*n elements.
cublasStatus_t GemmBatched(cublasHandle_t h, const bf16* x, const bf16* w, bf16* y, int batch, int m, int n,
                           int k);

}  // namespace tpsim::validate
