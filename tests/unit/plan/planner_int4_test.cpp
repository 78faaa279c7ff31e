// The planner on a real int4 checkpoint's config (Qwen2.5-72B-Instruct-AWQ: intermediate_size
// padded to 29696, AWQ group 128): six 24 GB cards fit, with the int4 bytes each rank holds.
#include <gtest/gtest.h>

#include "core/byte_size.h"
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

}  // namespace
}  // namespace qmpi
