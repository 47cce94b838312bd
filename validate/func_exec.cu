#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "validate/func_exec.h"
#include "validate/kernels.h"

namespace tpsim::validate {
namespace {

void Check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw std::runtime_error("numerics: " + what + ": " + cudaGetErrorString(e));
}
void Check(cublasStatus_t e, const std::string& what) {
  if (e != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error("numerics: " + what + ": cuBLAS status " + std::to_string(e));
}

class Gpu {
 public:
  Gpu(const FuncPlan& plan, const FuncExecOptions& o, int device)
      : plan_(plan), round_(o.round_bf16), dev_(device) {}
  Gpu(const Gpu&) = delete;
  Gpu& operator=(const Gpu&) = delete;

  // Allocates and fills the arenas (the destructor frees whatever was allocated).
  void Init() {
    Check(cudaSetDevice(dev_), "cudaSetDevice");
    size_t free_b = 0, total_b = 0;
    Check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    const uint64_t need = plan_.TotalElems() * sizeof(float);
    if (need + (uint64_t{1} << 30) > free_b)
      throw std::runtime_error("numerics: the plan needs " + std::to_string(need >> 20) + " MiB, GPU " +
                               std::to_string(dev_) + " has " + std::to_string(free_b >> 20) + " MiB free");
    Check(cudaStreamCreate(&stream_), "cudaStreamCreate");
    Check(cublasCreate(&blas_), "cublasCreate");
    Check(cublasSetStream(blas_, stream_), "cublasSetStream");
    Check(cublasSetMathMode(blas_, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");  // no TF32, no shortcuts
    for (const FuncArena& a : plan_.arenas) {
      float* p = nullptr;
      if (a.elems) {
        Check(cudaMalloc(&p, a.elems * sizeof(float)), "cudaMalloc");
        Check(cudaMemsetAsync(p, 0, a.elems * sizeof(float), stream_), "cudaMemset");
      }
      mem_.push_back(p);
    }
    for (const FuncInit& in : plan_.inits) {
      std::vector<float> v = InitValues(in, round_);
      Check(cudaMemcpyAsync(mem_[in.arena] + in.offset, v.data(), v.size() * sizeof(float),
                            cudaMemcpyHostToDevice, stream_),
            "upload");
      Check(cudaStreamSynchronize(stream_), "upload");  // v goes out of scope
    }
  }
  ~Gpu() {
    cudaSetDevice(dev_);
    for (float* p : mem_) cudaFree(p);
    if (blas_) cublasDestroy(blas_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  F32View V(const FuncView& v, uint64_t shift = 0) const {
    return {mem_[v.arena] + v.offset + shift, v.rows, v.cols, static_cast<int64_t>(v.ld),
            static_cast<int64_t>(v.cs)};
  }

  void Matmul(const FuncStep& s, size_t i) {
    if (!s.out.rows || !s.out.cols) return;
    const float one = 1.0f;
    for (uint32_t b = 0; b < s.batch; ++b) {
      const BlasCall c = ColumnMajorCall(s, b);  // tested against the CPU backend in func_plan_test
      Check(cublasGemmEx(blas_, c.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, c.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                         c.m, c.n, c.k, &one, mem_[c.arena_a] + c.off_a, CUDA_R_32F, c.lda,
                         mem_[c.arena_b] + c.off_b, CUDA_R_32F, c.ldb, &c.beta, mem_[c.arena_c] + c.off_c,
                         CUDA_R_32F, c.ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "step " + std::to_string(i) + ": cublasGemmEx");
      if (round_) {
        const F32View y = V(s.out, uint64_t{b} * s.stride_out);
        LaunchViewBinary(ViewOp::kCopy, y, y, y, true, stream_);
      }
    }
  }

  void Run(const FuncStep& s, size_t i) {
    const F32View a = V(s.a), y = V(s.out);
    switch (s.kind) {
      case FuncStepKind::kMatmul:
        Matmul(s, i);
        break;
      case FuncStepKind::kRmsNorm:
        LaunchViewRmsNorm(a, y, s.group, round_, stream_);
        break;
      case FuncStepKind::kRope:
        LaunchViewRope(a, y, s.group, s.pos0, round_, stream_);
        break;
      case FuncStepKind::kSoftmax:
        LaunchViewSoftmax(a, y, static_cast<float>(s.scale), s.pos0, s.tokens, s.row0, round_, stream_);
        break;
      case FuncStepKind::kAdd:
        LaunchViewBinary(ViewOp::kAdd, a, V(s.b), y, round_, stream_);
        break;
      case FuncStepKind::kSiluMul:
        LaunchViewBinary(ViewOp::kSiluMul, a, V(s.b), y, round_, stream_);
        break;
      case FuncStepKind::kCopy:
        if (s.a.cs == 1 && s.out.cs == 1) {
          const Copy2D c = CopyCall(s);  // tested against the CPU backend in func_plan_test
          if (c.width && c.height)
            Check(cudaMemcpy2DAsync(mem_[c.dst_arena] + c.dst_off, c.dpitch * sizeof(float),
                                    mem_[c.src_arena] + c.src_off, c.spitch * sizeof(float),
                                    c.width * sizeof(float), c.height, cudaMemcpyDeviceToDevice, stream_),
                  "step " + std::to_string(i) + ": cudaMemcpy2DAsync");
        } else {
          LaunchViewBinary(ViewOp::kCopy, a, a, y, false, stream_);
        }
        break;
    }
    Check(cudaGetLastError(), "step " + std::to_string(i) + " (" + ToString(s.kind) + ")");
  }

  // The values step s wrote, read back (row by row, batch entries in order).
  std::vector<float> Written(const FuncStep& s) {
    Check(cudaStreamSynchronize(stream_), "trace");
    const FuncView& v = s.out;
    const uint64_t span = v.Elements() ? (uint64_t{v.rows} - 1) * v.ld + (uint64_t{v.cols} - 1) * v.cs +
                                             uint64_t{s.batch - 1} * s.stride_out + 1
                                       : 0;
    std::vector<float> raw(span);
    if (span)
      Check(cudaMemcpy(raw.data(), mem_[v.arena] + v.offset, span * sizeof(float), cudaMemcpyDeviceToHost),
            "trace");
    FuncView local = v;
    local.offset = 0;
    return ReadView(raw, local, s.batch, s.stride_out);
  }

  FuncCudaRun Run(StepTrace* trace) {
    FuncCudaRun r;
    Check(cudaStreamSynchronize(stream_), "upload");
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      Run(plan_.steps[i], i);
      if (trace) trace->push_back(Written(plan_.steps[i]));
    }
    Check(cudaStreamSynchronize(stream_), "steps");
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const FuncPlanOutput& fo : plan_.outputs) {
      mapping::Matrix m{fo.rows, fo.cols, std::vector<float>(uint64_t{fo.rows} * fo.cols, 0.f)};
      for (const auto& part : fo.parts) {
        const FuncView& v = part.view;
        if (!v.Elements()) continue;
        if (v.cs != 1) throw std::runtime_error("numerics: output part on a transposed view");
        // Straight into the output matrix: rows of v.cols floats, pitch fo.cols.
        Check(cudaMemcpy2D(&m.at(part.r0, part.c0), uint64_t{fo.cols} * sizeof(float),
                           mem_[v.arena] + v.offset, std::max<uint64_t>(v.ld, v.cols) * sizeof(float),
                           uint64_t{v.cols} * sizeof(float), v.rows, cudaMemcpyDeviceToHost),
              "download");
      }
      r.outputs.push_back(std::move(m));
    }
    return r;
  }

 private:
  const FuncPlan& plan_;
  bool round_;
  int dev_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  std::vector<float*> mem_;
};

}  // namespace

FuncCudaRun RunFuncPlanCuda(const FuncPlan& plan, const FuncExecOptions& opts, int device, StepTrace* trace) {
  Gpu g(plan, opts, device);
  g.Init();
  return g.Run(trace);
}

}  // namespace tpsim::validate
