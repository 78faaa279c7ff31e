// The weights one rank holds for a Qwen2 model: only its stage's layers, only its TP slices.
#pragma once
#include <vector>

#include "backend/backend.h"
#include "io/weight_source.h"
#include "model/config.h"
#include "model/linear.h"
#include "model/shard_plan.h"

namespace qmpi {

struct Qwen2LayerWeights {
  Weight input_norm, post_norm;
  Linear q, k, v;   // column-parallel slices (this rank's heads), biased on Qwen2
  Linear o;         // row-parallel slice
  Linear gate, up;  // column-parallel slices
  Linear down;      // row-parallel slice
};

struct Qwen2Weights {
  Weight embedding;                       // vocab slice, first stage only
  std::vector<Qwen2LayerWeights> layers;  // this stage's layers, in order
  Weight final_norm;                      // last stage only
  Weight lm_head;      // vocab slice, last stage only (embed_tokens rows on tied models),
                       // empty when tied and this rank holds the embedding: head() shares it
  uint64_t bytes = 0;  // weight bytes this rank holds

  const Weight& head() const { return lm_head ? lm_head : embedding; }
};

// Reads exactly this rank's slices from `source` into backend memory, checking every tensor's
// presence, dtype and shape against the config (catalogue errors name the tensor).
Qwen2Weights load_qwen2_weights(const ModelConfig& cfg, const ShardPlan& plan, WeightSource& source,
                                Backend& backend);

}  // namespace qmpi
