// The weights one rank holds for a Qwen decoder (any supported family): only its stage's
// layers, only its TP slices, only its experts.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "io/weight_source.h"
#include "model/attention_block.h"
#include "model/config.h"
#include "model/ggml_weight.h"
#include "model/moe_block.h"
#include "model/shard_plan.h"
#include "model/swiglu_mlp.h"

namespace qmpi {

struct LayerWeights {
  Weight input_norm, post_norm;
  AttentionWeights attn;
  MlpWeights mlp;                 // dense layers
  std::optional<MoeWeights> moe;  // sparse layers (ModelConfig::is_moe_layer)
};

struct DecoderWeights {
  Weight embedding;                  // vocab slice, first stage only
  GgmlWeight embedding_blocks;       // GGUF: the embedding's vocab slice in its blocks, instead
                                     // of embedding
  std::vector<LayerWeights> layers;  // this stage's layers, in order
  Weight final_norm;                 // last stage only
  Weight lm_head;             // vocab slice, last stage only (embed_tokens rows on tied models),
                              // empty when tied and this rank holds the embedding: head() shares it
  GgmlWeight lm_head_blocks;  // GGUF: the head's vocab slice in its blocks, instead of lm_head;
                              // empty when tied and this rank holds embedding_blocks
  uint64_t bytes = 0;         // weight bytes this rank holds
  // How many --lora-modules adapters are loaded onto the projections (Linear::lora).
  int lora_adapters = 0;

  const Weight& head() const { return lm_head ? lm_head : embedding; }
  // The head's blocks, if it is held in blocks (its own, or the tied embedding's).
  const GgmlWeight& head_blocks() const {
    if (lm_head_blocks || lm_head) return lm_head_blocks;
    return embedding_blocks;
  }
  // out[n, hidden] = the embedding rows of ids (zeros outside this rank's vocab slice).
  void embed(Backend& be, const int32_t* ids, int64_t n, int64_t row_offset, float* out) const;
  // out[n, vocab slice] = x[n, hidden] . head^T, whichever form the head is held in.
  void head_matmul(Backend& be, const GemmInput& x, int64_t n, float* out) const;
  // The dtype head_matmul's GEMM reads x in (Linear::input_dtype).
  DType head_input_dtype(const Backend& be) const {
    return head_blocks() ? DType::F32 : be.gemm_input_dtype(head().dtype);
  }
};

// Reads exactly this rank's slices from `source` into backend memory, checking every tensor's
// presence, dtype and shape against the config (catalogue errors name the tensor).
DecoderWeights load_decoder_weights(const ModelConfig& cfg, const ShardPlan& plan,
                                    WeightSource& source, Backend& backend);

}  // namespace qmpi
