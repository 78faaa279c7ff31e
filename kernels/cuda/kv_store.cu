#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/kv_layout.h"
#include "kernels/cuda/launchers.h"

namespace qmpi::cuda {
namespace {

__global__ void kv_store_kernel(const float* k, const float* v, int64_t n, const int32_t* slots,
                                float* k_cache, float* v_cache, int32_t kv_heads,
                                int32_t head_dim) {
  const int64_t row = int64_t(kv_heads) * head_dim;
  const int64_t total = n * row;
  for (int64_t idx = global_thread(); idx < total; idx += grid_stride()) {
    const int64_t t = idx / row;
    const int32_t slot = slots[t];
    const int64_t e = idx % row;
    const int64_t dst = kv_offset(slot, int32_t(e / head_dim), kv_heads, head_dim) + e % head_dim;
    k_cache[dst] = k[idx];
    v_cache[dst] = v[idx];
  }
}

}  // namespace

cudaError_t launch_kv_store(const float* k, const float* v, int64_t n, const int32_t* slots,
                            float* k_cache, float* v_cache, int32_t kv_heads, int32_t head_dim,
                            cudaStream_t stream) {
  const LaunchShape s = kv_store_shape(n, kv_heads, head_dim);
  if (s.empty()) return cudaSuccess;
  kv_store_kernel<<<grid_of(s), s.block, 0, stream>>>(k, v, n, slots, k_cache, v_cache, kv_heads,
                                                      head_dim);
  return cudaGetLastError();
}

}  // namespace qmpi::cuda
