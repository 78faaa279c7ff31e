#include "model/moe_block.h"

#include <algorithm>
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

void MoeBlock::forward(const MoeWeights& w, const GemmInput& x, int64_t T, float* out,
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
  std::vector<int64_t> active, first;  // the experts with tokens, and where their rows start
  int64_t rows_total = 0, widest = 0;
  for (size_t e = 0; e < groups.size(); ++e) {
    const int64_t n = int64_t(groups[e].rows.size());
    if (n == 0) continue;
    active.push_back(int64_t(e));
    first.push_back(rows_total);
    rows_total += n;
    widest = std::max(widest, n);
  }
  // Decode-sized experts (each GEMM streams its weights for a few rows) run side by side, one
  // per thread, each with buffers of its own; prefill-sized ones run one after another, each
  // GEMM split over the threads, reusing buffers sized for the widest.
  const bool side_by_side = widest <= kSideBySideRows;
  const int64_t held = side_by_side ? rows_total : widest;
  const int64_t width = active.empty() ? 0 : w.experts[size_t(active[0])].gate.out_features();
  float* rows = scratch_.get(kRows, size_t(held * h));
  float* rows_out = scratch_.get(kRowsOut, size_t(held * h));
  float* gate = scratch_.get(kGate, size_t(held * width));
  float* up = scratch_.get(kUp, size_t(held * width));
  const ActivationView gate16 = scratch_.rounded(
      kGateRounded,
      active.empty() ? DType::F32 : w.experts[size_t(active[0])].down.input_dtype(be_), held,
      width);
  const auto scatter = [&](size_t i, int64_t at) {
    const ExpertTokens& g = groups[size_t(active[i])];
    be_.scatter_add_rows(rows_out + at * h, g.rows.data(), g.weights.data(), int64_t(g.rows.size()),
                         h, out);
  };
  const auto expert = [&](int64_t i) {
    const ExpertTokens& g = groups[size_t(active[size_t(i)])];
    const int64_t n = int64_t(g.rows.size()), at = side_by_side ? first[size_t(i)] : 0;
    be_.gather_rows(x.x, g.rows.data(), n, h, rows + at * h);
    mlp_.forward(w.experts[size_t(active[size_t(i)])], rows + at * h, n, rows_out + at * h,
                 gate + at * width, up + at * width, gate16.rows_from(at, n));
    if (!side_by_side) scatter(size_t(i), 0);
  };
  if (side_by_side) {
    // Scattered in expert order after all ran: a token's rows add up in one fixed order.
    be_.run_tasks(int64_t(active.size()), expert);
    for (size_t i = 0; i < active.size(); ++i) scatter(i, first[i]);
  } else {
    for (size_t i = 0; i < active.size(); ++i) expert(int64_t(i));
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
