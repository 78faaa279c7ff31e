#include "model/synthetic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "../small_model_config.h"
#include "../temp_dir.h"
#include "core/errors.h"
#include "io/checkpoint_dir.h"
#include "model/synthetic_checkpoint.h"

namespace qmpi {
namespace {

using nlohmann::json;
using testing::TempDir;

// A small Qwen2 (vocab 1000) so whole-model checks stay fast.
json small_config(bool tied) {
  json j = small_model_config(3, 1000);
  j["tie_word_embeddings"] = tied;
  return j;
}

std::vector<uint8_t> read_bytes(WeightSource& src, const std::string& name, const Slice& s) {
  const TensorInfo& t = src.info(name);
  std::vector<uint8_t> out(size_t(slice_numel(t.shape, s)) * dtype_size(t.dtype));
  src.read(name, s, out.data());
  return out;
}

TEST(SyntheticTensor, CounterBasedAndDeterministic) {
  const SyntheticTensor a(7, "model.layers.0.mlp.up_proj.weight", {96, 48});
  const SyntheticTensor a2(7, "model.layers.0.mlp.up_proj.weight", {96, 48});
  const SyntheticTensor other_seed(8, "model.layers.0.mlp.up_proj.weight", {96, 48});
  const SyntheticTensor other_name(7, "model.layers.0.mlp.gate_proj.weight", {96, 48});
  int same_seed = 0, same_name = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(a.value(i), a2.value(i));
    same_seed += a.value(i) == other_seed.value(i);
    same_name += a.value(i) == other_name.value(i);
  }
  EXPECT_LT(same_seed, 5);
  EXPECT_LT(same_name, 5);
  // fill() at any offset equals value() element by element (what makes slices independent).
  std::vector<float> chunk(10);
  a.fill(1234, 10, DType::F32, chunk.data());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(chunk[i], a.value(1234 + i));
  std::vector<uint16_t> bf(10);
  a.fill(1234, 10, DType::BF16, bf.data());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(bf[i], f32_to_bf16(a.value(1234 + i)));
}

TEST(SyntheticTensor, ScalesByKind) {
  auto stats = [](const SyntheticTensor& t, int64_t n) {
    double s = 0, s2 = 0, lo = 1e9, hi = -1e9;
    for (int64_t i = 0; i < n; ++i) {
      const double v = t.value(i);
      s += v, s2 += v * v, lo = std::min(lo, v), hi = std::max(hi, v);
    }
    const double mean = s / n;
    return std::array<double, 4>{mean, std::sqrt(s2 / n - mean * mean), lo, hi};
  };
  const auto norm = stats(SyntheticTensor(0, "model.layers.1.input_layernorm.weight", {192}), 192);
  EXPECT_GE(norm[2], 0.9);
  EXPECT_LE(norm[3], 1.1);
  const auto bias = stats(SyntheticTensor(0, "model.layers.1.self_attn.q_proj.bias", {192}), 192);
  EXPECT_LE(std::max(-bias[2], bias[3]), 0.1);
  // Linear weights: std 1/sqrt(fan_in) keeps activations at unit scale.
  const auto lin =
      stats(SyntheticTensor(0, "model.layers.1.mlp.up_proj.weight", {384, 192}), 73728);
  EXPECT_NEAR(lin[0], 0.0, 0.003);
  EXPECT_NEAR(lin[1], 1.0 / std::sqrt(192.0), 0.002);
  // Embeddings: <unit-rms hidden, row> has std 4.
  const auto emb = stats(SyntheticTensor(0, "model.embed_tokens.weight", {151936, 192}), 192000);
  EXPECT_NEAR(emb[1] * std::sqrt(192.0), 4.0, 0.05);
}

TEST(SyntheticWeights, SlicesEqualThePartsOfTheWhole) {
  const ModelConfig cfg = ModelConfig::from_json(small_config(false), "small");
  SyntheticWeights src(cfg, 3, DType::BF16);
  EXPECT_EQ(src.names().size(), expected_tensors(cfg).size());
  EXPECT_TRUE(src.has("lm_head.weight"));
  const std::string w = "model.layers.2.mlp.down_proj.weight";  // [48, 96]
  const auto whole = read_bytes(src, w, Slice::whole());
  const auto rows = read_bytes(src, w, {0, 10, 5});
  const auto cols = read_bytes(src, w, {1, 40, 16});
  EXPECT_EQ(std::memcmp(rows.data(), whole.data() + 10 * 96 * 2, rows.size()), 0);
  for (int r = 0; r < 48; ++r)
    EXPECT_EQ(std::memcmp(cols.data() + r * 16 * 2, whole.data() + (r * 96 + 40) * 2, 32), 0) << r;
  EXPECT_EQ(src.bytes_read(), whole.size() + rows.size() + cols.size());
  EXPECT_THROW(src.info("model.layers.3.mlp.up_proj.weight"), Error);
  EXPECT_THROW(SyntheticWeights(cfg, 0, DType::I8), Error);
}

class SyntheticEqualsCheckpoint : public ::testing::TestWithParam<std::tuple<DType, int, bool>> {};

// What --synthetic-weights generates on each rank equals what make-model writes.
TEST_P(SyntheticEqualsCheckpoint, EveryTensorAndSlice) {
  const auto [dtype, shards, tied] = GetParam();
  TempDir dir;
  const CheckpointSummary sum =
      write_synthetic_checkpoint(dir.str(), small_config(tied), 11, dtype, shards);
  const ModelConfig cfg = ModelConfig::load(dir.str());
  EXPECT_EQ(cfg.torch_dtype, dtype);
  EXPECT_EQ(cfg.tie_word_embeddings, tied);
  SafetensorsDir file(dir.str());
  SyntheticWeights synth(cfg, 11, dtype);
  EXPECT_EQ(file.shards().size(), size_t(shards));
  EXPECT_EQ(file.names(), synth.names());  // checkpoint order, split contiguously over shards
  int64_t params = 0;
  for (const auto& name : synth.names()) {
    const TensorInfo& t = synth.info(name);
    EXPECT_EQ(file.info(name).shape, t.shape) << name;
    EXPECT_EQ(file.info(name).dtype, dtype) << name;
    params += int64_t(t.nbytes / dtype_size(dtype));
    EXPECT_EQ(read_bytes(file, name, Slice::whole()), read_bytes(synth, name, Slice::whole()))
        << name;
    const int64_t d0 = t.shape[0];
    const Slice rows{0, d0 / 3, d0 / 3};
    EXPECT_EQ(read_bytes(file, name, rows), read_bytes(synth, name, rows)) << name;
    if (t.shape.size() == 2) {
      const Slice cols{1, t.shape[1] / 2, t.shape[1] / 2};
      EXPECT_EQ(read_bytes(file, name, cols), read_bytes(synth, name, cols)) << name;
    }
  }
  EXPECT_EQ(sum.params, params);
  EXPECT_EQ(file.bytes_read(), synth.bytes_read());
}

INSTANTIATE_TEST_SUITE_P(Layouts, SyntheticEqualsCheckpoint,
                         ::testing::Values(std::make_tuple(DType::BF16, 1, true),
                                           std::make_tuple(DType::F32, 3, false),
                                           std::make_tuple(DType::F16, 2, true)),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "shards_" +
                                  (std::get<2>(info.param) ? "tied" : "untied");
                         });

TEST(SyntheticCheckpoint, ShardsIndexAndSideFiles) {
  TempDir dir;
  const CheckpointSummary sum =
      write_synthetic_checkpoint(dir.str(), small_config(false), 0, DType::BF16, 4);
  json index = json::parse(std::ifstream(dir.file("model.safetensors.index.json")));
  uint64_t bytes = 0, file_bytes = 0;
  for (int s = 1; s <= 4; ++s) {
    const std::string name = "model-0000" + std::to_string(s) + "-of-00004.safetensors";
    SafetensorsFile f(dir.file(name));
    EXPECT_FALSE(f.tensors().empty()) << name;
    file_bytes += f.file_size();
    for (const auto& t : f.tensors()) {
      bytes += t.nbytes;
      EXPECT_EQ(index["weight_map"][t.name], name);
    }
  }
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), bytes);
  EXPECT_EQ(sum.file_bytes, file_bytes);
  EXPECT_EQ(index["weight_map"].size(), expected_tensors(ModelConfig::load(dir.str())).size());

  const json cfg = json::parse(std::ifstream(dir.file("config.json")));
  EXPECT_EQ(cfg["torch_dtype"], "bfloat16");
  EXPECT_EQ(cfg["model_type"], "qwen2");
  EXPECT_EQ(cfg["use_sliding_window"], false);
  const json gen = json::parse(std::ifstream(dir.file("generation_config.json")));
  EXPECT_EQ(gen["eos_token_id"], json({151645, 151643}));
  EXPECT_EQ(gen["top_k"], 20);
  EXPECT_EQ(gen["do_sample"], true);

  EXPECT_THROW(write_synthetic_checkpoint(dir.str(), small_config(false), 0, DType::BF16, 1000),
               Error);

  // Rewriting the folder as a single file leaves no stale shards or index behind.
  write_synthetic_checkpoint(dir.str(), small_config(true), 0, DType::BF16, 1);
  EXPECT_FALSE(std::filesystem::exists(dir.file("model.safetensors.index.json")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("model-00001-of-00004.safetensors")));
  EXPECT_FALSE(SafetensorsDir(dir.str()).has("lm_head.weight"));
}

}  // namespace
}  // namespace qmpi
