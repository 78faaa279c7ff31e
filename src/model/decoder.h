// The Qwen decoder as math over the Backend and the TP Comm, for every supported family:
// one stage's layers, the vocab-parallel embedding on the first stage, final norm and lm_head
// on the last. A layer is input norm -> attention block -> all-reduce -> residual, post norm ->
// dense SwiGLU or MoE block -> all-reduce -> residual; the families differ only in what the
// config switches on inside the blocks (qkv bias, q/k norm, which layers are sparse, the
// shared expert), so one decoder serves them all. Speed lives in the backend's kernels; this
// file stays readable top to bottom.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "model/attention_block.h"
#include "model/batch.h"
#include "model/config.h"
#include "model/decoder_weights.h"
#include "model/kv_cache.h"
#include "model/moe_block.h"
#include "model/scratch.h"
#include "model/shard_plan.h"
#include "model/swiglu_mlp.h"
#include "model/tensor_dump.h"
#include "parallel/comm.h"

namespace qmpi {

class DecoderModel {
 public:
  DecoderModel(const ModelConfig& cfg, const ShardPlan& plan, Backend& backend, Comm& tp,
               DecoderWeights weights, TensorDump dump = {});

  // First stage: hidden[T, h] = embedding of the batch's tokens (all-reduced over TP).
  void embed(const BatchInput& batch, float* hidden);
  // Runs this stage's layers in place on hidden[T, h], writing the batch's K/V into the cache.
  void run_layers(const BatchInput& batch, float* hidden, KvCache& cache);
  // Last stage: logits of the batch's logit_rows, every vocab row, into host memory
  // [rows, vocab_size] (the TP ranks' vocab slices are gathered).
  void logits(const BatchInput& batch, const float* hidden, float* host_logits);

  // True when embed and run_layers call only backend ops that never wait for the device, so a
  // backend may record a step of them (Backend::run_step): no TP all-reduce, no MoE layer (the
  // router reads its logits on the host), no debug dump and no LoRA adapters.
  bool recordable() const;

  const ShardPlan& plan() const { return plan_; }
  const DecoderWeights& weights() const { return w_; }
  int64_t hidden_size() const { return cfg_.hidden_size; }
  int64_t vocab_size() const { return cfg_.vocab_size; }

 private:
  void all_reduce(float* x, int64_t count);

  enum { kNormed, kNormedRounded, kProj, kRows, kRowsRounded, kLogits, kGathered, kSlots };
  const ModelConfig& cfg_;
  ShardPlan plan_;
  Backend& be_;
  Comm& tp_;
  DecoderWeights w_;
  TensorDump dump_;
  Scratch scratch_;
  AttentionBlock attention_;
  SwiGluMlp mlp_;
  MoeBlock moe_;
};

}  // namespace qmpi
