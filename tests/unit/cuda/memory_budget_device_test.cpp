// The KV budget from the live device (needs a GPU; see device_check.h): the engine's profiling
// step runs on the CUDA backend (its batch passes the backend's checks), and the measured
// workspace covers what the model and the Executor hold for that step, without the throwaway
// KV block and within what the backend adds (cuBLAS workspace, 16-bit GEMM inputs, metadata).
#include <gtest/gtest.h>

#include "../solo_comm.h"
#include "backend/cuda/memory_budget.h"
#include "device_check.h"
#include "engine/profile_step.h"
#include "kernels/cuda/launch_shapes.h"
#include "model/presets.h"
#include "model/synthetic.h"
#include "plan/memory_model.h"

namespace qmpi::test {
namespace {

using CudaMemoryBudget = DeviceCheck;

TEST_F(CudaMemoryBudget, ProfileStepMeasuresTheWorkspace) {
  nlohmann::json j = preset_config("tiny").raw;  // hidden 192, 12 heads, 6 KV heads, im 384
  j["num_hidden_layers"] = 2;
  j["vocab_size"] = 4096;
  const ModelConfig cfg = ModelConfig::from_json(j, "test");
  const ShardPlan plan = make_shard_plan(cfg, Layout{1, 1, {}}, 0);
  SyntheticWeights src(cfg, 5, DType::BF16);
  testing::SoloComm tp;
  DecoderModel model(cfg, plan, *gpu_, tp, load_decoder_weights(cfg, plan, src, *gpu_));
  KvCacheShape kv;
  kv.num_layers = 2;
  kv.block_size = 16;
  kv.kv_heads = 6;
  kv.head_dim = int(cfg.head_dim);
  const ProfileShape shape{1000, 8};

  gpu_->reset_memory_peaks();
  const uint64_t profile_kv = run_profile_step(model, *gpu_, kv, shape);
  const cuda::DeviceKvBudget d = cuda::plan_kv_blocks_on_device(*gpu_, 0.9, 1, kRuntimeOverheadCuda,
                                                                kv.bytes_per_block(), profile_kv);

  const uint64_t T = 1000, R = 8, h = 192, q = 192, kvw = 96, im = 384, V = 4096;
  const uint64_t step = T * (3 * h + 2 * q + 2 * kvw + 2 * im) * 4;  // hidden + model scratch
  const uint64_t logits = R * (h + V) * 4;
  // cuBLAS workspace (32 MiB), bf16 copies of GEMM inputs (the model's of the normed rows, the
  // MLP's gate and the logit rows; the backend's of o_proj's input, which it converts), the
  // metadata mirrors and the flash-decoding partials.
  const uint64_t backend_scratch =
      (32ull << 20) + (T * (h + im + q) + R * h) * 2 + (1ull << 20) +
      uint64_t(cuda::attention_split_workspace_bytes(gpu_->device().multiprocessors));
  EXPECT_GE(d.input.workspace_bytes, step + logits);
  EXPECT_LE(d.input.workspace_bytes, step + logits + backend_scratch);
  EXPECT_EQ(d.input.weight_bytes, gpu_->memory_counters().used(cuda::MemPurpose::Weights));
  EXPECT_GT(d.input.weight_bytes, V * h * 2);  // at least the bf16 embedding
  EXPECT_EQ(d.input.total_bytes, gpu_->device().total_bytes);
  EXPECT_LE(d.input.free_bytes, cuda::query_device_memory().free_bytes);
  EXPECT_GE(d.budget.num_blocks, 1);
  std::printf("  workspace %.1f MiB for a %llu-token step, %lld KV blocks of %llu bytes\n",
              double(d.input.workspace_bytes) / double(1 << 20), (unsigned long long)T,
              (long long)d.budget.num_blocks, (unsigned long long)kv.bytes_per_block());
}

}  // namespace
}  // namespace qmpi::test
