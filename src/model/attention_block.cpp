#include "model/attention_block.h"

#include <cmath>

namespace qmpi {

AttentionWeights load_attention(WeightLoader& ld, const ModelConfig& cfg,
                                const std::string& prefix) {
  const int64_t h = cfg.hidden_size, q = cfg.q_width(), kv = cfg.kv_width();
  AttentionWeights w;
  w.q = ld.load_linear(prefix + ".q_proj", q, h, cfg.qkv_bias);
  w.k = ld.load_linear(prefix + ".k_proj", kv, h, cfg.qkv_bias);
  w.v = ld.load_linear(prefix + ".v_proj", kv, h, cfg.qkv_bias);
  w.o = ld.load_linear(prefix + ".o_proj", h, q);
  if (cfg.qk_norm) {
    w.q_norm = ld.load(prefix + ".q_norm.weight", {cfg.head_dim});
    w.k_norm = ld.load(prefix + ".k_norm.weight", {cfg.head_dim});
  }
  return w;
}

AttentionBlock::AttentionBlock(const ModelConfig& cfg, const ShardPlan& plan, Backend& be)
    : cfg_(cfg), plan_(plan), be_(be), rope_(cfg), scratch_(be, kSlots), lora_(be) {}

void AttentionBlock::forward(const AttentionWeights& w, const BatchInput& batch, const GemmInput& x,
                             const KvLayerView& kv, float* out, const TensorDump& dump,
                             int64_t layer) {
  const int64_t T = batch.num_tokens(), d = cfg_.head_dim;
  const int32_t nq = int32_t(plan_.q_heads.size()), nkv = int32_t(plan_.kv_heads.size());
  const float eps = float(cfg_.rms_norm_eps);
  float* q = scratch_.get(kQ, size_t(T * nq * d));
  float* k = scratch_.get(kK, size_t(T * nkv * d));
  float* v = scratch_.get(kV, size_t(T * nkv * d));
  float* attn = scratch_.get(kAttn, size_t(T * nq * d));

  const LinearOut qkv[] = {{&w.q, q}, {&w.k, k}, {&w.v, v}};
  forward_group(be_, x, T, qkv);
  lora_.add(qkv, x.x, T, batch.lora);
  if (w.q_norm) {
    // [T, heads, d] is [T * heads] rows of d: the row norm is the per-head norm.
    be_.rmsnorm(q, T * nq, w.q_norm.view(), eps, q, {});
    be_.rmsnorm(k, T * nkv, w.k_norm.view(), eps, k, {});
  }
  const RopeFreqs freqs = rope_.of(batch);
  be_.rope(q, T, nq, batch.positions.data(), freqs);
  be_.rope(k, T, nkv, batch.positions.data(), freqs);
  dump(be_, layer, "q", q, T, nq * d);
  dump(be_, layer, "k", k, T, nkv * d);
  dump(be_, layer, "v", v, T, nkv * d);
  be_.kv_store(k, v, T, batch.slots.data(), kv);

  AttentionBatch ab;
  ab.seqs = batch.seqs.data();
  ab.num_seqs = int32_t(batch.seqs.size());
  ab.block_tables = batch.block_tables.data();
  ab.num_heads = nq;
  ab.num_kv_heads = nkv;
  ab.head_dim = int32_t(d);
  ab.scale = float(1.0 / std::sqrt(double(d)));
  ab.kv_head_of = plan_.kv_head_of_q.data();
  be_.attention(q, ab, kv, attn);
  dump(be_, layer, "attn", attn, T, nq * d);
  w.o.forward(be_, attn, T, out);
  const LinearOut o_proj[] = {{&w.o, out}};
  lora_.add(o_proj, attn, T, batch.lora);
}

}  // namespace qmpi
