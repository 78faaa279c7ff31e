// The planner on a real int4 checkpoint's config (Qwen2.5-72B-Instruct-AWQ: intermediate_size
// padded to 29696, AWQ group 128): six 24 GB cards fit, with the int4 bytes each rank holds.
#include <gtest/gtest.h>

#include "core/byte_size.h"
#include "model/presets.h"
#include "plan/planner.h"

namespace qmpi {
namespace {

ModelConfig awq_72b() {
  return ModelConfig::load(std::string(QMPI_SOURCE_DIR) +
                           "/tests/fixtures/configs/qwen2.5-72b-instruct-awq.json");
}

TEST(PlannerInt4, Qwen72BAwqCountsInt4Bytes) {
  const ModelConfig cfg = awq_72b();
  ASSERT_EQ(cfg.quant.method, QuantMethod::Awq);
  PlanInputs in;
  in.gpus = 1;
  in.gpu_mem = parse_byte_size("1TB", "--gpu-mem");
  // Decoder linears: 80 layers x (q, o: 8192^2; k, v: 8192 x 1024; gate, up, down: 8192 x
  // 29696) weights at 1/2 + 3/128 bytes; embedding and lm_head (152064 x 8192) and the norms
  // and biases in fp16.
  const uint64_t linear = 80ull * (2 * 8192ull * 8192 + 2 * 8192ull * 1024 + 3 * 8192ull * 29696);
  const uint64_t other =
      2 * 152064ull * 8192 + 80ull * (2 * 8192 + 8192 + 2 * 1024) + 8192;  // + final norm
  EXPECT_EQ(model_weight_bytes(cfg, in), linear / 2 + linear * 3 / 128 + 2 * other);
  EXPECT_NEAR(double(model_weight_bytes(cfg, in)) / 1e9, 41.9, 0.1);
}

TEST(PlannerInt4, Qwen72BAwqOnSix24GBGpusFits) {
  const ModelConfig cfg = awq_72b();
  PlanInputs in;
  in.gpus = 6;
  in.gpu_mem = parse_byte_size("24GB", "--gpu-mem");
  in.max_model_len = 8192;
  in.kv_dtype = DType::BF16;
  const PlanResult r = plan_layouts(cfg, in);
  ASSERT_GE(r.best, 0) << r.recommendation;
  const LayoutVerdict& best = r.layouts[size_t(r.best)];
  EXPECT_TRUE(best.fits);
  EXPECT_EQ(best.gpus(), 6);
  for (const RankMemory& m : best.ranks) {
    EXPECT_LE(m.total(), best.budget);
    EXPECT_LT(m.weights, 9ull * 1000 * 1000 * 1000) << "rank " << m.rank;  // ~41.9 GB / 6 + skew
  }
  EXPECT_NE(r.command.find("mpirun -np 6"), std::string::npos) << r.command;
}

// Int4 and FP8 Qwen3-30B-A3B: every expert's gate/up/down is counted at its quantized size and
// the routers at bf16, so the weights are the bf16 model's minus what the projections save.
TEST(PlannerInt4, QuantizedMoeCountsPackedExperts) {
  const ModelConfig bf16 = preset_config("qwen3-30b-a3b");
  PlanInputs in;
  in.gpus = 1;
  in.gpu_mem = parse_byte_size("1TB", "--gpu-mem");
  // 48 layers: q 4096 x 2048, o 2048 x 4096, k and v 512 x 2048; 128 experts of 3 x 768 x 2048.
  const uint64_t proj = 48ull * (2 * 4096ull * 2048 + 2 * 512ull * 2048 + 128ull * 3 * 768 * 2048);
  const uint64_t dense = model_weight_bytes(bf16, in);
  for (const auto& [quant, bytes] :
       {std::pair<nlohmann::json, uint64_t>{
            {{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"version", "gemm"}},
            proj / 2 + proj * 3 / 128},
        std::pair<nlohmann::json, uint64_t>{{{"quant_method", "fp8"},
                                             {"fmt", "e4m3"},
                                             {"activation_scheme", "dynamic"},
                                             {"weight_block_size", {128, 128}}},
                                            proj}}) {
    nlohmann::json j = bf16.raw;
    j["quantization_config"] = quant;
    const ModelConfig q = ModelConfig::from_json(j, "cfg");
    const uint64_t got = model_weight_bytes(q, in);
    // FP8 adds a float32 per 128 x 128 block (and at most one block's worth per tensor).
    const uint64_t slack = q.quant.fp8() ? proj / (128 * 128) * 4 + 48ull * 388 * 8 : 0;
    EXPECT_GE(got, dense - 2 * proj + bytes) << quant.dump();
    EXPECT_LE(got, dense - 2 * proj + bytes + slack) << quant.dump();
  }
}

}  // namespace
}  // namespace qmpi
