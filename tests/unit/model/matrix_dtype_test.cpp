// The dtype the loader holds float matrices in (Backend::matrix_dtype): under bf16 activations,
// where VDPBF16PS exists, the CPU backend holds a float16 checkpoint's matrices (embedding and
// head, projections) as bf16, each element rounded to nearest even as torch's cast to bfloat16
// rounds it; vectors (norms) keep the file's dtype, and float32 activations keep everything.
#include <gtest/gtest.h>

#include <string>

#include "backend/cpu/cpu_backend.h"
#include "kernels/cpu/dot_products.h"
#include "model/decoder_weights.h"
#include "model/presets.h"
#include "model/synthetic.h"

namespace qmpi {
namespace {

ModelConfig small() {
  nlohmann::json j = preset_config("tiny").raw;
  j["num_hidden_layers"] = 1;
  j["vocab_size"] = 300;
  return ModelConfig::from_json(j, "test");
}

// How many elements of `w` differ from tensor `name` of `src` as `dtype` holds it (F16: the
// file's bits; BF16: the file's values rounded to nearest even).
int64_t mismatches(SyntheticWeights& src, const ModelConfig& cfg, const ShardPlan& plan,
                   const std::string& name, const Weight& w, DType dtype) {
  std::vector<uint16_t> file(size_t(w.rows * w.cols));
  src.read(name, *plan.slice_for(cfg, name), file.data());
  const auto* held = static_cast<const uint16_t*>(w.storage.data());
  int64_t bad = 0;
  for (size_t i = 0; i < file.size(); ++i) {
    const uint16_t want = dtype == DType::BF16 ? f32_to_bf16(f16_to_f32(file[i])) : file[i];
    bad += held[i] != want;
  }
  return bad;
}

TEST(MatrixDtype, Float16MatricesAreHeldAsRoundedBf16UnderBf16Activations) {
  const ModelConfig cfg = small();
  const ShardPlan plan = make_shard_plan(cfg, Layout{1, 1, {}}, 0);
  for (const bool bf16 : {false, true}) {
    CpuBackend be({1, bf16});
    SyntheticWeights src(cfg, 5, DType::F16);
    const DecoderWeights w = load_decoder_weights(cfg, plan, src, be);
    const DType matrices = bf16 && cpu::kHaveBf16Dot ? DType::BF16 : DType::F16;
    EXPECT_EQ(be.matrix_dtype(DType::F16), matrices);
    EXPECT_EQ(be.matrix_dtype(DType::BF16), DType::BF16);
    EXPECT_EQ(be.matrix_dtype(DType::F32), DType::F32);

    ASSERT_EQ(w.embedding.dtype, matrices) << bf16;
    EXPECT_EQ(mismatches(src, cfg, plan, "model.embed_tokens.weight", w.embedding, matrices), 0);
    const Weight& q = w.layers[0].attn.q.weight;
    ASSERT_EQ(q.dtype, matrices);
    EXPECT_EQ(mismatches(src, cfg, plan, "model.layers.0.self_attn.q_proj.weight", q, matrices), 0);
    const Weight& norm = w.layers[0].input_norm;
    ASSERT_EQ(norm.dtype, DType::F16);
    EXPECT_EQ(mismatches(src, cfg, plan, "model.layers.0.input_layernorm.weight", norm, DType::F16),
              0);
  }
}

}  // namespace
}  // namespace qmpi
