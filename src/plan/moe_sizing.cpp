#include "plan/moe_sizing.h"

#include <algorithm>
#include <vector>

#include "core/errors.h"
#include "plan/memory_model.h"

namespace qmpi {
namespace {

using nlohmann::json;

int64_t count(const json& j, const char* key, const std::string& source, bool positive = true) {
  auto it = j.find(key);
  if (it == j.end()) raise(Err::ConfigKeyMissing, source + " has no \"" + std::string(key) + "\"");
  if (!it->is_number_integer() || it->get<int64_t>() < (positive ? 1 : 0))
    raise(Err::ConfigInvalid, source + ": \"" + key + "\" must be a " +
                                  (positive ? "positive" : "non-negative") + " integer, got " +
                                  it->dump());
  return it->get<int64_t>();
}

int64_t count_or(const json& j, const char* key, const std::string& source, int64_t fallback) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? fallback : count(j, key, source, false);
}

}  // namespace

std::optional<MoeModelSize> moe_model_size(const json& j, const std::string& source) {
  if (!j.is_object() || !j.contains("architectures") || !j["architectures"].is_array() ||
      j["architectures"].empty() || !j["architectures"][0].is_string())
    return std::nullopt;
  const std::string arch = j["architectures"][0].get<std::string>();
  const bool qwen3 = arch == "Qwen3MoeForCausalLM";
  if (arch != "Qwen2MoeForCausalLM" && !qwen3) return std::nullopt;

  MoeModelSize s;
  s.architecture = arch;
  const int64_t h = count(j, "hidden_size", source);
  const int64_t layers = count(j, "num_hidden_layers", source);
  const int64_t heads = count(j, "num_attention_heads", source);
  const int64_t kv_heads = count(j, "num_key_value_heads", source);
  const int64_t d = count_or(j, "head_dim", source, h / heads);
  const int64_t vocab = count(j, "vocab_size", source);
  const int64_t experts = count(j, "num_experts", source);
  const int64_t top_k = count(j, "num_experts_per_tok", source);
  const int64_t moe_im = count(j, "moe_intermediate_size", source);
  const int64_t dense_im = count_or(j, "intermediate_size", source, 0);
  const int64_t shared_im = count_or(j, "shared_expert_intermediate_size", source, 0);
  const int64_t sparse_step = std::max<int64_t>(count_or(j, "decoder_sparse_step", source, 1), 1);
  std::vector<int64_t> mlp_only;
  if (j.contains("mlp_only_layers") && j["mlp_only_layers"].is_array())
    for (const auto& x : j["mlp_only_layers"])
      if (x.is_number_integer()) mlp_only.push_back(x.get<int64_t>());
  // Qwen2-MoE always has q/k/v biases (its flag defaults to true); Qwen3-MoE has none and
  // normalizes q and k per head instead.
  const bool bias = qwen3 ? j.value("attention_bias", false) : j.value("qkv_bias", true);
  const bool tied = j.value("tie_word_embeddings", false);
  const int64_t q = heads * d, kv = kv_heads * d;

  // Parameters in quantizable linears and in everything else, whole model and per token.
  int64_t linear = 0, other = 0, active_linear = 0;
  other += vocab * h * (tied ? 1 : 2) + h;  // embedding, lm_head, final norm
  for (int64_t i = 0; i < layers; ++i) {
    const int64_t attn = 2 * h * q + 2 * h * kv;
    linear += attn;
    active_linear += attn;
    other += 2 * h + (bias ? q + 2 * kv : 0) + (qwen3 ? 2 * d : 0);
    const bool moe = std::find(mlp_only.begin(), mlp_only.end(), i) == mlp_only.end() &&
                     (i + 1) % sparse_step == 0;
    if (!moe) {
      linear += 3 * h * dense_im;
      active_linear += 3 * h * dense_im;
      continue;
    }
    other += experts * h;  // router
    linear += experts * 3 * h * moe_im;
    active_linear += top_k * 3 * h * moe_im;
    if (shared_im > 0) {
      linear += 3 * h * shared_im;
      active_linear += 3 * h * shared_im;
      other += h;  // the shared expert's sigmoid gate
    }
  }
  s.num_layers = layers;
  s.num_kv_heads = kv_heads;
  s.head_dim = d;
  s.num_experts = experts;
  s.experts_per_token = top_k;
  s.params = linear + other;
  s.active_params = active_linear + other;
  s.bf16_bytes = uint64_t(s.params) * 2;
  s.int4_bytes = uint64_t(linear) * kInt4BytesNum / kInt4BytesDen + uint64_t(other) * 2;
  s.kv_elements_per_token = 2ull * uint64_t(layers) * uint64_t(kv_heads) * uint64_t(d);
  return s;
}

}  // namespace qmpi
