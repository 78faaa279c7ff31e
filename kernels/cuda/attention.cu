#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/kv_element.cuh"
#include "kernels/cuda/kv_layout.h"
#include "kernels/cuda/launchers.h"

namespace qmpi::cuda {
namespace {

constexpr int kWarps = kAttentionThreads / kWarp;
constexpr int kPerLane = kAttentionMaxHeadDim / kWarp;

// One block per (query row, query head, key chunk). Warp w takes the chunk's keys w, w + 4, ...;
// each lane holds the dims lane, lane + 32, ... of q and of its running output, so a key's row
// is read coalesced and its score is one warp sum. Each warp keeps its own online-softmax
// state (max, sum, output); the four states are merged at the end through shared memory. T is
// the cache's element type; an e4m3 key's scale multiplies its score, a value's its weight.
// With one chunk the block writes the normalised output; with several it writes its state to
// the partials and attention_combine_kernel finishes the row.
template <class T>
__global__ void __launch_bounds__(kAttentionThreads) attention_kernel(AttentionParams p) {
  const int64_t row = blockIdx.x / p.chunks;
  const int32_t chunk = int32_t(blockIdx.x % p.chunks);
  const int32_t head = blockIdx.y;
  const int32_t s = p.row_seq[row];
  if (s < 0) return;
  const AttentionSeqDev seq = p.seqs[s];
  const int32_t n_keys = query_position(seq.ctx_len, seq.q_len, int32_t(row) - seq.q_begin) + 1;
  const int32_t k_begin = chunk * p.chunk_keys;
  const int32_t k_end = min(n_keys, k_begin + p.chunk_keys);  // <= k_begin: an empty chunk
  const int32_t kvh = p.kv_head_of[head];
  const KvPoolsDev& c = p.cache;
  const T* k_pool = static_cast<const T*>(c.k);
  const T* v_pool = static_cast<const T*>(c.v);
  const int32_t* table = p.block_tables + seq.table_begin;
  const int32_t hd = p.head_dim;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;

  const float* q = p.q + (row * p.heads + head) * hd;
  float qv[kPerLane], acc[kPerLane];
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) {
    const int d = lane + e * kWarp;
    qv[e] = d < hd ? q[d] * p.scale : 0.0f;
    acc[e] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int32_t j = k_begin + warp; j < k_end; j += kWarps) {
    const int64_t vec = kv_slot(table, j, p.block_size) * p.kv_heads + kvh;
    const int64_t off = vec * hd;
    float dot = 0.0f;
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) {
      const int d = lane + e * kWarp;
      if (d < hd) dot += qv[e] * kv_load(k_pool, off + d);
    }
    dot = warp_sum(dot);
    float v_scale = 1.0f;
    if constexpr (sizeof(T) == 1) {
      dot *= c.k_scale[vec];
      v_scale = c.v_scale[vec];
    }
    const float m_new = fmaxf(m, dot);
    const float corr = expf(m - m_new);  // 0 for the warp's first key (m = -inf)
    const float pj = expf(dot - m_new);
    l = l * corr + pj;
    const float wj = pj * v_scale;
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) {
      const int d = lane + e * kWarp;
      if (d < hd) acc[e] = acc[e] * corr + wj * kv_load(v_pool, off + d);
    }
    m = m_new;
  }

  __shared__ float warp_max[kWarps], warp_sum_exp[kWarps];
  __shared__ float warp_acc[kWarps][kAttentionMaxHeadDim];
  if (lane == 0) {
    warp_max[warp] = m;
    warp_sum_exp[warp] = l;
  }
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) {
    const int d = lane + e * kWarp;
    if (d < hd) warp_acc[warp][d] = acc[e];
  }
  __syncthreads();

  float gmax = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) gmax = fmaxf(gmax, warp_max[w]);
  float weight[kWarps];
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    // A warp that saw no key (fewer keys than warps) has max -inf and contributes nothing.
    weight[w] = warp_max[w] == -INFINITY ? 0.0f : expf(warp_max[w] - gmax);
    total += warp_sum_exp[w] * weight[w];
  }
  const int64_t pair = row * p.heads + head;
  if (p.chunks == 1) {
    float* out = p.out + pair * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
      float o = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) o += warp_acc[w][d] * weight[w];
      out[d] = o / total;
    }
    return;
  }
  // An empty chunk leaves max -inf, sum 0 and a zero output: the combine gives it no weight.
  const int64_t part = pair * p.chunks + chunk;
  float* out = p.partial_out + part * hd;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) o += warp_acc[w][d] * weight[w];
    out[d] = o;
  }
  if (threadIdx.x == 0) {
    p.partial_max[part] = gmax;
    p.partial_sum[part] = total;
  }
}

// One block per (query row, query head): merges the row's chunk states, each rescaled from its
// own max to the largest. Thread 0 works out the <= kSplitMaxChunks weights alone: it is a
// handful of expf, and keeps the merge plain.
__global__ void __launch_bounds__(kAttentionThreads) attention_combine_kernel(AttentionParams p) {
  const int64_t row = blockIdx.x;
  const int32_t head = blockIdx.y;
  if (p.row_seq[row] < 0) return;
  const int64_t first = (row * p.heads + head) * p.chunks;
  __shared__ float weight[kSplitMaxChunks];
  __shared__ float total;
  if (threadIdx.x == 0) {
    float gmax = -INFINITY;
    for (int32_t c = 0; c < p.chunks; ++c) gmax = fmaxf(gmax, p.partial_max[first + c]);
    float t = 0.0f;
    for (int32_t c = 0; c < p.chunks; ++c) {
      const float m = p.partial_max[first + c];
      weight[c] = m == -INFINITY ? 0.0f : expf(m - gmax);
      t += p.partial_sum[first + c] * weight[c];
    }
    total = t;
  }
  __syncthreads();
  const int32_t hd = p.head_dim;
  float* out = p.out + (row * p.heads + head) * hd;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float o = 0.0f;
    for (int32_t c = 0; c < p.chunks; ++c) o += p.partial_out[(first + c) * hd + d] * weight[c];
    out[d] = o / total;
  }
}

}  // namespace

cudaError_t launch_attention(const AttentionParams& p, cudaStream_t stream) {
  if (p.rows <= 0 || p.heads <= 0) return cudaSuccess;
  if (p.kv_heads <= 0 || !p.kv_head_of || p.block_size <= 0) return cudaErrorInvalidValue;
  if (p.chunks < 1 || p.chunks > kSplitMaxChunks || p.chunk_keys < 1) return cudaErrorInvalidValue;
  if (p.chunks > 1 && (!p.partial_out || !p.partial_max || !p.partial_sum))
    return cudaErrorInvalidValue;
  const LaunchShape s = attention_shape(p.rows, p.heads, p.head_dim, p.chunks);
  if (s.empty()) return cudaErrorInvalidValue;
  switch (p.cache.dtype) {
    case DType::F32:
      attention_kernel<float><<<grid_of(s), s.block, 0, stream>>>(p);
      break;
    case DType::BF16:
      attention_kernel<__nv_bfloat16><<<grid_of(s), s.block, 0, stream>>>(p);
      break;
    case DType::F8_E4M3:
      attention_kernel<__nv_fp8_storage_t><<<grid_of(s), s.block, 0, stream>>>(p);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  if (p.chunks == 1) return cudaGetLastError();
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  const LaunchShape merge = attention_shape(p.rows, p.heads, p.head_dim);
  attention_combine_kernel<<<grid_of(merge), merge.block, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace qmpi::cuda
