// What `qmpi plan` prints, without the binary: the table, the per-rank explanation, JSON.
#include <gtest/gtest.h>

#include <cctype>

#include "core/byte_size.h"
#include "plan/plan_report.h"

namespace qmpi {
namespace {

ModelConfig qwen72b() {
  return ModelConfig::load(std::string(QMPI_SOURCE_DIR) +
                           "/tests/fixtures/configs/qwen2.5-72b-instruct.json");
}

PlanInputs six_gpus(const std::string& mem) {
  PlanInputs in;
  in.gpus = 6;
  in.gpu_mem = parse_byte_size(mem, "--gpu-mem");
  in.max_model_len = 32768;
  in.kv_dtype = DType::BF16;
  in.model_source = "qwen2.5-72b-instruct.json";
  return in;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(PlanReport, TableMarksTheRecommendedLayout) {
  const ModelConfig cfg = qwen72b();
  const std::string text = render_plan_text(cfg, plan_layouts(cfg, six_gpus("80GB")));
  EXPECT_TRUE(has(text, "model     qwen2.5-72b-instruct.json: Qwen2ForCausalLM, 80 layers"))
      << text;
  EXPECT_TRUE(
      has(text, "KV cache  320 KiB per token in BF16; one max-model-len sequence (32768 tokens)"))
      << text;
  EXPECT_TRUE(has(text, "  1   2   3     6  yes      23.23     1.69")) << text;
  EXPECT_TRUE(has(text, "  2   3   1     6  yes      45.46     5.00")) << text;
  EXPECT_TRUE(has(text, "<- recommended\n")) << text;
  EXPECT_TRUE(has(text, "  mpirun -np 6 qmpi serve --model MODEL_DIR --tp 2 --pp 3")) << text;
  // One row per layout of up to 6 GPUs, and per replica layout of all 6.
  size_t rows = 0;
  for (size_t at = text.find("\n  "); at != std::string::npos; at = text.find("\n  ", at + 1))
    if (std::isdigit(static_cast<unsigned char>(text[at + 3]))) ++rows;
  EXPECT_EQ(rows, 19u) << text;
}

TEST(PlanReport, NothingFitsListsWhatWould) {
  const ModelConfig cfg = qwen72b();
  const std::string text = render_plan_text(cfg, plan_layouts(cfg, six_gpus("24GiB")));
  EXPECT_FALSE(has(text, "<- recommended")) << text;
  EXPECT_TRUE(has(text, "What would fit:\n  - An int4 AWQ/GPTQ checkpoint")) << text;
  EXPECT_TRUE(has(text, "QM150 weights-do-not-fit")) << text;
}

TEST(PlanReport, OneLayoutShowsEveryRank) {
  const ModelConfig cfg = qwen72b();
  const PlanInputs in = six_gpus("80GB");
  const LayoutVerdict v = evaluate_layout(cfg, {2, 3, {}}, in);
  const std::string text = render_layout_text(cfg, v, in);
  EXPECT_TRUE(has(text, "valid, fits; 1 host, 0 cross-host pipeline hops")) << text;
  EXPECT_TRUE(has(text, "   0     0     0   0  0-26  ")) << text;
  EXPECT_TRUE(has(text, "   3     0     1   1  27-53 ")) << text;
  EXPECT_TRUE(has(text, "   5     0     2   1  54-79 ")) << text;
  const std::string tp6 = render_layout_text(cfg, evaluate_layout(cfg, {6, 1, {}}, in), in);
  EXPECT_TRUE(has(tp6, "13 KV-head copies per stage (the model has 8)")) << tp6;
  // Rank 2's row ends with its 3 KV heads, rank 3's with 2.
  EXPECT_TRUE(has(tp6, "yes" + std::string(10, ' ') + "3\n   3 ")) << tp6;
  const std::string bad = render_layout_text(cfg, evaluate_layout(cfg, {65, 1, {}}, in), in);
  EXPECT_TRUE(has(bad, "invalid (QM102 tp-exceeds-heads)")) << bad;
}

TEST(PlanReport, JsonCarriesVerdictsAndNumbers) {
  const ModelConfig cfg = qwen72b();
  const PlanInputs in = six_gpus("80GB");
  const nlohmann::json j = plan_json(cfg, plan_layouts(cfg, in));
  EXPECT_EQ(j["model"]["kv_bytes_per_token"], 327680);
  EXPECT_EQ(j["model"]["kv_cache_tokens"], 32768);
  EXPECT_EQ(j["recommended"]["tp"], 2);
  EXPECT_EQ(j["recommended"]["pp"], 3);
  EXPECT_EQ(j["recommended"]["dp"], 1);
  // Why not TP 6, 3 x 2, 1 x 6 or the five replica layouts of 6 GPUs: one sentence each.
  EXPECT_EQ(j["recommended"]["why"].size(), 8u) << j["recommended"].dump();
  for (const auto& l : j["layouts"])
    if (l["tp"] == 6) {
      EXPECT_EQ(l["kv_head_copies"], 13);
    }
  EXPECT_EQ(j["layouts"].size(), 19u);
  const nlohmann::json one = layout_json(cfg, evaluate_layout(cfg, {2, 3, {}}, in), in);
  ASSERT_EQ(one["layout"]["ranks"].size(), 6u);
  uint64_t weights = 0;
  for (const auto& r : one["layout"]["ranks"]) weights += r["weights_bytes"].get<uint64_t>();
  // Every rank's slice of the 145.41 GB, plus the replicated norms on the second TP rank.
  EXPECT_EQ(weights, 145'412'407'296ull + (2ull * 8192 * 80 + 8192) * 2);
}

}  // namespace
}  // namespace qmpi
