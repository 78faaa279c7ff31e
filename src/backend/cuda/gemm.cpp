#include "backend/cuda/gemm.h"

#include <algorithm>
#include <climits>
#include <string>

#include "backend/cuda/cublas_library.h"
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
        cublas().set_workspace(handle_.get(), workspace_.reserve(workspace_bytes), workspace_bytes),
        "cublasSetWorkspace");
}

namespace {

bool is_16bit(DType t) {
  return t == DType::BF16 || t == DType::F16;
}

void require_16bit(const WeightView& w) {
  if (!is_16bit(w.dtype))
    raise(Err::Internal,
          "a 16-bit GEMM input for a " + std::string(dtype_name(w.dtype)) + " weight");
}

}  // namespace

void Gemm::run(const float* x, int64_t n, const WeightView& w, float* out) {
  if (n <= 0 || w.rows <= 0) return;
  if (!is_16bit(w.dtype)) return gemm(x, n, w, out);  // F32, or the dtype error
  gemm(convert_input(x, n, w), n, w, out);
}

const void* Gemm::convert_input(const float* x, int64_t n, const WeightView& w) {
  require_16bit(w);
  void* x16 = x16_.reserve(size_t(std::max<int64_t>(n * w.cols, 0)) * 2);
  check_cuda(launch_convert_from_f32(x, n * w.cols, x16, w.dtype, stream_),
             "convert_from_f32 kernel");
  return x16;
}

void Gemm::run_16bit(const void* x16, int64_t n, const WeightView& w, float* out) {
  require_16bit(w);
  gemm(x16, n, w, out);
}

void Gemm::gemm(const void* x, int64_t n, const WeightView& w, float* out) {
  if (n <= 0 || w.rows <= 0) return;
  if (n > INT_MAX || w.rows > INT_MAX || w.cols > INT_MAX)
    raise(Err::Internal, "matmul of " + std::to_string(n) + " x " + std::to_string(w.cols) +
                             " by a " + std::to_string(w.rows) + " x " + std::to_string(w.cols) +
                             " weight exceeds cuBLAS's 32-bit dimensions");
  const int m = int(w.rows), cols = int(w.cols), tokens = int(n);
  cudaDataType_t type;
  switch (w.dtype) {
    case DType::F32:
      type = CUDA_R_32F;
      break;
    case DType::BF16:
      type = CUDA_R_16BF;
      break;
    case DType::F16:
      type = CUDA_R_16F;
      break;
    default:
      raise(Err::DTypeUnsupported, "the CUDA backend multiplies F32, F16 and BF16 weights, not " +
                                       std::string(dtype_name(w.dtype)));
  }
  // Row-major out[n, m] = x[n, k] . W[m, k]^T is column-major out^T[m, n] = W^T . x^T, where
  // the row-major W is a column-major [k, m] matrix (lda = k) taken transposed.
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t st = cublas().gemm_ex(
      handle_.get(), CUBLAS_OP_T, CUBLAS_OP_N, m, tokens, cols, &alpha, w.data, type, cols, x, type,
      cols, &beta, out, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS)
    raise_cublas_error(st, "cublasGemmEx (" + std::to_string(n) + " x " + std::to_string(cols) +
                               " . " + std::to_string(m) + " x " + std::to_string(cols) + "^T, " +
                               std::string(dtype_name(w.dtype)) + ")");
}

}  // namespace qmpi::cuda
