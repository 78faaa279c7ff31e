// Which slice of every tensor a rank owns, as a pure function of (config, layout, rank).
//
// Column-parallel (split output rows, dim 0): q/k/v_proj weights and biases, gate/up_proj.
// Row-parallel (split input columns, dim 1, all-reduce after): o_proj, down_proj.
// Vocab-parallel (rows, dim 0): embed_tokens and lm_head.
// Replicated: norms, q/k norms, MoE routers and the shared-expert gate.
// Expert-parallel (MoE): each TP rank holds whole experts, a contiguous range of them as even
// as possible (128 on 6 ranks: 22,22,21,21,21,21); the shared expert is split like the dense
// MLP. Pipeline stages own contiguous layer ranges.
//
// Any TP size up to num_attention_heads works, divisible or not:
// - query heads are spread as evenly as possible (64 on 6 ranks: 11,11,11,11,10,10);
// - a rank owns the KV heads its query heads read (GQA group = heads / kv_heads), so a KV head
//   whose group straddles two ranks is held, and its k/v projected, by both (64 q / 8 KV heads
//   on TP 6: 13 KV-head copies instead of 8);
// - MLP columns and vocab rows are cut as evenly as possible in multiples of a split unit (1 for
//   dense weights; a packed or quantized checkpoint passes its packing or group width). This
//   file is the one place that knows the unit: users take the ranges from the plan.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/weight_source.h"
#include "model/config.h"
#include "parallel/layout.h"

namespace qmpi {

// MLP columns and vocab rows are cut on multiples of this for dense (unpacked) weights.
inline constexpr int64_t kDenseSplitUnit = 1;

// Part `index` of `parts` as-even-as-possible ranges of [0, n), cut on multiples of `unit`: the
// first n/unit % parts parts get one unit more, and a last, partial unit (unit not dividing n)
// ends the last part.
Range split_range(int64_t n, int parts, int index, int64_t unit);

struct ShardPlan {
  int tp = 1, tp_rank = 0, pp = 1, stage = 0;
  int64_t split_unit = kDenseSplitUnit;
  Range layers;        // [begin, end) of decoder layers this stage runs
  Range q_heads;       // query heads of this TP rank
  Range kv_heads;      // KV heads those query heads read (a neighbour may hold one of them too)
  Range intermediate;  // MLP columns of this TP rank
  Range vocab;         // embedding / lm_head rows of this TP rank
  Range experts;       // MoE: the whole experts of this TP rank (may be empty when tp > experts)
  Range shared_intermediate;  // MoE: the shared expert's columns of this TP rank
  // [q_heads.size()]: the local KV head (index into kv_heads) each local query head reads.
  std::vector<int32_t> kv_head_of_q;
  bool first_stage = true;
  bool last_stage = true;

  // The vocab rows of TP rank `rank` of this plan's stage (the logits gather reassembles them).
  Range vocab_of(const ModelConfig& cfg, int rank) const;
  // The most vocab rows any TP rank holds (the gather's block size).
  int64_t max_vocab_rows(const ModelConfig& cfg) const;

  // The slice of `tensor` (Hugging Face name) this rank loads, or nullopt if it does not own it
  // (a layer of another stage, or the embedding off the first stage...). lm_head on tied
  // models is served by model.embed_tokens.weight on the last stage.
  std::optional<Slice> slice_for(const ModelConfig& cfg, const std::string& tensor) const;

 private:
  std::optional<Slice> moe_slice(std::string_view rest_after_mlp) const;
};

// Layers per stage: even, with the remainder spread over the first stages, or `override`.
// Throws Error(PipelineLayers) when a stage would get no layer or the override is wrong.
std::vector<int> split_layers(int num_layers, int pp, const std::vector<int>& override_counts);

// Throws the catalogue error (with its reason and a suggested layout) if `layout` cannot run
// `cfg`: more TP ranks than query heads, more stages than layers.
void check_layout(const ModelConfig& cfg, const Layout& layout);

// Every (tp, pp) with tp * pp == ranks that check_layout accepts (no --pp-layers), largest tp
// first: the suggestions in layout errors, and the planner's candidates.
std::vector<Layout> valid_layouts(const ModelConfig& cfg, int ranks);

// world_rank = stage * tp + tp_rank (pp-major, TP groups contiguous so they stay on one host).
// `split_unit`: see kDenseSplitUnit; an int4 config raises it to whole groups
// (QuantConfig::split_unit).
ShardPlan make_shard_plan(const ModelConfig& cfg, const Layout& layout, int world_rank,
                          int64_t split_unit = kDenseSplitUnit);

// What the mesh needs to know of `cfg` (see parallel/layout.h).
ModelFit model_fit(const ModelConfig& cfg);

}  // namespace qmpi
