// The plain C++ face of the .cu kernels: host code (src/backend/cuda) calls these and never
// sees a kernel. Every pointer except where noted is device memory; every launcher enqueues
// on `stream`, returns the launch's error (cudaGetLastError) and launches nothing for empty
// inputs. Weights come in their checkpoint dtype (F32, F16 or BF16); all math is float32.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace qmpi::cuda {

// out[i, :] = table[ids[i] - row_offset, :] for ids inside [row_offset, row_offset + table_rows),
// else zeros (vocab-parallel embedding).
cudaError_t launch_embedding(const int32_t* ids, int64_t n, const void* table, DType dtype,
                             int64_t table_rows, int64_t width, int64_t row_offset, float* out,
                             cudaStream_t stream);

// out = x * rsqrt(mean(x^2) + eps) * w per row of `width`, sums in float32. out_bf16 (may be
// null) gets out rounded to nearest-even bf16, element for element (the next GEMM's input).
cudaError_t launch_rmsnorm(const float* x, int64_t n, const void* w, DType dtype, int64_t width,
                           float eps, float* out, void* out_bf16, cudaStream_t stream);

// x += y, then out = rmsnorm(x), per row of `width` (the residual add and the next norm).
// out may be x; out_bf16 as for launch_rmsnorm.
cudaError_t launch_add_rmsnorm(float* x, const float* y, int64_t n, const void* w, DType dtype,
                               int64_t width, float eps, float* out, void* out_bf16,
                               cudaStream_t stream);

// Rotate-half (NeoX) RoPE in place on x[n, heads, head_dim]: pair m of token t at position p
// turns by float(p) * inv_freq[m] (inv_freq: head_dim / 2 floats, or one such row per token
// when per_token; model/rope_scaling.h), cos and sin multiplied by `attention`.
cudaError_t launch_rope(float* x, int64_t n, int32_t heads, int32_t head_dim,
                        const int32_t* positions, const float* inv_freq, bool per_token,
                        float attention, cudaStream_t stream);

// The paged cache of one layer as the kernels see it (KvLayerView's device half): pools of
// [num_blocks, block_size, kv_heads, head_dim] elements of `dtype` (F32, BF16 or F8_E4M3, the
// last with a float scale per (slot, KV head) in k_scale / v_scale).
struct KvPoolsDev {
  void* k = nullptr;
  void* v = nullptr;
  float* k_scale = nullptr;
  float* v_scale = nullptr;
  DType dtype = DType::F32;
  int32_t kv_heads = 0;
  int32_t head_dim = 0;
};

// k/v[n, kv_heads, head_dim] -> cache pools at slots[n] (the caller checks the slots), rounded
// as the CPU backend's kv_store rounds (bf16 and e4m3 to nearest even, e4m3 saturating, the
// e4m3 scale = the vector's largest |x| / 448).
cudaError_t launch_kv_store(const float* k, const float* v, int64_t n, const int32_t* slots,
                            const KvPoolsDev& cache, cudaStream_t stream);

// Device mirror of backend.h's AttentionSeq (same four int32 fields, same order).
struct AttentionSeqDev {
  int32_t q_begin;
  int32_t q_len;
  int32_t ctx_len;
  int32_t table_begin;
};

struct AttentionParams {
  const float* q = nullptr;  // [rows, heads, head_dim]
  float* out = nullptr;      // same shape; rows with row_seq < 0 are left untouched
  KvPoolsDev cache;
  const AttentionSeqDev* seqs = nullptr;
  const int32_t* row_seq = nullptr;  // [rows]: the sequence of each query row, or -1
  const int32_t* block_tables = nullptr;
  const int32_t* kv_head_of = nullptr;  // [heads]: the KV head each query head reads
  int64_t rows = 0;
  int32_t heads = 0;
  int32_t kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 0;
  float scale = 1.0f;
  // Flash-decoding (launch_shapes.h, attention_split): with chunks > 1, block (row, head, c)
  // takes keys [c * chunk_keys, (c + 1) * chunk_keys) of the row's causal range and writes its
  // online-softmax state to the partials; a second kernel merges them into out. With chunks = 1,
  // chunk_keys must cover the longest context and the partials are unused.
  int32_t chunks = 1;
  int32_t chunk_keys = 0;
  float* partial_out = nullptr;  // [rows, heads, chunks, head_dim]: sum of weight x value
  float* partial_max = nullptr;  // [rows, heads, chunks]: largest score (-inf: no keys)
  float* partial_sum = nullptr;  // [rows, heads, chunks]: sum of exp(score - max)
};

// Causal GQA attention over the paged cache, online softmax in float32; head_dim <= 256.
cudaError_t launch_attention(const AttentionParams& p, cudaStream_t stream);

// out = silu(gate) * up over count elements; out_bf16 as for launch_rmsnorm.
cudaError_t launch_silu_mul(const float* gate, const float* up, int64_t count, float* out,
                            void* out_bf16, cudaStream_t stream);

// x += y over count elements.
cudaError_t launch_add(float* x, const float* y, int64_t count, cudaStream_t stream);

// dst[i, :] = src[rows[i], :] for i < count.
cudaError_t launch_gather_rows(const float* src, const int32_t* rows, int64_t count, int64_t width,
                               float* dst, cudaStream_t stream);

// dst[rows[i], :] += scales[i] * src[i, :] for i < count; rows distinct.
cudaError_t launch_scatter_add_rows(const float* src, const int32_t* rows, const float* scales,
                                    int64_t count, int64_t width, float* dst, cudaStream_t stream);

// out[i, :] += bias[:] for i < n (bias in its checkpoint dtype).
cudaError_t launch_add_bias(float* out, int64_t n, int64_t width, const void* bias, DType dtype,
                            cudaStream_t stream);

// out[count] = x rounded to nearest even in `to` (BF16 or F16): the GEMM input of 16-bit weights.
cudaError_t launch_convert_from_f32(const float* x, int64_t count, void* out, DType to,
                                    cudaStream_t stream);

}  // namespace qmpi::cuda
