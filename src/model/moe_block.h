// The sparse MoE block of Qwen2-MoE / Qwen3-MoE (facts §2c) in place of the dense MLP: the
// router picks k experts per token (router.h); each of this rank's experts runs once on the
// rows routed to it (gathered, one SwiGLU, scattered back scaled by the routing weights; in a
// decode step the experts run side by side over the threads, so each active expert's weights
// are read once for all its tokens and the step pays one fork/join for all experts), and
// Qwen2-MoE adds its shared expert scaled by sigmoid(shared_expert_gate(x)). Experts are split
// whole over the TP ranks and the shared expert by columns, so the output is a partial sum for
// the same all-reduce as the dense MLP's.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"
#include "model/linear.h"
#include "model/scratch.h"
#include "model/shard_plan.h"
#include "model/swiglu_mlp.h"
#include "model/tensor_dump.h"
#include "model/weight_loader.h"

namespace qmpi {

struct MoeWeights {
  Linear router;                    // [experts, hidden], every rank
  std::vector<MlpWeights> experts;  // this rank's experts (ShardPlan::experts), whole
  MlpWeights shared;                // Qwen2-MoE: this rank's columns of the shared expert
  Linear shared_gate;               // Qwen2-MoE: [1, hidden], every rank
};

// Loads the sparse block under `prefix` ("model.layers.3.mlp").
MoeWeights load_moe(WeightLoader& ld, const ModelConfig& cfg, const ShardPlan& plan,
                    const std::string& prefix);

class MoeBlock {
 public:
  MoeBlock(const ModelConfig& cfg, const ShardPlan& plan, Backend& be);

  // out[T, hidden] = this rank's share of the block's output for the normed x[T, hidden].
  void forward(const MoeWeights& w, const GemmInput& x, int64_t T, float* out,
               const TensorDump& dump, int64_t layer);

 private:
  // Experts run side by side (Backend::run_tasks) when none has more rows than this.
  static constexpr int64_t kSideBySideRows = 64;
  enum { kLogits, kRows, kRowsOut, kGate, kUp, kGateRounded, kShared, kSlots };
  const ModelConfig& cfg_;
  const ShardPlan& plan_;
  Backend& be_;
  Scratch scratch_;
  SwiGluMlp mlp_;
};

}  // namespace qmpi
