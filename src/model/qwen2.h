// The Qwen2 decoder as math over the Backend and the TP Comm (qwen-facts.md §2a): one stage's
// layers, the vocab-parallel embedding on the first stage, final norm and lm_head on the last.
// Speed lives in the backend's kernels; this file stays readable top to bottom.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "model/batch.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/qwen2_weights.h"
#include "model/shard_plan.h"
#include "parallel/comm.h"

namespace qmpi {

class Qwen2Model {
 public:
  Qwen2Model(const ModelConfig& cfg, const ShardPlan& plan, Backend& backend, Comm& tp,
             Qwen2Weights weights);

  // First stage: hidden[T, h] = embedding of the batch's tokens (all-reduced over TP).
  void embed(const BatchInput& batch, float* hidden);
  // Runs this stage's layers in place on hidden[T, h], writing the batch's K/V into the cache.
  void run_layers(const BatchInput& batch, float* hidden, KvCache& cache);
  // Last stage: logits of the batch's logit_rows, every vocab row, into host memory
  // [rows, vocab_size] (the TP ranks' vocab slices are gathered).
  void logits(const BatchInput& batch, const float* hidden, float* host_logits);

  const ShardPlan& plan() const { return plan_; }
  const Qwen2Weights& weights() const { return w_; }
  int64_t hidden_size() const { return cfg_.hidden_size; }
  int64_t vocab_size() const { return cfg_.vocab_size; }

 private:
  float* scratch(int slot, size_t floats);
  void all_reduce(float* x, int64_t count);

  const ModelConfig& cfg_;
  ShardPlan plan_;
  Backend& be_;
  Comm& tp_;
  Qwen2Weights w_;
  std::vector<Buffer> scratch_;
};

}  // namespace qmpi
