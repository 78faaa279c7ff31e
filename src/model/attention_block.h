// Self-attention of one decoder layer over the paged KV cache (facts §2a steps 3-8, §2b):
// q/k/v projections of this rank's heads (biased on Qwen2), Qwen3's RMSNorm of every q and k
// head over head_dim, rotate-half RoPE, the K/V write, GQA attention and this rank's part of
// o_proj. The output is a partial sum for the TP all-reduce; the layer norm before it and the
// residual add after it belong to the decoder.
#pragma once
#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "model/batch.h"
#include "model/config.h"
#include "model/linear.h"
#include "model/lora_delta.h"
#include "model/rope_scaling.h"
#include "model/scratch.h"
#include "model/shard_plan.h"
#include "model/tensor_dump.h"
#include "model/weight_loader.h"

namespace qmpi {

struct AttentionWeights {
  Linear q, k, v;         // column-parallel: this rank's heads
  Linear o;               // row-parallel: the matching input columns
  Weight q_norm, k_norm;  // [head_dim], shared by all heads; empty without qk_norm
};

// Loads `prefix` ("model.layers.3.self_attn") as the config describes it.
AttentionWeights load_attention(WeightLoader& ld, const ModelConfig& cfg,
                                const std::string& prefix);

class AttentionBlock {
 public:
  AttentionBlock(const ModelConfig& cfg, const ShardPlan& plan, Backend& be);

  // out[T, hidden] = this rank's o_proj(attention(x)) for the normed x[T, hidden]; writes the
  // batch's K/V into kv.
  void forward(const AttentionWeights& w, const BatchInput& batch, const GemmInput& x,
               const KvLayerView& kv, float* out, const TensorDump& dump, int64_t layer);

 private:
  enum { kQ, kK, kV, kAttn, kSlots };
  const ModelConfig& cfg_;
  const ShardPlan& plan_;
  Backend& be_;
  RotaryFrequencies rope_;
  Scratch scratch_;
  LoraDelta lora_;
};

}  // namespace qmpi
