// Which slice of every tensor a rank owns, as a pure function of (config, layout, rank).
//
// Column-parallel (split output rows, dim 0): q/k/v_proj weights and biases, gate/up_proj.
// Row-parallel (split input columns, dim 1, all-reduce after): o_proj, down_proj.
// Vocab-parallel (rows, dim 0): embed_tokens and lm_head; the vocab may split unevenly
// (ceil(V / tp) rows per rank, the last rank fewer), since vocab sizes are rarely divisible by 3.
// Replicated: norms. Pipeline stages own contiguous layer ranges.
//
// Heads are described per rank as ranges, so an uneven head split (TP 6 over 8 KV heads, later)
// only changes how the ranges are computed, not their users.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/weight_source.h"
#include "model/config.h"
#include "parallel/layout.h"

namespace qmpi {

struct ShardPlan {
  int tp = 1, tp_rank = 0, pp = 1, stage = 0;
  Range layers;        // [begin, end) of decoder layers this stage runs
  Range q_heads;       // query heads of this TP rank
  Range kv_heads;      // KV heads of this TP rank
  Range intermediate;  // MLP columns of this TP rank
  Range vocab;         // embedding / lm_head rows of this TP rank
  bool first_stage = true;
  bool last_stage = true;

  // The slice of `tensor` (Hugging Face name) this rank loads, or nullopt if it does not own it
  // (a layer of another stage, or the embedding off the first stage...). lm_head on tied
  // models is served by model.embed_tokens.weight on the last stage.
  std::optional<Slice> slice_for(const ModelConfig& cfg, const std::string& tensor) const;
};

// Layers per stage: even, with the remainder spread over the first stages, or `override`.
// Throws Error(PipelineLayers) when a stage would get no layer or the override is wrong.
std::vector<int> split_layers(int num_layers, int pp, const std::vector<int>& override_counts);

// Throws the catalogue error (with its reason and a suggested layout) if `layout` cannot run
// `cfg`: head / KV-head / intermediate divisibility, stages vs layers.
void check_layout(const ModelConfig& cfg, const Layout& layout);

// Every (tp, pp) with tp * pp == ranks that check_layout accepts (no --pp-layers), largest tp
// first: the suggestions in layout errors, and the planner's candidates.
std::vector<Layout> valid_layouts(const ModelConfig& cfg, int ranks);

// world_rank = stage * tp + tp_rank (pp-major, TP groups contiguous so they stay on one host).
ShardPlan make_shard_plan(const ModelConfig& cfg, const Layout& layout, int world_rank);

// What the mesh needs to know of `cfg` (see parallel/layout.h).
ModelFit model_fit(const ModelConfig& cfg);

}  // namespace qmpi
