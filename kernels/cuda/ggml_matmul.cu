// The GGUF matmul on the GPU, each weight decoded from its block (the layouts of
// kernels/cpu/ggml_dequant.cpp): for decode (up to kGgmlGemvMaxRows rows of x) a GEMV that
// decodes in registers, one warp per output row, its 32 lanes on 32 consecutive weights, in
// float32; for prefill the whole weight as bf16, one element per thread, for the cuBLAS GEMM
// every dense weight goes through (cuda_backend.cpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/ggml_types.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/ggml_launchers.h"
#include "kernels/cuda/warp_gemv.cuh"

namespace qmpi::cuda {
namespace {

__device__ __forceinline__ float f16_at(const uint8_t* p) {
  return __half2float(__ushort_as_half(uint16_t(p[0] | p[1] << 8)));
}

// Q4_0/Q4_1 (five = false) and Q5_0/Q5_1: byte i of the nibbles holds elements i and i + 16;
// Q5's fifth bit of element e is bit e of the 32-bit qh.
__device__ float q4q5(const uint8_t* b, int e, bool has_min, bool five) {
  const float d = f16_at(b);
  const float m = has_min ? f16_at(b + 2) : 0.0f;
  const uint8_t* p = b + (has_min ? 4 : 2);
  const uint8_t* qs = p + (five ? 4 : 0);
  int q = (qs[e % 16] >> (4 * (e / 16))) & 0x0f;
  if (five) q |= ((p[e / 8] >> (e % 8)) & 1) << 4;
  const int bias = has_min ? 0 : (five ? 16 : 8);
  return float(q - bias) * d + m;
}

__device__ float q2_k(const uint8_t* b, int e) {
  const int h = e / 128, j = (e / 32) % 4, l = e % 32;
  const uint8_t sc = b[e / 16];
  const int q = (b[16 + 32 * h + l] >> (2 * j)) & 3;
  return f16_at(b + 80) * float(sc & 0x0f) * float(q) - f16_at(b + 82) * float(sc >> 4);
}

__device__ float q3_k(const uint8_t* b, int e) {
  const int h = e / 128, j = (e / 32) % 4, l = e % 32, s = e / 16;
  const uint8_t* scales = b + 96;
  const int lo = s < 8 ? scales[s] & 0x0f : scales[s - 8] >> 4;
  const int sc = (lo | ((scales[8 + s % 4] >> (2 * (s / 4))) & 3) << 4) - 32;
  const int q = ((b[32 + 32 * h + l] >> (2 * j)) & 3) - ((b[l] >> (4 * h + j)) & 1 ? 0 : 4);
  return f16_at(b + 108) * float(sc) * float(q);
}

__device__ float q45_k(const uint8_t* b, int e, bool five) {
  const int s = e / 32, l = e % 32;
  const uint8_t* sm = b + 4;
  int sc, mn;
  if (s < 4) {
    sc = sm[s] & 63;
    mn = sm[s + 4] & 63;
  } else {
    sc = (sm[s + 4] & 0x0f) | (sm[s - 4] >> 6) << 4;
    mn = (sm[s + 4] >> 4) | (sm[s] >> 6) << 4;
  }
  const uint8_t* qs = b + (five ? 48 : 16);
  int q = (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0x0f;
  if (five) q |= ((b[16 + l] >> s) & 1) << 4;
  return f16_at(b) * float(sc) * float(q) - f16_at(b + 2) * float(mn);
}

__device__ float q6_k(const uint8_t* b, int e) {
  const int h = e / 128, k = (e / 32) % 4, l = e % 32;
  const int lo = (b[64 * h + l + 32 * (k % 2)] >> (4 * (k / 2))) & 0x0f;
  const int hi = (b[128 + 32 * h + l] >> (2 * k)) & 3;
  const int8_t sc = int8_t(b[192 + e / 16]);
  return f16_at(b + 208) * float(sc) * float((lo | hi << 4) - 32);
}

// Element e of the block at b (a constant `type` folds the switch away).
__device__ __forceinline__ float decode(uint32_t type, const uint8_t* b, int e) {
  switch (GgmlType(type)) {
    case GgmlType::F32:
      return *reinterpret_cast<const float*>(b);
    case GgmlType::F16:
      return f16_at(b);
    case GgmlType::BF16:
      return __bfloat162float(__ushort_as_bfloat16(uint16_t(b[0] | b[1] << 8)));
    case GgmlType::Q4_0:
      return q4q5(b, e, false, false);
    case GgmlType::Q4_1:
      return q4q5(b, e, true, false);
    case GgmlType::Q5_0:
      return q4q5(b, e, false, true);
    case GgmlType::Q5_1:
      return q4q5(b, e, true, true);
    case GgmlType::Q8_0:
      return float(int8_t(b[2 + e])) * f16_at(b);
    case GgmlType::Q2_K:
      return q2_k(b, e);
    case GgmlType::Q3_K:
      return q3_k(b, e);
    case GgmlType::Q4_K:
      return q45_k(b, e, false);
    case GgmlType::Q5_K:
      return q45_k(b, e, true);
    case GgmlType::Q6_K:
      return q6_k(b, e);
    default:
      return 0.0f;  // not a weight type: the backend's check keeps these out
  }
}

__global__ void dequant_kernel(GgmlDevice w, __nv_bfloat16* dst) {
  const int64_t total = w.rows * w.cols;
  for (int64_t i = global_thread(); i < total; i += grid_stride()) {
    const int64_t r = i / w.cols, c = i % w.cols;
    const uint8_t* block = w.data + r * w.row_bytes + c / w.block_elems * w.block_bytes;
    dst[i] = __float2bfloat16_rn(decode(w.type, block, int(c % w.block_elems)));
  }
}

__global__ void embedding_kernel(const int32_t* ids, int64_t n, GgmlDevice w, int64_t row_offset,
                                 float* out) {
  const int64_t total = n * w.cols;
  for (int64_t i = global_thread(); i < total; i += grid_stride()) {
    const int64_t r = int64_t(ids[i / w.cols]) - row_offset, c = i % w.cols;
    if (r < 0 || r >= w.rows) {
      out[i] = 0.0f;
      continue;
    }
    const uint8_t* block = w.data + r * w.row_bytes + c / w.block_elems * w.block_bytes;
    out[i] = decode(w.type, block, int(c % w.block_elems));
  }
}

template <uint32_t kType>
__global__ void gemv_kernel(const float* x, int n, GgmlDevice w, float* out) {
  const int64_t row = gemv_row();
  if (row >= w.rows) return;
  GemvSums<int(kGgmlGemvMaxRows)> sums;
  const uint8_t* q = w.data + row * w.row_bytes;
  for (int64_t c = int64_t(threadIdx.x % kWarp); c < w.cols; c += kWarp)
    sums.add(decode(kType, q + c / w.block_elems * w.block_bytes, int(c % w.block_elems)), x, n,
             w.cols, c);
  sums.store(n, out, w.rows, row);
}

template <uint32_t kType>
void launch_gemv(const float* x, int64_t n, const GgmlDevice& w, float* out, uint32_t blocks,
                 cudaStream_t stream) {
  gemv_kernel<kType><<<blocks, kGemvThreads, 0, stream>>>(x, int(n), w, out);
}

}  // namespace

cudaError_t launch_ggml_gemv(const float* x, int64_t n, const GgmlDevice& w, float* out,
                             cudaStream_t stream) {
  uint32_t b = 0;
  if (const cudaError_t e = gemv_grid(n, kGgmlGemvMaxRows, w.rows, &b); e != cudaSuccess || b == 0)
    return e;
  switch (GgmlType(w.type)) {
    case GgmlType::F32:
      launch_gemv<uint32_t(GgmlType::F32)>(x, n, w, out, b, stream);
      break;
    case GgmlType::F16:
      launch_gemv<uint32_t(GgmlType::F16)>(x, n, w, out, b, stream);
      break;
    case GgmlType::BF16:
      launch_gemv<uint32_t(GgmlType::BF16)>(x, n, w, out, b, stream);
      break;
    case GgmlType::Q4_0:
      launch_gemv<uint32_t(GgmlType::Q4_0)>(x, n, w, out, b, stream);
      break;
    case GgmlType::Q4_1:
      launch_gemv<uint32_t(GgmlType::Q4_1)>(x, n, w, out, b, stream);
      break;
    case GgmlType::Q5_0:
      launch_gemv<uint32_t(GgmlType::Q5_0)>(x, n, w, out, b, stream);
      break;
    case GgmlType::Q5_1:
      launch_gemv<uint32_t(GgmlType::Q5_1)>(x, n, w, out, b, stream);
      break;
    case GgmlType::Q8_0:
      launch_gemv<uint32_t(GgmlType::Q8_0)>(x, n, w, out, b, stream);
      break;
    case GgmlType::Q2_K:
      launch_gemv<uint32_t(GgmlType::Q2_K)>(x, n, w, out, b, stream);
      break;
    case GgmlType::Q3_K:
      launch_gemv<uint32_t(GgmlType::Q3_K)>(x, n, w, out, b, stream);
      break;
    case GgmlType::Q4_K:
      launch_gemv<uint32_t(GgmlType::Q4_K)>(x, n, w, out, b, stream);
      break;
    case GgmlType::Q5_K:
      launch_gemv<uint32_t(GgmlType::Q5_K)>(x, n, w, out, b, stream);
      break;
    case GgmlType::Q6_K:
      launch_gemv<uint32_t(GgmlType::Q6_K)>(x, n, w, out, b, stream);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t launch_ggml_embedding(const int32_t* ids, int64_t n, const GgmlDevice& w,
                                  int64_t row_offset, float* out, cudaStream_t stream) {
  const LaunchShape s = elementwise_shape(n * w.cols);
  if (s.empty()) return cudaSuccess;
  embedding_kernel<<<grid_of(s), s.block, 0, stream>>>(ids, n, w, row_offset, out);
  return cudaGetLastError();
}

cudaError_t launch_ggml_dequant_bf16(const GgmlDevice& w, void* dst, cudaStream_t stream) {
  const LaunchShape s = elementwise_shape(w.rows * w.cols);
  if (s.empty()) return cudaSuccess;
  dequant_kernel<<<grid_of(s), s.block, 0, stream>>>(w, static_cast<__nv_bfloat16*>(dst));
  return cudaGetLastError();
}

}  // namespace qmpi::cuda
