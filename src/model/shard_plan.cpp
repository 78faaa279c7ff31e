#include "model/shard_plan.h"

#include <numeric>
#include <string_view>

#include "core/errors.h"

namespace qmpi {
namespace {

std::string join_counts(const std::vector<int>& counts) {
  std::string s;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(counts[i]);
  }
  return s;
}

// Why `tp` cannot run `cfg`, or an empty string when it can. A rank without a query head would
// have nothing to attend with. The KV heads follow the query heads, and MLP columns and vocab
// rows outnumber the heads of every real config (make_shard_plan checks them anyway).
std::string tp_problem(const ModelConfig& cfg, int tp) {
  if (tp <= cfg.num_heads) return {};
  return "--tp " + std::to_string(tp) + " is larger than num_attention_heads (" +
         std::to_string(cfg.num_heads) + "), so some tensor-parallel rank would get no query head";
}

// The fix sentence for a layout that failed on `ranks` ranks: the best layout of the same rank
// count, or why none exists.
std::string suggest_layout(const ModelConfig& cfg, int ranks) {
  std::vector<Layout> ok = valid_layouts(cfg, ranks);
  if (ok.empty())
    return "No --tp x --pp layout of " + std::to_string(ranks) +
           " ranks runs this model: --tp may not exceed num_attention_heads (" +
           std::to_string(cfg.num_heads) + ") and --pp may not exceed num_hidden_layers (" +
           std::to_string(cfg.num_layers) + "); launch another number of ranks.";
  std::string fix =
      "Use " + layout_flags(ok[0]) + " for the same " + std::to_string(ranks) + " ranks";
  if (ok.size() > 1) {
    fix += " (also valid: ";
    for (size_t i = 1; i < ok.size(); ++i) {
      if (i > 1) fix += ", ";
      fix += layout_flags(ok[i]);
    }
    fix += ")";
  }
  return fix + ".";
}

Slice rows(const Range& r, int64_t width) {
  return Slice{0, r.begin * width, r.size() * width};
}
Slice cols(const Range& r, int64_t width) {
  return Slice{1, r.begin * width, r.size() * width};
}

// Parses "model.layers.<i>.<rest>"; returns false for any other name.
bool parse_layer_name(std::string_view name, int64_t& layer, std::string_view& rest) {
  constexpr std::string_view kPrefix = "model.layers.";
  if (!name.starts_with(kPrefix)) return false;
  name.remove_prefix(kPrefix.size());
  size_t digits = 0;
  layer = 0;
  while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9')
    layer = layer * 10 + (name[digits++] - '0');
  if (digits == 0 || digits >= name.size() || name[digits] != '.') return false;
  rest = name.substr(digits + 1);
  return true;
}

}  // namespace

std::vector<int> split_layers(int num_layers, int pp, const std::vector<int>& override_counts) {
  if (pp < 1) raise(Err::Usage, "--pp must be at least 1 (got " + std::to_string(pp) + ")");
  if (!override_counts.empty()) {
    if (int(override_counts.size()) != pp)
      raise(Err::PipelineLayers,
            "--pp-layers " + join_counts(override_counts) + " lists " +
                std::to_string(override_counts.size()) + " stages but --pp is " +
                std::to_string(pp),
            "Give one layer count per stage, or drop --pp-layers for the even split.");
    for (size_t s = 0; s < override_counts.size(); ++s)
      if (override_counts[s] < 1)
        raise(Err::PipelineLayers, "--pp-layers " + join_counts(override_counts) + " gives stage " +
                                       std::to_string(s) + " " +
                                       std::to_string(override_counts[s]) +
                                       " layers, but every stage needs at least one");
    int sum = std::accumulate(override_counts.begin(), override_counts.end(), 0);
    if (sum != num_layers)
      raise(Err::PipelineLayers,
            "--pp-layers " + join_counts(override_counts) + " adds up to " + std::to_string(sum) +
                " layers but the model has " + std::to_string(num_layers) + " (num_hidden_layers)",
            num_layers >= pp ? "Use counts that add up to " + std::to_string(num_layers) +
                                   ", e.g. the even split --pp-layers " +
                                   join_counts(split_layers(num_layers, pp, {}))
                             : std::string());
    return override_counts;
  }
  if (pp > num_layers)
    raise(Err::PipelineLayers,
          "--pp " + std::to_string(pp) + " makes more pipeline stages than the model's " +
              std::to_string(num_layers) + " layers (num_hidden_layers), so a stage would run none",
          "Use --pp " + std::to_string(num_layers) + " or fewer.");
  std::vector<int> counts(pp, num_layers / pp);
  for (int s = 0; s < num_layers % pp; ++s) ++counts[s];
  return counts;
}

std::vector<Layout> valid_layouts(const ModelConfig& cfg, int ranks) {
  std::vector<Layout> out;
  for (int tp = ranks; tp >= 1; --tp) {
    if (ranks % tp != 0) continue;
    int pp = ranks / tp;
    if (tp_problem(cfg, tp).empty() && pp <= cfg.num_layers) out.push_back(Layout{tp, pp, {}});
  }
  return out;
}

void check_layout(const ModelConfig& cfg, const Layout& layout) {
  if (layout.tp < 1)
    raise(Err::Usage, "--tp must be at least 1 (got " + std::to_string(layout.tp) + ")");
  if (layout.pp < 1)
    raise(Err::Usage, "--pp must be at least 1 (got " + std::to_string(layout.pp) + ")");
  const int ranks = layout.tp * layout.pp;
  const std::string problem = tp_problem(cfg, layout.tp);
  if (!problem.empty()) raise(Err::TpExceedsHeads, problem, suggest_layout(cfg, ranks));
  if (layout.pp > cfg.num_layers)
    raise(Err::PipelineLayers,
          "--pp " + std::to_string(layout.pp) + " makes more pipeline stages than the model's " +
              std::to_string(cfg.num_layers) +
              " layers (num_hidden_layers), so a stage would run none",
          suggest_layout(cfg, ranks));
  split_layers(int(cfg.num_layers), layout.pp, layout.pp_layers);
}

Range split_range(int64_t n, int parts, int index, int64_t unit) {
  const int64_t units = (n + unit - 1) / unit;
  const int64_t per = units / parts, extra = units % parts;
  const int64_t first = index * per + std::min<int64_t>(index, extra);
  const int64_t count = per + (index < extra ? 1 : 0);
  return Range{std::min(n, first * unit), std::min(n, (first + count) * unit)};
}

ShardPlan make_shard_plan(const ModelConfig& cfg, const Layout& layout, int world_rank,
                          int64_t split_unit) {
  check_layout(cfg, layout);
  const int ranks = layout.tp * layout.pp;
  if (world_rank < 0 || world_rank >= ranks)
    raise(Err::Internal, "shard plan asked for world rank " + std::to_string(world_rank) +
                             " of a " + std::to_string(ranks) + "-rank layout");
  if (split_unit < 1)
    raise(Err::Internal, "shard plan asked for split unit " + std::to_string(split_unit));
  // int4 checkpoints: MLP columns in whole groups (whole int32 words too), so gate/up split on
  // packed output columns and down_proj on whole groups of input rows.
  split_unit = std::lcm(split_unit, cfg.quant.split_unit());
  ShardPlan p;
  p.tp = layout.tp;
  p.pp = layout.pp;
  p.split_unit = split_unit;
  p.stage = world_rank / layout.tp;
  p.tp_rank = world_rank % layout.tp;
  p.first_stage = p.stage == 0;
  p.last_stage = p.stage == layout.pp - 1;

  std::vector<int> counts = split_layers(int(cfg.num_layers), layout.pp, layout.pp_layers);
  p.layers.begin = std::accumulate(counts.begin(), counts.begin() + p.stage, int64_t{0});
  p.layers.end = p.layers.begin + counts[p.stage];

  p.q_heads = split_range(cfg.num_heads, layout.tp, p.tp_rank, 1);
  const int64_t group = cfg.num_heads / cfg.num_kv_heads;  // config.cpp checks it divides
  p.kv_heads = Range{p.q_heads.begin / group, (p.q_heads.end - 1) / group + 1};
  for (int64_t h = p.q_heads.begin; h < p.q_heads.end; ++h)
    p.kv_head_of_q.push_back(int32_t(h / group - p.kv_heads.begin));
  p.intermediate = split_range(cfg.intermediate_size, layout.tp, p.tp_rank, split_unit);
  p.vocab = p.vocab_of(cfg, p.tp_rank);
  p.experts = split_range(cfg.moe.num_experts, layout.tp, p.tp_rank, 1);
  p.shared_intermediate =
      split_range(cfg.moe.shared_intermediate_size, layout.tp, p.tp_rank, split_unit);
  if (p.intermediate.size() == 0 || p.vocab.size() == 0)
    raise(Err::Internal,
          "--tp " + std::to_string(layout.tp) + " leaves TP rank " + std::to_string(p.tp_rank) +
              " no MLP column or vocab row (split unit " + std::to_string(split_unit) + ")");
  return p;
}

Range ShardPlan::vocab_of(const ModelConfig& cfg, int rank) const {
  return split_range(cfg.vocab_size, tp, rank, split_unit);
}

int64_t ShardPlan::max_vocab_rows(const ModelConfig& cfg) const {
  return vocab_of(cfg, 0).size();  // the first ranks take the extra units
}

// `rest` is a sparse block's tensor name after "mlp." (facts §2d).
std::optional<Slice> ShardPlan::moe_slice(std::string_view rest) const {
  if (rest == "gate.weight" || rest == "shared_expert_gate.weight") return Slice::whole();
  if (rest == "shared_expert.gate_proj.weight" || rest == "shared_expert.up_proj.weight")
    return rows(shared_intermediate, 1);
  if (rest == "shared_expert.down_proj.weight") return cols(shared_intermediate, 1);
  constexpr std::string_view kExperts = "experts.";
  if (!rest.starts_with(kExperts)) return std::nullopt;
  rest.remove_prefix(kExperts.size());
  int64_t expert = 0;
  size_t digits = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9')
    expert = expert * 10 + (rest[digits++] - '0');
  if (digits == 0 || expert < experts.begin || expert >= experts.end) return std::nullopt;
  rest.remove_prefix(digits);
  if (rest == ".gate_proj.weight" || rest == ".up_proj.weight" || rest == ".down_proj.weight")
    return Slice::whole();
  return std::nullopt;
}

std::optional<Slice> ShardPlan::slice_for(const ModelConfig& cfg, const std::string& tensor) const {
  if (tensor == "model.embed_tokens.weight") {
    if (first_stage || (last_stage && cfg.tie_word_embeddings)) return rows(vocab, 1);
    return std::nullopt;
  }
  if (tensor == "lm_head.weight") {
    if (last_stage && !cfg.tie_word_embeddings) return rows(vocab, 1);
    return std::nullopt;
  }
  if (tensor == "model.norm.weight") {
    if (last_stage) return Slice::whole();
    return std::nullopt;
  }
  int64_t layer = 0;
  std::string_view rest;
  if (!parse_layer_name(tensor, layer, rest) || layer < layers.begin || layer >= layers.end)
    return std::nullopt;

  const int64_t hd = cfg.head_dim;
  if (rest == "input_layernorm.weight" || rest == "post_attention_layernorm.weight" ||
      rest == "self_attn.q_norm.weight" || rest == "self_attn.k_norm.weight")
    return Slice::whole();
  if (rest == "self_attn.q_proj.weight" || rest == "self_attn.q_proj.bias")
    return rows(q_heads, hd);
  if (rest == "self_attn.k_proj.weight" || rest == "self_attn.k_proj.bias" ||
      rest == "self_attn.v_proj.weight" || rest == "self_attn.v_proj.bias")
    return rows(kv_heads, hd);
  if (rest == "self_attn.o_proj.weight") return cols(q_heads, hd);
  if (rest == "mlp.gate_proj.weight" || rest == "mlp.up_proj.weight") return rows(intermediate, 1);
  if (rest == "mlp.down_proj.weight") return cols(intermediate, 1);
  if (rest.starts_with("mlp.")) return moe_slice(rest.substr(4));
  return std::nullopt;
}

ModelFit model_fit(const ModelConfig& cfg) {
  ModelFit fit;
  fit.check_layout = [cfg](const Layout& l) { check_layout(cfg, l); };
  fit.valid_layouts = [cfg](int ranks) { return valid_layouts(cfg, ranks); };
  fit.stage_layers = [layers = cfg.num_layers](const Layout& l) {
    std::vector<Range> out;
    int64_t begin = 0;
    for (int n : split_layers(int(layers), l.pp, l.pp_layers)) {
      out.push_back(Range{begin, begin + n});
      begin += n;
    }
    return out;
  };
  return fit;
}

}  // namespace qmpi
