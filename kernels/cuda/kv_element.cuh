// KV cache elements on the device: reading F32 / BF16 / e4m3 pool elements as float32 and
// writing them back rounded the way the CPU backend rounds (kernels/cpu/kv_store.cpp).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace qmpi::cuda {

template <class T>
__device__ __forceinline__ float kv_load(const T* pool, int64_t i);
template <>
__device__ __forceinline__ float kv_load<float>(const float* pool, int64_t i) {
  return pool[i];
}
template <>
__device__ __forceinline__ float kv_load<__nv_bfloat16>(const __nv_bfloat16* pool, int64_t i) {
  return __bfloat162float(pool[i]);
}
template <>
__device__ __forceinline__ float kv_load<__nv_fp8_storage_t>(const __nv_fp8_storage_t* pool,
                                                             int64_t i) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(pool[i], __NV_E4M3)));
}

template <class T>
__device__ __forceinline__ T kv_round(float x);
template <>
__device__ __forceinline__ float kv_round<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 kv_round<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __nv_fp8_storage_t kv_round<__nv_fp8_storage_t>(float x) {
  return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}

}  // namespace qmpi::cuda
