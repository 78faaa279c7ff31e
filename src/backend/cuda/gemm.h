// out[n, w.rows] = x[n, w.cols] . w^T through cuBLAS, for weights in their checkpoint dtype.
//
// BF16 / F16 weights: x is rounded to the weight's 16-bit type (a conversion kernel into scratch)
// and multiplied on the tensor cores with float32 accumulation (CUBLAS_COMPUTE_32F), writing
// float32 directly, so no output conversion is needed. Rounding x costs about 2^-9 relative
// per element, under the 1e-2 bound the kernel checks use. With F16 weights, activations beyond
// the f16 range (65504) become inf: Qwen checkpoints are BF16, so this path is for tests.
// F32 weights: plain float32 GEMM (TF32 off), exact to float32 rounding.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/backend.h"
#include "backend/cuda/cuda_handles.h"
#include "backend/cuda/device_allocator.h"

namespace qmpi::cuda {

class Gemm {
 public:
  // `workspace_bytes` of scratch for cuBLAS (counted by the allocator, so budgets see it).
  Gemm(DeviceAllocator& allocator, cudaStream_t stream, size_t workspace_bytes);
  void run(const float* x, int64_t n, const WeightView& w, float* out);

  // The two halves of run() for 16-bit weights, for callers that multiply one x by several
  // weights (q/k/v, gate/up: Backend::matmul_group once merged): convert x once, then run each.
  // convert_input rounds x[n, w.cols] to w's 16-bit type into scratch that stays valid until
  // the next convert_input or run; run_16bit takes x already in that type (BF16 / F16 weights).
  const void* convert_input(const float* x, int64_t n, const WeightView& w);
  // A copy of x the op that wrote x rounded itself (backend/activation.h, GemmInput) goes
  // straight to run_16bit.
  void run_16bit(const void* x16, int64_t n, const WeightView& w, float* out);

 private:
  // out = x . w^T with x in w's type (float32, or the 16-bit type of a BF16 / F16 weight).
  void gemm(const void* x, int64_t n, const WeightView& w, float* out);

  cudaStream_t stream_;
  CublasHandle handle_;
  DeviceArray workspace_;
  DeviceArray x16_;
};

}  // namespace qmpi::cuda
