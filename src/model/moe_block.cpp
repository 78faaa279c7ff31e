#include "model/moe_block.h"

#include <cmath>
#include <numeric>

#include "model/router.h"

namespace qmpi {

MoeWeights load_moe(WeightLoader& ld, const ModelConfig& cfg, const ShardPlan& plan,
                    const std::string& prefix) {
  const int64_t h = cfg.hidden_size;
  MoeWeights w;
  w.router = ld.load_linear(prefix + ".gate", cfg.moe.num_experts, h);
  for (int64_t e = plan.experts.begin; e < plan.experts.end; ++e)
    w.experts.push_back(
        load_mlp(ld, prefix + ".experts." + std::to_string(e), cfg.moe.intermediate_size, h));
  if (const int64_t s = cfg.moe.shared_intermediate_size; s > 0) {
    w.shared = load_mlp(ld, prefix + ".shared_expert", s, h);
    w.shared_gate = ld.load_linear(prefix + ".shared_expert_gate", 1, h);
  }
  return w;
}

MoeBlock::MoeBlock(const ModelConfig& cfg, const ShardPlan& plan, Backend& be)
    : cfg_(cfg), plan_(plan), be_(be), scratch_(be, kSlots), mlp_(be) {}

void MoeBlock::forward(const MoeWeights& w, const float* x, int64_t T, float* out,
                       const TensorDump& dump, int64_t layer) {
  const int64_t h = cfg_.hidden_size, E = cfg_.moe.num_experts;
  float* logits = scratch_.get(kLogits, size_t(T * E));
  w.router.forward(be_, x, T, logits);
  dump(be_, layer, "router_logits", logits, T, E);
  std::vector<float> host(size_t(T * E));
  be_.copy_to_host(host.data(), logits, host.size() * sizeof(float));
  const Routing routing =
      route_tokens(host.data(), T, E, cfg_.moe.experts_per_token, cfg_.moe.norm_topk_prob);

  be_.fill_zero(out, size_t(T * h) * sizeof(float));
  const std::vector<ExpertTokens> groups = group_by_expert(routing, plan_.experts);
  // Sized for an expert that every token picks, so no buffer is reallocated between experts.
  float* rows = scratch_.get(kRows, size_t(T * h));
  float* rows_out = scratch_.get(kRowsOut, size_t(T * h));
  for (size_t e = 0; e < groups.size(); ++e) {
    const ExpertTokens& g = groups[e];
    const int64_t n = int64_t(g.rows.size());
    if (n == 0) continue;
    be_.gather_rows(x, g.rows.data(), n, h, rows);
    mlp_.forward(w.experts[e], rows, n, rows_out);
    be_.scatter_add_rows(rows_out, g.rows.data(), g.weights.data(), n, h, out);
  }

  if (w.shared_gate) {
    // The gate is one logit per token; its sigmoid scales the shared expert's rows. Scaling a
    // TP partial sum by it commutes with the all-reduce.
    float* shared = scratch_.get(kShared, size_t(T * h));
    w.shared_gate.forward(be_, x, T, logits);
    std::vector<float> gate(static_cast<size_t>(T));
    be_.copy_to_host(gate.data(), logits, gate.size() * sizeof(float));
    for (float& g : gate) g = float(1.0 / (1.0 + std::exp(-double(g))));
    std::vector<int32_t> all(static_cast<size_t>(T));
    std::iota(all.begin(), all.end(), 0);
    mlp_.forward(w.shared, x, T, shared);
    be_.scatter_add_rows(shared, all.data(), gate.data(), T, h, out);
  }
}

}  // namespace qmpi
