#include "model/qwen2.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace qmpi {
namespace {
enum Slot { kNormed, kQ, kK, kV, kAttn, kProj, kGate, kUp, kRows, kLogits, kGathered, kNumSlots };
}

Qwen2Model::Qwen2Model(const ModelConfig& cfg, const ShardPlan& plan, Backend& backend, Comm& tp,
                       Qwen2Weights weights)
    : cfg_(cfg), plan_(plan), be_(backend), tp_(tp), w_(std::move(weights)), scratch_(kNumSlots) {}

// Step-sized work buffers, grown on demand and reused across steps.
float* Qwen2Model::scratch(int slot, size_t floats) {
  Buffer& b = scratch_[slot];
  if (b.bytes() < floats * sizeof(float))
    b = be_.alloc(std::max<size_t>(floats, 1) * sizeof(float));
  return b.as<float>();
}

void Qwen2Model::all_reduce(float* x, int64_t count) {
  if (tp_.size() > 1) tp_.all_reduce_sum(x, size_t(count));
}

void Qwen2Model::embed(const BatchInput& batch, float* hidden) {
  const int64_t T = batch.num_tokens();
  be_.embedding(batch.tokens.data(), T, w_.embedding.view(), plan_.vocab.begin, hidden);
  all_reduce(hidden, T * cfg_.hidden_size);  // each TP rank filled only its vocab rows
}

void Qwen2Model::run_layers(const BatchInput& batch, float* x, KvCache& cache) {
  const int64_t T = batch.num_tokens();
  const int64_t h = cfg_.hidden_size, d = cfg_.head_dim;
  const int32_t nq = int32_t(plan_.q_heads.size()), nkv = int32_t(plan_.kv_heads.size());
  const int64_t im = plan_.intermediate.size();
  const float eps = float(cfg_.rms_norm_eps);

  float* xn = scratch(kNormed, T * h);
  float* q = scratch(kQ, T * nq * d);
  float* k = scratch(kK, T * nkv * d);
  float* v = scratch(kV, T * nkv * d);
  float* attn = scratch(kAttn, T * nq * d);
  float* proj = scratch(kProj, T * h);
  float* gate = scratch(kGate, T * im);
  float* up = scratch(kUp, T * im);

  AttentionBatch ab;
  ab.seqs = batch.seqs.data();
  ab.num_seqs = int32_t(batch.seqs.size());
  ab.block_tables = batch.block_tables.data();
  ab.num_heads = nq;
  ab.num_kv_heads = nkv;
  ab.head_dim = int32_t(d);
  ab.scale = float(1.0 / std::sqrt(double(d)));
  ab.kv_head_of = plan_.kv_head_of_q.data();

  for (size_t l = 0; l < w_.layers.size(); ++l) {
    const Qwen2LayerWeights& L = w_.layers[l];
    const KvLayerView kv = cache.layer(int(l));

    // Attention block: x += o_proj(attention(rope(q), rope(k), v)), o_proj all-reduced over TP.
    be_.rmsnorm(x, T, L.input_norm.view(), eps, xn);
    L.q.forward(be_, xn, T, q);
    L.k.forward(be_, xn, T, k);
    L.v.forward(be_, xn, T, v);
    be_.rope(q, T, nq, int32_t(d), batch.positions.data(), cfg_.rope_theta);
    be_.rope(k, T, nkv, int32_t(d), batch.positions.data(), cfg_.rope_theta);
    be_.kv_store(k, v, T, batch.slots.data(), kv);
    be_.attention(q, ab, kv, attn);
    L.o.forward(be_, attn, T, proj);
    all_reduce(proj, T * h);
    be_.add(x, proj, T * h);

    // MLP block: x += down(silu(gate(x)) * up(x)), down all-reduced over TP.
    be_.rmsnorm(x, T, L.post_norm.view(), eps, xn);
    L.gate.forward(be_, xn, T, gate);
    L.up.forward(be_, xn, T, up);
    be_.silu_mul(gate, up, T, im, gate);
    L.down.forward(be_, gate, T, proj);
    all_reduce(proj, T * h);
    be_.add(x, proj, T * h);
  }
}

void Qwen2Model::logits(const BatchInput& batch, const float* hidden, float* host_logits) {
  const int64_t R = int64_t(batch.logit_rows.size());
  const int64_t h = cfg_.hidden_size, V = cfg_.vocab_size;
  if (R == 0) return;
  float* rows = scratch(kRows, R * h);
  be_.gather_rows(hidden, batch.logit_rows.data(), R, h, rows);
  be_.rmsnorm(rows, R, w_.final_norm.view(), float(cfg_.rms_norm_eps), rows);

  const int64_t local = plan_.vocab.size();
  if (tp_.size() == 1) {
    float* out = scratch(kLogits, R * local);
    be_.matmul(rows, R, w_.head().view(), nullptr, out);
    be_.copy_to_host(host_logits, out, size_t(R * V) * sizeof(float));
    return;
  }
  // Vocab slices may be uneven (the first ranks hold a split unit more): gather equal-sized,
  // padded blocks [tp][R][per_rank] and reassemble [R][V] on the host.
  const int64_t per_rank = plan_.max_vocab_rows(cfg_);
  float* out = scratch(kLogits, R * per_rank);
  be_.matmul(rows, R, w_.head().view(), nullptr, out);
  if (local < per_rank) {
    // Pad each row of [R][local] to per_rank floats so every rank sends the same amount.
    std::vector<float> tmp(size_t(R * local));
    be_.copy_to_host(tmp.data(), out, tmp.size() * sizeof(float));
    std::vector<float> padded(size_t(R * per_rank), 0.0f);
    for (int64_t r = 0; r < R; ++r)
      std::memcpy(&padded[size_t(r * per_rank)], &tmp[size_t(r * local)], size_t(local) * 4);
    be_.copy_to_device(out, padded.data(), padded.size() * sizeof(float));
  }
  float* gathered = scratch(kGathered, R * per_rank * tp_.size());
  tp_.all_gather(out, gathered, size_t(R * per_rank) * sizeof(float));
  std::vector<float> all(size_t(R * per_rank * tp_.size()));
  be_.copy_to_host(all.data(), gathered, all.size() * sizeof(float));
  for (int t = 0; t < tp_.size(); ++t) {
    const Range rows_of_t = plan_.vocab_of(cfg_, t);
    for (int64_t r = 0; r < R; ++r)
      std::memcpy(host_logits + r * V + rows_of_t.begin, &all[size_t((t * R + r) * per_rank)],
                  size_t(rows_of_t.size()) * sizeof(float));
  }
}

}  // namespace qmpi
