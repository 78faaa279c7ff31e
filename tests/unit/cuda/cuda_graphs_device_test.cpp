// CUDA graphs for decode steps (CudaBackend::run_step, --cuda-graphs) against eager steps on
// the same model (needs a GPU; see device_check.h): greedy decoding of one and of three
// sequences gives the same logits to the bit, hence the same tokens, while the contexts stay
// under the first context bound (where eager and recorded steps launch the same attention);
// past it the recorded steps plan the attention split for the bound, so the logits agree to
// float rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "../solo_comm.h"
#include "backend/cuda/graph_book.h"
#include "device_check.h"
#include "engine/step_plan.h"
#include "model/decoder.h"
#include "model/kv_cache.h"
#include "model/presets.h"
#include "model/synthetic.h"

namespace qmpi::test {
namespace {

constexpr int kBlock = 16;
constexpr int kBlocksPerSeq = 24;  // 384 tokens

// One model, cache and hidden-state buffer on one backend, stepped as the Executor steps it.
class Runner {
 public:
  Runner(CudaBackend& be, const ModelConfig& cfg, const ShardPlan& plan, SyntheticWeights& src,
         int seqs)
      : be_(be),
        model_(cfg, plan, be, tp_, load_decoder_weights(cfg, plan, src, be)),
        cache_(be, kv_shape(cfg, seqs)),
        vocab_(cfg.vocab_size) {}

  // Runs one step; returns the logits of the plan's sampled rows.
  std::vector<float> step(const StepPlan& plan) {
    const BatchInput b = make_batch(plan, kBlock);
    const size_t bytes = size_t(b.num_tokens() * model_.hidden_size()) * sizeof(float);
    if (hidden_.bytes() < bytes) hidden_ = be_.alloc(bytes);
    be_.run_step(model_.recordable() ? shape_of(b) : StepShape{}, [&] {
      model_.embed(b, hidden_.as<float>());
      model_.run_layers(b, hidden_.as<float>(), cache_);
    });
    std::vector<float> logits(b.logit_rows.size() * size_t(vocab_));
    model_.logits(b, hidden_.as<float>(), logits.data());
    return logits;
  }

 private:
  static KvCacheShape kv_shape(const ModelConfig& cfg, int seqs) {
    KvCacheShape kv;
    kv.num_layers = int(cfg.num_layers);
    kv.num_blocks = int64_t(seqs) * kBlocksPerSeq;
    kv.block_size = kBlock;
    kv.kv_heads = int(cfg.num_kv_heads);
    kv.head_dim = int(cfg.head_dim);
    return kv;
  }

  CudaBackend& be_;
  testing::SoloComm tp_;
  DecoderModel model_;
  KvCache cache_;
  int64_t vocab_;
  Buffer hidden_;
};

// A step of every sequence: its tokens from `start`, the blocks it needs (sequence s owns
// blocks s * kBlocksPerSeq onwards).
StepPlan plan_of(const std::vector<std::vector<int32_t>>& tokens,
                 const std::vector<int32_t>& start) {
  StepPlan p;
  for (size_t s = 0; s < tokens.size(); ++s) {
    StepSeq q;
    q.tokens = tokens[s];
    q.start_pos = start[s];
    const int32_t blocks = (start[s] + int32_t(tokens[s].size()) + kBlock - 1) / kBlock;
    for (int32_t i = 0; i < blocks; ++i) q.block_table.push_back(int32_t(s) * kBlocksPerSeq + i);
    p.seqs.push_back(std::move(q));
  }
  return p;
}

using CudaGraphs = DeviceCheck;

TEST_F(CudaGraphs, DecodeStepsGiveTheTokensAndLogitsOfEagerSteps) {
  nlohmann::json j = preset_config("tiny").raw;
  j["num_hidden_layers"] = 2;
  j["vocab_size"] = 4096;
  const ModelConfig cfg = ModelConfig::from_json(j, "test");
  const ShardPlan plan = make_shard_plan(cfg, Layout{1, 1, {}}, 0);
  SyntheticWeights src(cfg, 7, DType::BF16);
  const int64_t V = cfg.vocab_size;
  for (const std::vector<int32_t>& prompts :
       {std::vector<int32_t>{200}, std::vector<int32_t>{200, 190, 150}}) {
    const int n = int(prompts.size());
    CudaBackend graphed(CudaBackendOptions{.cuda_graphs = true});
    Runner eager_run(*gpu_, cfg, plan, src, n), graph_run(graphed, cfg, plan, src, n);
    std::vector<std::vector<int32_t>> step_tokens;
    std::vector<int32_t> start(size_t(n), 0);
    for (int32_t len : prompts) {
      std::vector<int32_t> ids(static_cast<size_t>(len));
      std::iota(ids.begin(), ids.end(), 3);
      step_tokens.push_back(ids);
    }
    const std::string what = std::to_string(n) + " sequence(s)";
    size_t exact_steps = 0;
    for (int step = 0; step < 80; ++step) {
      const StepPlan p = plan_of(step_tokens, start);
      const std::vector<float> want = eager_run.step(p), got = graph_run.step(p);
      ASSERT_EQ(got.size(), want.size());
      int32_t max_context = 0;
      for (int s = 0; s < n; ++s)
        max_context =
            std::max(max_context, start[size_t(s)] + int32_t(step_tokens[size_t(s)].size()));
      if (max_context <= cuda::kGraphMinContext) {
        ASSERT_EQ(mismatches(got, want), 0u) << what << ", step " << step;
        ++exact_steps;
      } else {
        expect_close(got, want, 1e-5, what + ", step " + std::to_string(step));
      }
      // Both are fed eager's greedy token: where the logits are equal to the bit, so are the
      // tokens; past the bound a near tie could flip one, which says nothing about the graphs.
      for (int s = 0; s < n; ++s) {
        const auto row = [&](const std::vector<float>& l) {
          const auto b = l.begin() + int64_t(s) * V;
          return int32_t(std::max_element(b, b + V) - b);
        };
        start[size_t(s)] += int32_t(step_tokens[size_t(s)].size());
        step_tokens[size_t(s)] = {row(want)};
      }
    }
    const GraphCounts& c = graphed.graph_counts();
    std::printf(
        "  %s: %zu decode steps compared exactly; graphs captured %lld, replayed %lld, "
        "eager %lld\n",
        what.c_str(), exact_steps, (long long)c.captured, (long long)c.replayed,
        (long long)c.eager);
    EXPECT_GT(exact_steps, 50u) << what;
    EXPECT_GE(c.captured, 2) << what << ": one per context bound at least";
    EXPECT_GT(c.replayed, 60) << what << ": most decode steps replay";
  }
}

}  // namespace
}  // namespace qmpi::test
