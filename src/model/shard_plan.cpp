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

// The first tensor-parallel rule `tp` breaks, as (code, sentence), or code Internal when none.
// KV heads come first: they are the scarcest (8 on 72B), so their rule is the one users meet.
struct Problem {
  Err code = Err::Internal;
  std::string message;
};

Problem tp_problem(const ModelConfig& cfg, int tp) {
  auto describe = [tp](const char* key, int64_t n, const char* what) {
    return std::string(key) + " (" + std::to_string(n) + ") is not divisible by --tp " +
           std::to_string(tp) + ", so " + std::to_string(tp) +
           " tensor-parallel ranks cannot each own an equal number of whole " + what;
  };
  if (cfg.num_kv_heads % tp != 0)
    return {Err::KvHeadsNotDivisible,
            describe("num_key_value_heads", cfg.num_kv_heads, "KV heads")};
  if (cfg.num_heads % tp != 0)
    return {Err::HeadsNotDivisible, describe("num_attention_heads", cfg.num_heads, "query heads")};
  if (cfg.intermediate_size % tp != 0)
    return {Err::IntermediateNotDivisible,
            describe("intermediate_size", cfg.intermediate_size, "MLP columns")};
  return {};
}

// The fix sentence for a layout that failed on `ranks` ranks: the best layout of the same rank
// count, or why none exists.
std::string suggest_layout(const ModelConfig& cfg, int ranks) {
  std::vector<Layout> ok = valid_layouts(cfg, ranks);
  if (ok.empty())
    return "No --tp x --pp layout of " + std::to_string(ranks) +
           " ranks runs this model: --tp must divide num_key_value_heads (" +
           std::to_string(cfg.num_kv_heads) + "), num_attention_heads (" +
           std::to_string(cfg.num_heads) + ") and intermediate_size (" +
           std::to_string(cfg.intermediate_size) +
           "), and --pp may not exceed num_hidden_layers (" + std::to_string(cfg.num_layers) +
           "); launch another number of ranks.";
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
    if (tp_problem(cfg, tp).code == Err::Internal && pp <= cfg.num_layers)
      out.push_back(Layout{tp, pp, {}});
  }
  return out;
}

void check_layout(const ModelConfig& cfg, const Layout& layout) {
  if (layout.tp < 1)
    raise(Err::Usage, "--tp must be at least 1 (got " + std::to_string(layout.tp) + ")");
  if (layout.pp < 1)
    raise(Err::Usage, "--pp must be at least 1 (got " + std::to_string(layout.pp) + ")");
  const int ranks = layout.tp * layout.pp;
  Problem p = tp_problem(cfg, layout.tp);
  if (p.code != Err::Internal) raise(p.code, p.message, suggest_layout(cfg, ranks));
  if (layout.pp > cfg.num_layers)
    raise(Err::PipelineLayers,
          "--pp " + std::to_string(layout.pp) + " makes more pipeline stages than the model's " +
              std::to_string(cfg.num_layers) +
              " layers (num_hidden_layers), so a stage would run none",
          suggest_layout(cfg, ranks));
  split_layers(int(cfg.num_layers), layout.pp, layout.pp_layers);
}

ShardPlan make_shard_plan(const ModelConfig& cfg, const Layout& layout, int world_rank) {
  check_layout(cfg, layout);
  const int ranks = layout.tp * layout.pp;
  if (world_rank < 0 || world_rank >= ranks)
    raise(Err::Internal, "shard plan asked for world rank " + std::to_string(world_rank) +
                             " of a " + std::to_string(ranks) + "-rank layout");
  ShardPlan p;
  p.tp = layout.tp;
  p.pp = layout.pp;
  p.stage = world_rank / layout.tp;
  p.tp_rank = world_rank % layout.tp;
  p.first_stage = p.stage == 0;
  p.last_stage = p.stage == layout.pp - 1;

  std::vector<int> counts = split_layers(int(cfg.num_layers), layout.pp, layout.pp_layers);
  p.layers.begin = std::accumulate(counts.begin(), counts.begin() + p.stage, int64_t{0});
  p.layers.end = p.layers.begin + counts[p.stage];

  auto even = [&](int64_t n) {
    int64_t per = n / layout.tp;
    return Range{p.tp_rank * per, (p.tp_rank + 1) * per};
  };
  p.q_heads = even(cfg.num_heads);
  p.kv_heads = even(cfg.num_kv_heads);
  p.intermediate = even(cfg.intermediate_size);

  int64_t per = (cfg.vocab_size + layout.tp - 1) / layout.tp;
  p.vocab.begin = std::min(cfg.vocab_size, p.tp_rank * per);
  p.vocab.end = std::min(cfg.vocab_size, p.vocab.begin + per);
  return p;
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
