// The SwiGLU MLP, down(silu(gate(x)) * up(x)) (facts §2a step 10): the dense MLP of a decoder
// layer, each routed expert and Qwen2-MoE's shared expert. Under TP, gate/up hold this rank's
// columns and down the matching rows, so the output is a partial sum for the all-reduce.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "backend/backend.h"
#include "model/batch.h"
#include "model/linear.h"
#include "model/lora_delta.h"
#include "model/scratch.h"
#include "model/weight_loader.h"

namespace qmpi {

struct MlpWeights {
  Linear gate, up;  // [width, hidden]: this rank's columns
  Linear down;      // [hidden, width]: the matching rows of the input
};

// Loads prefix.{gate,up,down}_proj (prefix "model.layers.3.mlp" or "...mlp.experts.5") of a
// full `width`-wide MLP; the shard plan says which part this rank holds.
MlpWeights load_mlp(WeightLoader& ld, const std::string& prefix, int64_t width, int64_t hidden);

class SwiGluMlp {
 public:
  explicit SwiGluMlp(Backend& be) : be_(be), scratch_(be, kSlots), lora_(be) {}

  // out[n, hidden] = down(silu(gate(x)) * up(x)) for x[n, hidden], each projection with the
  // LoRA deltas of `lora`'s row groups (the dense MLP; experts take none).
  void forward(const MlpWeights& w, const GemmInput& x, int64_t n, float* out,
               std::span<const LoraRows> lora = {});
  // Without LoRA, with the caller's gate and up buffers ([n, width] each) and gate's rounded
  // copy for down (Scratch::rounded), so that several MLPs (experts) may run at once
  // (Backend::run_tasks).
  void forward(const MlpWeights& w, const float* x, int64_t n, float* out, float* gate, float* up,
               const ActivationView& gate_rounded) const;

 private:
  enum { kGate, kUp, kGateRounded, kSlots };
  Backend& be_;
  Scratch scratch_;
  LoraDelta lora_;
};

}  // namespace qmpi
