// The GEMM inputs the decoder passes at the Backend seam (backend/activation.h): on a backend
// whose GEMMs read bf16 for BF16 weights (as CUDA's do), every norm and silu_mul that feeds a
// GEMM is asked for a bf16 copy, and each copy a GEMM receives is exactly its x rounded to bf16
// at the time of the GEMM (a stale copy, one some op changed x after, would fail). The backend
// here is the CPU one with those ops watched, so this runs on any host.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../forwarding_backend.h"
#include "../solo_comm.h"
#include "model/decoder.h"
#include "model/presets.h"
#include "model/synthetic.h"

namespace qmpi {
namespace {

class Bf16InputsBackend final : public testing::ForwardingBackend {
 public:
  DType gemm_input_dtype(DType weight) const override {
    return weight == DType::BF16 ? DType::BF16 : DType::F32;
  }
  void rmsnorm(const float* x, int64_t n, const WeightView& w, float eps, float* out,
               const ActivationView& rounded) override {
    inner().rmsnorm(x, n, w, eps, out, {});
    write(out, rounded);
  }
  void add_rmsnorm(float* x, const float* y, int64_t n, const WeightView& w, float eps, float* out,
                   const ActivationView& rounded) override {
    inner().add_rmsnorm(x, y, n, w, eps, out, {});
    write(out, rounded);
  }
  void silu_mul(const float* g, const float* u, int64_t n, int64_t width, float* out,
                const ActivationView& rounded) override {
    inner().silu_mul(g, u, n, width, out, {});
    write(out, rounded);
  }
  void matmul(const GemmInput& x, int64_t n, const WeightView& w, const WeightView* b,
              float* out) override {
    check(x, n, w.cols);
    inner().matmul(x.x, n, w, b, out);
  }
  void matmul_group(const GemmInput& x, int64_t n, std::span<const MatmulTarget> t) override {
    check(x, n, t.empty() ? 0 : t[0].w.cols);
    inner().matmul_group(x.x, n, t);
  }

  int64_t copies_written = 0, gemms_with_copy = 0, gemms_without = 0, stale_elements = 0;

 private:
  void write(const float* out, const ActivationView& r) {
    if (!r) return;
    ASSERT_EQ(r.dtype, DType::BF16);
    auto* dst = static_cast<uint16_t*>(r.data);
    for (int64_t i = 0; i < r.rows * r.cols; ++i) dst[i] = f32_to_bf16(out[i]);
    copies_written++;
  }
  void check(const GemmInput& x, int64_t n, int64_t cols) {
    if (!x.rounded) {
      gemms_without++;
      return;
    }
    gemms_with_copy++;
    EXPECT_EQ(x.rounded.rows, n);
    EXPECT_EQ(x.rounded.cols, cols);
    const auto* copy = static_cast<const uint16_t*>(x.rounded.data);
    for (int64_t i = 0; i < n * cols; ++i) stale_elements += copy[i] != f32_to_bf16(x.x[i]);
  }
};

// A preset with `layers` layers and a 500-token vocabulary.
ModelConfig small(const std::string& preset, int layers) {
  nlohmann::json j = preset_config(preset).raw;
  j["num_hidden_layers"] = layers;
  j["vocab_size"] = 500;
  return ModelConfig::from_json(j, "test");
}

// What the watching backend saw of a prefill of `T` tokens of one sequence (logits of its last
// two) and then one decode step, on `cfg` with synthetic `dtype` weights.
std::unique_ptr<Bf16InputsBackend> run_two_steps(const ModelConfig& cfg, DType dtype, int32_t T) {
  auto be = std::make_unique<Bf16InputsBackend>();
  const ShardPlan plan = make_shard_plan(cfg, Layout{1, 1, {}}, 0);
  SyntheticWeights src(cfg, 3, dtype);
  testing::SoloComm tp;
  DecoderModel model(cfg, plan, *be, tp, load_decoder_weights(cfg, plan, src, *be));
  KvCacheShape kv;
  kv.num_layers = int(plan.layers.size());
  kv.num_blocks = 2;
  kv.kv_heads = int(plan.kv_heads.size());
  kv.head_dim = int(cfg.head_dim);
  KvCache cache(*be, kv);
  const std::pair<int32_t, int32_t> steps[] = {{0, T}, {T, 1}};
  for (const auto& [begin, count] : steps) {
    BatchInput b;
    for (int32_t i = 0; i < count; ++i) {
      b.tokens.push_back((begin + i) * 37 % 500);
      b.positions.push_back(begin + i);
      b.slots.push_back(begin + i);
    }
    b.seqs.push_back(AttentionSeq{0, count, begin + count, 0});
    b.block_tables = {0, 1};
    b.logit_rows = count > 1 ? std::vector<int32_t>{count - 2, count - 1} : std::vector<int32_t>{0};
    Buffer hidden = be->alloc(size_t(count * cfg.hidden_size) * sizeof(float));
    model.embed(b, hidden.as<float>());
    model.run_layers(b, hidden.as<float>(), cache);
    std::vector<float> logits(b.logit_rows.size() * size_t(cfg.vocab_size));
    model.logits(b, hidden.as<float>(), logits.data());
  }
  return be;
}

constexpr int64_t kSteps = 2;

TEST(DecoderGemmInput, EveryGemmAfterANormOrSiluGetsAFreshBf16Copy) {
  const ModelConfig cfg = small("tiny", 2);
  const auto be = run_two_steps(cfg, DType::BF16, 12);
  // Per layer and step: the q/k/v group after the input norm, gate/up after the post norm, down
  // after silu_mul; per step the head after the final norm. o_proj reads attention's output,
  // which no op rounds.
  EXPECT_EQ(be->gemms_with_copy, kSteps * (3 * cfg.num_layers + 1));
  EXPECT_EQ(be->gemms_without, kSteps * cfg.num_layers);
  EXPECT_EQ(be->copies_written, be->gemms_with_copy);
  EXPECT_EQ(be->stale_elements, 0);
}

TEST(DecoderGemmInput, MoeLayersPassFreshCopiesToRouterSharedExpertAndExpertDowns) {
  const auto be = run_two_steps(small("tiny-qwen2-moe", 3), DType::BF16, 9);  // layer 2 dense
  // Per step: the dense layer's three and the head, and per sparse layer q/k/v, the router, the
  // shared gate and the shared expert's gate/up (the post-norm copy), the shared expert's down
  // and the down of each active expert, at least top-2 of them (silu_mul copies); the experts'
  // gate/up read gathered rows, which no op rounds.
  const int64_t sparse = 2;
  EXPECT_GE(be->gemms_with_copy, kSteps * (3 + 1 + sparse * (5 + 2)));
  EXPECT_EQ(be->stale_elements, 0);
}

TEST(DecoderGemmInput, Float32WeightsAskForNoCopy) {
  const ModelConfig cfg = small("tiny", 2);
  const auto be = run_two_steps(cfg, DType::F32, 5);
  EXPECT_EQ(be->copies_written, 0);
  EXPECT_EQ(be->gemms_with_copy, 0);
  EXPECT_EQ(be->gemms_without, kSteps * (4 * cfg.num_layers + 1));
}

}  // namespace
}  // namespace qmpi
