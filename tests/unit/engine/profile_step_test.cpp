// The profiling step (engine/profile_step.h) on the CPU backend: its batch passes the backends'
// checks (the CUDA backend checks the same), every stage of a pipeline runs it on its own, and
// a backend that counts its buffers sees the model's step-sized scratch kept and the hidden
// states and the throwaway KV block freed: what the CUDA budget measures as workspace.
#include "engine/profile_step.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "../forwarding_backend.h"
#include "../small_model_config.h"
#include "../solo_comm.h"
#include "backend/cpu/cpu_backend.h"
#include "model/synthetic.h"

namespace qmpi {
namespace {

// CPU backend whose Backend::alloc buffers are counted (weights are not: make_weight).
class CountingBackend final : public testing::ForwardingBackend {
 public:
  std::string_view name() const override { return "counting"; }
  Buffer alloc(size_t bytes) override {
    Buffer b = inner().alloc(bytes);
    void* p = b.data();
    held_.emplace(p, std::move(b));
    in_use += bytes;
    peak = std::max(peak, in_use);
    return Buffer(this, p, bytes);
  }
  // Through alloc above, so the zeroed buffers (the KV cache) are counted too.
  Buffer alloc_zeroed(size_t bytes) override { return Backend::alloc_zeroed(bytes); }

  uint64_t in_use = 0, peak = 0;

 protected:
  void release(void* data, size_t bytes) override {
    held_.erase(data);
    in_use -= bytes;
  }

 private:
  std::map<void*, Buffer> held_;
};

ModelConfig small_config() {
  return ModelConfig::from_json(small_model_config(2, 500), "test");
}

TEST(ProfileStep, BatchIsOneSequenceInOneBlock) {
  const BatchInput b = profile_batch(ProfileShape{40, 3}, 16);
  ASSERT_EQ(b.num_tokens(), 40);
  EXPECT_EQ(b.positions.front(), 0);
  EXPECT_EQ(b.positions.back(), 39);
  EXPECT_EQ(*std::max_element(b.slots.begin(), b.slots.end()), 15);  // block 0 only
  ASSERT_EQ(b.seqs.size(), 1u);
  EXPECT_EQ(b.seqs[0].q_len, 40);
  EXPECT_EQ(b.seqs[0].ctx_len, 40);
  EXPECT_EQ(b.block_tables, std::vector<int32_t>(3, 0));  // 40 tokens span 3 blocks of 16
  EXPECT_EQ(b.logit_rows, (std::vector<int32_t>{37, 38, 39}));
}

// Stage `stage` of a --pp `pp` layout runs the step; returns {scratch kept, peak - kept}.
std::pair<uint64_t, uint64_t> profile_stage(int pp, int stage, const ProfileShape& shape) {
  const ModelConfig cfg = small_config();
  const ShardPlan plan = make_shard_plan(cfg, Layout{1, pp, {}}, stage);
  CountingBackend be;
  SyntheticWeights src(cfg, 3, DType::F32);
  testing::SoloComm tp;
  DecoderModel model(cfg, plan, be, tp, load_decoder_weights(cfg, plan, src, be));
  KvCacheShape kv;
  kv.num_layers = int(plan.layers.size());
  kv.block_size = 16;
  kv.kv_heads = int(plan.kv_heads.size());
  kv.head_dim = int(cfg.head_dim);
  EXPECT_EQ(be.in_use, 0u);
  const uint64_t cache = run_profile_step(model, be, kv, shape);
  kv.num_blocks = 1;
  EXPECT_EQ(cache, kv.bytes());
  return {be.in_use, be.peak - be.in_use};
}

TEST(ProfileStep, EveryStageRunsAndKeepsItsStepSizedScratch) {
  const uint64_t T = 40, R = 3, h = 48, q = 6 * 8, kv = 2 * 8, im = 96;
  const ProfileShape shape{int64_t(T), int64_t(R)};
  const uint64_t layer_scratch = T * (2 * h + 2 * q + 2 * kv + 2 * im) * sizeof(float);
  // K and V, 1 block, in the default KV dtype.
  const uint64_t freed_per_layer_block = 2ull * 16 * 2 * 8 * dtype_size(KvCacheShape{}.dtype);

  // First of two stages: embedding and layers, no logits.
  auto [kept0, freed0] = profile_stage(2, 0, shape);
  EXPECT_EQ(kept0, layer_scratch);  // plan/memory_model.h mirrors these slots
  EXPECT_EQ(freed0, T * h * sizeof(float) + freed_per_layer_block);

  // Last of two stages: starts from zeros, adds the logit rows. A backend in host memory (the
  // CPU one counted here) writes their vocab slice straight into the caller's logits, so no
  // scratch holds it (memory_model.h still counts one: a bound, not an estimate, there).
  ASSERT_TRUE(CountingBackend().host_memory());
  auto [kept1, freed1] = profile_stage(2, 1, shape);
  EXPECT_EQ(kept1, layer_scratch + R * h * sizeof(float));
  EXPECT_EQ(freed1, T * h * sizeof(float) + freed_per_layer_block);

  // One stage with both layers: the throwaway cache has a block per layer.
  auto [kept, freed] = profile_stage(1, 0, shape);
  EXPECT_EQ(kept, kept1);
  EXPECT_EQ(freed, T * h * sizeof(float) + 2 * freed_per_layer_block);
}

}  // namespace
}  // namespace qmpi
