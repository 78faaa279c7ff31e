#include "backend/cuda/gemm.h"

#include <climits>
#include <string>

#include "backend/cuda/cuda_errors.h"
#include "core/errors.h"
#include "kernels/cuda/launchers.h"

namespace qmpi::cuda {

Gemm::Gemm(DeviceAllocator& allocator, cudaStream_t stream, size_t workspace_bytes)
    : stream_(stream),
      handle_(stream),
      workspace_(allocator, MemPurpose::Scratch, "the cuBLAS workspace"),
      x16_(allocator, MemPurpose::Scratch, "16-bit GEMM inputs") {
  if (workspace_bytes > 0)
    check_cublas(
        cublasSetWorkspace(handle_.get(), workspace_.reserve(workspace_bytes), workspace_bytes),
        "cublasSetWorkspace");
}

void Gemm::run(const float* x, int64_t n, const WeightView& w, float* out) {
  if (n <= 0 || w.rows <= 0) return;
  if (n > INT_MAX || w.rows > INT_MAX || w.cols > INT_MAX)
    raise(Err::Internal, "matmul of " + std::to_string(n) + " x " + std::to_string(w.cols) +
                             " by a " + std::to_string(w.rows) + " x " + std::to_string(w.cols) +
                             " weight exceeds cuBLAS's 32-bit dimensions");
  const int m = int(w.rows), cols = int(w.cols), tokens = int(n);
  cudaDataType_t type;
  const void* b = x;
  switch (w.dtype) {
    case DType::F32:
      type = CUDA_R_32F;
      break;
    case DType::BF16:
    case DType::F16: {
      type = w.dtype == DType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
      void* x16 = x16_.reserve(size_t(n) * size_t(cols) * 2);
      check_cuda(launch_convert_from_f32(x, n * cols, x16, w.dtype, stream_),
                 "convert_from_f32 kernel");
      b = x16;
      break;
    }
    default:
      raise(Err::DTypeUnsupported, "the CUDA backend multiplies F32, F16 and BF16 weights, not " +
                                       std::string(dtype_name(w.dtype)));
  }
  // Row-major out[n, m] = x[n, k] . W[m, k]^T is column-major out^T[m, n] = W^T . x^T, where
  // the row-major W is a column-major [k, m] matrix (lda = k) taken transposed.
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t st = cublasGemmEx(handle_.get(), CUBLAS_OP_T, CUBLAS_OP_N, m, tokens, cols,
                                         &alpha, w.data, type, cols, b, type, cols, &beta, out,
                                         CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS)
    raise_cublas_error(st, "cublasGemmEx (" + std::to_string(n) + " x " + std::to_string(cols) +
                               " . " + std::to_string(m) + " x " + std::to_string(cols) + "^T, " +
                               std::string(dtype_name(w.dtype)) + ")");
}

}  // namespace qmpi::cuda
