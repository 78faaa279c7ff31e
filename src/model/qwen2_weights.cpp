#include "model/qwen2_weights.h"

#include <string>

#include "model/weight_loader.h"

namespace qmpi {

Qwen2Weights load_qwen2_weights(const ModelConfig& cfg, const ShardPlan& plan, WeightSource& source,
                                Backend& backend) {
  WeightLoader ld(cfg, plan, source, backend);
  Qwen2Weights w;
  const int64_t h = cfg.hidden_size, q = cfg.q_width(), kv = cfg.kv_width(),
                im = cfg.intermediate_size, V = cfg.vocab_size;
  if (plan.first_stage) w.embedding = ld.load("model.embed_tokens.weight", {V, h});
  for (int64_t i = plan.layers.begin; i < plan.layers.end; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    Qwen2LayerWeights L;
    L.input_norm = ld.load(p + "input_layernorm.weight", {h});
    L.q = ld.load_linear(p + "self_attn.q_proj", q, h, cfg.qkv_bias);
    L.k = ld.load_linear(p + "self_attn.k_proj", kv, h, cfg.qkv_bias);
    L.v = ld.load_linear(p + "self_attn.v_proj", kv, h, cfg.qkv_bias);
    L.o = ld.load_linear(p + "self_attn.o_proj", h, q);
    L.post_norm = ld.load(p + "post_attention_layernorm.weight", {h});
    L.gate = ld.load_linear(p + "mlp.gate_proj", im, h);
    L.up = ld.load_linear(p + "mlp.up_proj", im, h);
    L.down = ld.load_linear(p + "mlp.down_proj", h, im);
    w.layers.push_back(std::move(L));
  }
  if (plan.last_stage) {
    w.final_norm = ld.load("model.norm.weight", {h});
    // Tied checkpoints usually omit lm_head.weight; some still carry a copy. Either way the
    // tied model's head is the embedding matrix, held once when this rank also embeds.
    if (cfg.tie_word_embeddings && !plan.first_stage)
      w.lm_head = ld.load("model.embed_tokens.weight", {V, h});
    else if (!cfg.tie_word_embeddings)
      w.lm_head = ld.load("lm_head.weight", {V, h});
  }
  w.bytes = ld.bytes();
  return w;
}

}  // namespace qmpi
