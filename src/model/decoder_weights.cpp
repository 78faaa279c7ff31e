#include "model/decoder_weights.h"

#include <string>

#include <fmt/format.h>

#include "model/load_progress.h"
#include "model/weight_loader.h"

namespace qmpi {

DecoderWeights load_decoder_weights(const ModelConfig& cfg, const ShardPlan& plan,
                                    WeightSource& source, Backend& backend) {
  WeightLoader ld(cfg, plan, source, backend);
  DecoderWeights w;
  const int64_t h = cfg.hidden_size, V = cfg.vocab_size;
  if (plan.first_stage) {
    // A GGUF embedding in blocks stays in them: look-ups decode their rows (Backend::
    // embedding_ggml), so a Q4_0 72B's 152k x 8192 table is 0.7 GB, not 5 GB of float32.
    w.embedding_blocks = ld.load_blocks("model.embed_tokens.weight", {V, h});
    if (!w.embedding_blocks) w.embedding = ld.load("model.embed_tokens.weight", {V, h});
  }
  LoadProgress progress(fmt::format("stage {} tp {}", plan.stage, plan.tp_rank),
                        plan.layers.end - plan.layers.begin, std::chrono::seconds(5));
  for (int64_t i = plan.layers.begin; i < plan.layers.end; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerWeights L;
    L.input_norm = ld.load(p + "input_layernorm.weight", {h});
    L.attn = load_attention(ld, cfg, p + "self_attn");
    L.post_norm = ld.load(p + "post_attention_layernorm.weight", {h});
    if (cfg.is_moe_layer(i))
      L.moe = load_moe(ld, cfg, plan, p + "mlp");
    else
      L.mlp = load_mlp(ld, p + "mlp", cfg.intermediate_size, h);
    w.layers.push_back(std::move(L));
    progress.layer_done(i + 1 - plan.layers.begin, ld.bytes());
  }
  if (plan.last_stage) {
    w.final_norm = ld.load("model.norm.weight", {h});
    // Tied checkpoints usually omit lm_head.weight; some still carry a copy. Either way the
    // tied model's head is the embedding matrix (in its blocks for GGUF), held once when this
    // rank also embeds.
    auto load_head = [&](const std::string& name) {
      w.lm_head_blocks = ld.load_blocks(name, {V, h});
      if (!w.lm_head_blocks) w.lm_head = ld.load(name, {V, h});
    };
    if (cfg.tie_word_embeddings && !plan.first_stage)
      load_head("model.embed_tokens.weight");
    else if (!cfg.tie_word_embeddings)
      load_head("lm_head.weight");
  }
  w.bytes = ld.bytes();
  return w;
}

void DecoderWeights::embed(Backend& be, const int32_t* ids, int64_t n, int64_t row_offset,
                           float* out) const {
  if (embedding_blocks)
    be.embedding_ggml(ids, n, embedding_blocks.view(), row_offset, out);
  else
    be.embedding(ids, n, embedding.view(), row_offset, out);
}

void DecoderWeights::head_matmul(Backend& be, const GemmInput& x, int64_t n, float* out) const {
  if (const GgmlWeight& blocks = head_blocks())
    be.matmul_ggml(x.x, n, blocks.view(), nullptr, out);
  else
    be.matmul(x, n, head().view(), nullptr, out);
}

}  // namespace qmpi
