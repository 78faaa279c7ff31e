#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/kv_element.cuh"
#include "kernels/cuda/kv_layout.h"
#include "kernels/cuda/launchers.h"

namespace qmpi::cuda {
namespace {

// One warp per (token, KV head) vector: an fp8 vector's scale needs its largest |x| first.
template <class T>
__global__ void kv_store_kernel(const float* k, const float* v, int64_t n, const int32_t* slots,
                                KvPoolsDev c) {
  const int lane = threadIdx.x % kWarp;
  const int64_t vectors = n * c.kv_heads;
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / kWarp;
  for (int64_t w = global_thread() / kWarp; w < vectors; w += warps) {
    const int64_t t = w / c.kv_heads;
    const int32_t head = int32_t(w % c.kv_heads);
    const int64_t vec = int64_t(slots[t]) * c.kv_heads + head;
    const int64_t dst = kv_offset(slots[t], head, c.kv_heads, c.head_dim);
    for (int pool = 0; pool < 2; ++pool) {
      const float* x = (pool == 0 ? k : v) + w * c.head_dim;
      T* out = static_cast<T*>(pool == 0 ? c.k : c.v) + dst;
      float scale = 1.0f;
      if constexpr (sizeof(T) == 1) {
        float amax = 0.0f;
        for (int32_t d = lane; d < c.head_dim; d += kWarp) amax = fmaxf(amax, fabsf(x[d]));
        amax = warp_max(amax);
        if (amax > 0.0f) scale = amax / 448.0f;  // kv_dtype.h e4m3_scale
        if (lane == 0) (pool == 0 ? c.k_scale : c.v_scale)[vec] = scale;
      }
      for (int32_t d = lane; d < c.head_dim; d += kWarp)
        out[d] = kv_round<T>(sizeof(T) == 1 ? x[d] / scale : x[d]);
    }
  }
}

template <class T>
cudaError_t launch(const float* k, const float* v, int64_t n, const int32_t* slots,
                   const KvPoolsDev& c, cudaStream_t stream) {
  const LaunchShape s = kv_store_shape(n, c.kv_heads, c.head_dim);
  if (s.empty()) return cudaSuccess;
  kv_store_kernel<T><<<grid_of(s), s.block, 0, stream>>>(k, v, n, slots, c);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_kv_store(const float* k, const float* v, int64_t n, const int32_t* slots,
                            const KvPoolsDev& cache, cudaStream_t stream) {
  switch (cache.dtype) {
    case DType::F32:
      return launch<float>(k, v, n, slots, cache, stream);
    case DType::BF16:
      return launch<__nv_bfloat16>(k, v, n, slots, cache, stream);
    case DType::F8_E4M3:
      return launch<__nv_fp8_storage_t>(k, v, n, slots, cache, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace qmpi::cuda
