// LoRA adapters in the planner's per-rank memory: max_loras x rank x (in + out) per projection
// per layer as each rank holds them, against sums worked out by hand from the configs (Qwen2.5
// 0.5B: hidden 896, 14 heads and 2 KV heads of 64, intermediate 4864, 24 layers, bf16; Qwen3
// 30B-A3B: hidden 2048, 32 heads and 4 KV heads of 128, 48 MoE layers, adapters on attention
// only), and the header line `qmpi plan` prints.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "core/byte_size.h"
#include "plan/memory_model.h"
#include "plan/plan_report.h"
#include "plan/planner.h"

namespace qmpi {
namespace {

ModelConfig fixture(const std::string& name) {
  return ModelConfig::load(std::string(QMPI_SOURCE_DIR) + "/tests/fixtures/configs/" + name +
                           ".json");
}

PlanInputs with_loras(int64_t loras, int64_t rank) {
  PlanInputs in;
  in.gpus = 2;
  in.gpu_mem = 80ull << 30;
  in.max_loras = loras;
  in.max_lora_rank = rank;
  return in;
}

// (in + out) over q, k, v, o, gate, up, down of one Qwen2.5-0.5B layer, whole: 1792 + 1024 +
// 1024 + 1792 + 5760 + 5760 + 5760.
constexpr uint64_t kWholeLayer = 22912;
// TP 2, rank 0: 7 query heads (448 columns), 1 KV head (64), 2432 MLP columns; A whole and B
// split on q/k/v/gate/up, A split and B whole on o/down: 1344 + 960 + 960 + 1344 + 3328 x 3.
constexpr uint64_t kTp2Layer = 14592;

TEST(LoraMemory, WholeModelIsSlotsTimesRankTimesInPlusOut) {
  const ModelConfig cfg = fixture("qwen2.5-0.5b-instruct");
  PlanInputs in = with_loras(4, 16);
  EXPECT_EQ(lora_weight_bytes(cfg, in), 4 * 16 * 24 * kWholeLayer * 2);  // 70,385,664: bf16
  in.bf16_activations = false;  // --dtype float32: the file's float32
  EXPECT_EQ(lora_weight_bytes(cfg, in), 4 * 16 * 24 * kWholeLayer * 4);
  in.max_loras = 0;
  EXPECT_EQ(lora_weight_bytes(cfg, in), 0u);
}

TEST(LoraMemory, EachRankCountsItsSplitAndItsLayers) {
  const ModelConfig cfg = fixture("qwen2.5-0.5b-instruct");
  const PlanInputs in = with_loras(2, 8);
  PlanInputs none = in;
  none.max_loras = 0;
  const auto tensors = expected_tensors(cfg);
  for (const auto& [layout, per_layer, layers] :
       {std::tuple{Layout{2, 1, {}}, kTp2Layer, 24}, std::tuple{Layout{1, 2, {}}, kWholeLayer, 12},
        std::tuple{Layout{2, 2, {}}, kTp2Layer, 12}}) {
    const ShardPlan plan = make_shard_plan(cfg, layout, 0);
    const RankMemory m = rank_memory(cfg, plan, in, tensors);
    const uint64_t want = 2 * 8 * uint64_t(layers) * per_layer * 2;
    EXPECT_EQ(m.lora_weights, want) << layout.tp << "x" << layout.pp;
    // In the weights, so the pre-flight's fit check counts them.
    EXPECT_EQ(m.weights, rank_memory(cfg, plan, none, tensors).weights + want);
  }
}

TEST(LoraMemory, MoeLayersAdaptAttentionOnly) {
  const ModelConfig cfg = fixture("qwen3-30b-a3b");
  // q 2048 + 4096, k and v 2048 + 512, o 4096 + 2048, on 48 layers.
  EXPECT_EQ(lora_weight_bytes(cfg, with_loras(1, 16)), 16ull * 48 * 17408 * 2);
}

TEST(LoraMemory, PlanHeaderNamesTheAdapters) {
  const ModelConfig cfg = fixture("qwen2.5-0.5b-instruct");
  const PlanResult plan = plan_layouts(cfg, with_loras(4, 16));
  const std::string text = render_plan_text(cfg, plan);
  EXPECT_NE(
      text.find("LoRA      4 adapters (--max-loras) x rank 16 on q/k/v/o/gate/up/down: " +
                format_bytes(70385664) + " in BF16 over all ranks, counted in their weights\n"),
      std::string::npos)
      << text;
  EXPECT_EQ(render_plan_text(cfg, plan_layouts(cfg, with_loras(0, 16))).find("LoRA "),
            std::string::npos);
}

}  // namespace
}  // namespace qmpi
