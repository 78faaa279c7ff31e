// The start-up line "memory predicted / actual" (plan/memory_report.h): the planner's
// prediction for one rank, and the line's text for made-up measurements.
#include "plan/memory_report.h"

#include <gtest/gtest.h>

#include "model/shard_plan.h"

namespace qmpi {
namespace {

constexpr uint64_t GiB = 1ull << 30, MiB = 1ull << 20;

ModelConfig fixture(const std::string& name) {
  return ModelConfig::load(std::string(QMPI_SOURCE_DIR) + "/tests/fixtures/configs/" + name +
                           ".json");
}

PlanInputs cuda_inputs() {
  PlanInputs in;
  in.gpus = 6;
  in.backend = BackendKind::Cuda;
  in.gpu_mem = 140 * GiB;  // what the device reported
  in.gpu_util = 0.9;
  in.max_model_len = 4096;
  in.max_step_tokens = 2048;
  return in;
}

TEST(MemoryReport, CudaKvIsWhatTheRanksShareOfTheBudgetLeaves) {
  const ModelConfig cfg = fixture("qwen2.5-0.5b-instruct");
  const ShardPlan plan = make_shard_plan(cfg, Layout{2, 3, {}}, 4);  // last stage, TP rank 0
  const PlanInputs in = cuda_inputs();
  const PredictedMemory p = predict_rank_memory(cfg, plan, in, 6);
  const RankMemory r = rank_memory(cfg, plan, in, expected_tensors(cfg));
  EXPECT_TRUE(p.kv_from_budget);
  EXPECT_EQ(p.rank.weights, r.weights);
  EXPECT_EQ(p.rank.activations, r.activations);
  EXPECT_EQ(p.rank.overhead, kRuntimeOverheadCuda);
  const uint64_t budget = uint64_t(double(140 * GiB) * 0.9) / 6;
  EXPECT_EQ(p.budget, budget);
  const uint64_t per_block = r.kv_per_token * 16;
  EXPECT_EQ(p.kv_blocks, int64_t((budget - r.fixed()) / per_block));
  EXPECT_EQ(p.rank.kv_cache, uint64_t(p.kv_blocks) * per_block);
  EXPECT_GT(p.kv_blocks, 1000);  // 0.5B leaves most of 21 GiB to the cache
}

TEST(MemoryReport, StepTokensSetThePredictedActivations) {
  const ModelConfig cfg = fixture("qwen2.5-0.5b-instruct");
  const ShardPlan plan = make_shard_plan(cfg, Layout{1, 2, {}}, 0);  // first stage: no logits
  PlanInputs in = cuda_inputs();
  const uint64_t h = 896, q = 896, kv = 128, im = 4864;
  in.max_step_tokens = 2048;
  EXPECT_EQ(predict_rank_memory(cfg, plan, in, 1).rank.activations,
            2048 * (3 * h + 2 * q + 2 * kv + 2 * im) * 4);
  in.max_step_tokens = 0;  // run / logits: a whole max_model_len prompt
  EXPECT_EQ(predict_rank_memory(cfg, plan, in, 1).rank.activations,
            4096 * (3 * h + 2 * q + 2 * kv + 2 * im) * 4);
}

TEST(MemoryReport, FixedCacheWithKvBlocksAndOneSequenceOnCpu) {
  const ModelConfig cfg = fixture("qwen2.5-0.5b-instruct");
  const ShardPlan plan = make_shard_plan(cfg, Layout{1, 1, {}}, 0);
  PlanInputs in = cuda_inputs();
  in.kv_blocks = 300;
  PredictedMemory p = predict_rank_memory(cfg, plan, in, 1);
  EXPECT_FALSE(p.kv_from_budget);
  EXPECT_EQ(p.kv_blocks, 300);

  in = PlanInputs{};
  in.backend = BackendKind::Cpu;
  in.max_model_len = 100;
  in.max_num_seqs = 2;
  p = predict_rank_memory(cfg, plan, in, 1);
  EXPECT_FALSE(p.kv_from_budget);
  EXPECT_EQ(p.kv_blocks, 7);  // the one 100-token sequence that must fit, in blocks of 16
  EXPECT_EQ(p.rank.overhead, kRuntimeOverheadCpu);
}

PredictedMemory predicted_device() {
  PredictedMemory p;
  p.rank.weights = 600 * MiB;
  p.rank.activations = 200 * MiB;
  p.rank.overhead = GiB;
  p.rank.kv_cache = 18 * GiB;
  p.kv_blocks = 9216;
  p.kv_from_budget = true;
  p.budget = 21 * GiB;
  p.gpu_util = 0.9;
  p.ranks_per_device = 6;
  return p;
}

MeasuredMemory measured_device() {
  MeasuredMemory m;
  m.device = true;
  m.total_bytes = 140 * GiB;
  m.free_bytes = 100 * GiB;
  m.weight_bytes = 600 * MiB;
  m.workspace_bytes = 256 * MiB;
  m.overhead_bytes = GiB;
  m.rank_budget_bytes = 21 * GiB;
  m.profile_tokens = 2048;
  m.rank_kv_blocks = 9100;
  m.kv_blocks = 9100;
  m.bytes_per_block = 2 * MiB;
  return m;
}

TEST(MemoryReport, DeviceLineHasPredictedNextToActual) {
  EXPECT_EQ(memory_report_line(predicted_device(), measured_device()),
            "memory predicted / actual: weights 600.0 / 600.0 MiB, workspace 200.0 / 256.0 MiB "
            "(2048-token step), overhead 1 GiB reserved, KV cache 18.00 / 17.77 GiB = 9216 / "
            "9100 blocks; budget 21 GiB (0.90 x 140 GiB / 6 ranks), 100 GiB free before the KV "
            "cache");
}

TEST(MemoryReport, DeviceLineSaysWhatLimitedTheCache) {
  MeasuredMemory m = measured_device();
  m.limited_by_free = true;
  m.rank_kv_blocks = 9500;  // this rank had more room than another
  const std::string line = memory_report_line(predicted_device(), m);
  EXPECT_NE(line.find("free memory set the limit"), std::string::npos) << line;
  EXPECT_NE(line.find("room for 9500 blocks here, the job uses the smallest of any rank"),
            std::string::npos)
      << line;

  PredictedMemory one = predicted_device();
  one.ranks_per_device = 1;
  EXPECT_NE(memory_report_line(one, measured_device()).find("(0.90 x 140 GiB), "),
            std::string::npos);
}

TEST(MemoryReport, HostLineHasNoDeviceNumbers) {
  PredictedMemory p;
  p.rank.weights = 2 * GiB;
  p.rank.activations = 48 * MiB;
  p.rank.overhead = 256 * MiB;
  p.rank.kv_cache = 32 * MiB;
  p.kv_blocks = 16;
  MeasuredMemory m;
  m.weight_bytes = 2 * GiB + 512 * MiB;
  m.kv_blocks = 16;
  m.rank_kv_blocks = 16;
  m.bytes_per_block = 2 * MiB;
  EXPECT_EQ(memory_report_line(p, m),
            "memory predicted / actual: weights 2.00 / 2.50 GiB, activations 48 MiB / not "
            "measured, overhead 256 MiB reserved, KV cache 32.0 / 32.0 MiB = 16 / 16 blocks "
            "(at least one max-model-len sequence; mapped, held as written)");
}

}  // namespace
}  // namespace qmpi
