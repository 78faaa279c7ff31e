#include "model/gguf_config.h"

#include <gtest/gtest.h>

#include "../expect_error.h"
#include "../gguf_builder.h"
#include "../temp_dir.h"
#include "model/config.h"
#include "model/gguf_names.h"

namespace qmpi {
namespace {

using testing::expect_error;
using testing::GgufBuilder;
using testing::TempDir;

constexpr uint32_t kF32 = 0, kQ8_0 = 8, kQ4_K = 12;

// llama.cpp's metadata of a small qwen2 model: hidden 256, 2 layers, 4 heads of 64 (2 KV),
// MLP 512, vocab 8; tensors only where the tests look (token_embd and layer 1's norm).
GgufBuilder qwen2(const std::string& arch = "qwen2") {
  GgufBuilder b;
  b.string("general.architecture", arch);
  auto u32 = [&](const std::string& k, uint32_t v) {
    b.scalar<uint32_t>(arch + "." + k, GgufKind::U32, v);
  };
  u32("block_count", 2);
  u32("context_length", 4096);
  u32("embedding_length", 256);
  u32("feed_forward_length", 512);
  u32("attention.head_count", 4);
  u32("attention.head_count_kv", 2);
  b.scalar<float>(arch + ".rope.freq_base", GgufKind::F32, 1e6f);
  b.scalar<float>(arch + ".attention.layer_norm_rms_epsilon", GgufKind::F32, 1e-6f);
  b.scalar<uint32_t>("tokenizer.ggml.eos_token_id", GgufKind::U32, 7);
  b.tensor("token_embd.weight", {256, 8}, kQ8_0, std::vector<uint8_t>(8 * 8 * 34));
  b.tensor("blk.1.attn_norm.weight", {256}, kF32, std::vector<uint8_t>(1024));
  return b;
}

TEST(GgufConfig, Qwen2FromMetadata) {
  TempDir dir;
  GgufBuilder b = qwen2();
  b.tensor("blk.0.ffn_down.weight", {512, 256}, kQ4_K, std::vector<uint8_t>(256 * 2 * 144));
  b.write(dir.file("m.gguf"));
  const ModelConfig c = ModelConfig::load(dir.file("m.gguf"));
  EXPECT_EQ(c.architecture, "Qwen2ForCausalLM");
  EXPECT_EQ(c.hidden_size, 256);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.intermediate_size, 512);
  EXPECT_EQ(c.vocab_size, 8);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_NEAR(c.rms_norm_eps, 1e-6, 1e-12);
  EXPECT_TRUE(c.tie_word_embeddings);  // no output.weight
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{7});
  // Q8_0 and Q4_K tensors: TP cuts MLP columns on the widest block.
  EXPECT_TRUE(c.quant.gguf());
  EXPECT_EQ(c.quant.split_unit(), 256);
}

TEST(GgufConfig, Qwen3HeadDimYarnAndUntied) {
  TempDir dir;
  GgufBuilder b = qwen2("qwen3");
  b.scalar<uint32_t>("qwen3.attention.key_length", GgufKind::U32, 128);
  b.string("qwen3.rope.scaling.type", "yarn");
  b.scalar<float>("qwen3.rope.scaling.factor", GgufKind::F32, 4.0f);
  b.scalar<uint32_t>("qwen3.rope.scaling.original_context_length", GgufKind::U32, 1024);
  b.tensor("output.weight", {256, 8}, kF32, std::vector<uint8_t>(8 * 1024));
  b.write(dir.file("m.gguf"));
  const ModelConfig c = ModelConfig::load(dir.file("m.gguf"));
  EXPECT_EQ(c.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_scaling.kind, RopeKind::Yarn);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 1024);
  EXPECT_EQ(c.quant.split_unit(), 32);  // Q8_0 blocks only
}

TEST(GgufConfig, MoeDenseLayersFromRouters) {
  TempDir dir;
  GgufBuilder b = qwen2("qwen2moe");
  b.scalar<uint32_t>("qwen2moe.expert_count", GgufKind::U32, 4);
  b.scalar<uint32_t>("qwen2moe.expert_used_count", GgufKind::U32, 2);
  b.scalar<uint32_t>("qwen2moe.expert_feed_forward_length", GgufKind::U32, 64);
  b.scalar<uint32_t>("qwen2moe.expert_shared_feed_forward_length", GgufKind::U32, 128);
  b.tensor("blk.1.ffn_gate_inp.weight", {256, 4}, kF32, std::vector<uint8_t>(4 * 1024));
  b.write(dir.file("m.gguf"));
  const ModelConfig c = ModelConfig::load(dir.file("m.gguf"));
  EXPECT_EQ(c.moe.num_experts, 4);
  EXPECT_EQ(c.moe.experts_per_token, 2);
  EXPECT_EQ(c.moe.intermediate_size, 64);
  EXPECT_EQ(c.moe.shared_intermediate_size, 128);
  EXPECT_FALSE(c.moe.norm_topk_prob);
  EXPECT_FALSE(c.is_moe_layer(0));  // no router in layer 0
  EXPECT_TRUE(c.is_moe_layer(1));
}

TEST(GgufConfig, MissingKeysAndOtherArchitectures) {
  TempDir dir;
  GgufBuilder b;
  b.string("general.architecture", "qwen2");
  b.tensor("token_embd.weight", {256, 8}, kF32, std::vector<uint8_t>(8 * 1024));
  b.write(dir.file("m.gguf"));
  expect_error([&] { ModelConfig::load(dir.file("m.gguf")); }, Err::GgufMetadata,
               {"m.gguf", "qwen2.embedding_length"});
  qwen2("llama").write(dir.file("m.gguf"));
  expect_error([&] { ModelConfig::load(dir.file("m.gguf")); }, Err::ArchUnsupported,
               {"llama", "qwen2"});
}

TEST(GgufNames, LlamaCppNamesAndExpertSlabs) {
  EXPECT_EQ(gguf_tensor_name("model.embed_tokens.weight"), "token_embd.weight");
  EXPECT_EQ(gguf_tensor_name("lm_head.weight"), "output.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.12.self_attn.o_proj.weight"),
            "blk.12.attn_output.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.3.self_attn.k_proj.bias"), "blk.3.attn_k.bias");
  EXPECT_EQ(gguf_tensor_name("model.layers.0.post_attention_layernorm.weight"),
            "blk.0.ffn_norm.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.0.self_attn.q_norm.weight"), "blk.0.attn_q_norm.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.0.mlp.experts.5.down_proj.weight"),
            "blk.0.ffn_down_exps.weight#5");
  EXPECT_FALSE(gguf_tensor_name("model.layers.0.mlp.gate_proj.qweight"));

  TempDir dir;
  GgufBuilder b = qwen2("qwen2moe");
  std::vector<uint8_t> experts(3 * 2 * 2 * 34);  // 3 experts of [2 rows, 64 cols] in Q8_0
  for (size_t i = 0; i < experts.size(); ++i) experts[i] = uint8_t(i);
  b.tensor("blk.0.ffn_up_exps.weight", {64, 2, 3}, kQ8_0, experts);
  b.tensor("blk.0.ffn_gate_inp_shexp.weight", {256}, kF32, std::vector<uint8_t>(1024));
  b.write(dir.file("m.gguf"));
  GgufNamedWeights w(dir.file("m.gguf"));
  EXPECT_EQ(w.info("model.layers.1.input_layernorm.weight").shape, std::vector<int64_t>{256});
  EXPECT_EQ(w.info("model.layers.0.mlp.shared_expert_gate.weight").shape,
            (std::vector<int64_t>{1, 256}));
  const TensorInfo& e2 = w.info("model.layers.0.mlp.experts.2.up_proj.weight");
  EXPECT_EQ(e2.shape, (std::vector<int64_t>{2, 64}));
  EXPECT_EQ(e2.nbytes, 2u * 2 * 34);
  std::vector<uint8_t> got(e2.nbytes);
  w.read(e2.name, Slice::whole(), got.data());
  EXPECT_EQ(got, std::vector<uint8_t>(experts.begin() + 2 * 136, experts.end()));
  expect_error([&] { w.info("model.layers.0.self_attn.q_proj.weight"); }, Err::TensorMissing,
               {"blk.0.attn_q.weight"});
}

}  // namespace
}  // namespace qmpi
