#include "model/gguf_config.h"

#include <algorithm>
#include <string>

#include "core/errors.h"

namespace qmpi {
namespace {
using nlohmann::json;

struct GgufArch {
  const char* gguf;  // general.architecture
  const char* hf;    // config.json's architectures[0]
  bool moe;
  bool norm_topk;  // the routing weights' renormalisation when the file does not say
};
// llama.cpp's converter writes these four Qwen families under these names (conversion/qwen.py).
constexpr GgufArch kArchs[] = {
    {"qwen2", "Qwen2ForCausalLM", false, false},
    {"qwen3", "Qwen3ForCausalLM", false, false},
    {"qwen2moe", "Qwen2MoeForCausalLM", true, false},
    {"qwen3moe", "Qwen3MoeForCausalLM", true, true},
};

class Keys {
 public:
  Keys(const GgufFile& f, std::string arch) : f_(f), arch_(std::move(arch)) {}

  int64_t required(const std::string& key) const {
    auto v = f_.integer(arch_ + "." + key);
    if (!v) missing(key);
    return *v;
  }
  double required_number(const std::string& key) const {
    auto v = f_.number(arch_ + "." + key);
    if (!v) missing(key);
    return *v;
  }
  std::optional<int64_t> integer(const std::string& key) const {
    return f_.integer(arch_ + "." + key);
  }
  std::optional<double> number(const std::string& key) const {
    return f_.number(arch_ + "." + key);
  }
  std::optional<std::string> string(const std::string& key) const {
    return f_.string(arch_ + "." + key);
  }
  std::optional<bool> boolean(const std::string& key) const {
    return f_.boolean(arch_ + "." + key);
  }

 private:
  [[noreturn]] void missing(const std::string& key) const {
    raise(Err::GgufMetadata, f_.path() + " has no " + arch_ + "." + key + " key",
          "Convert the model again with llama.cpp's convert_hf_to_gguf.py, which writes it.");
  }
  const GgufFile& f_;
  std::string arch_;
};

// ARCH.rope.scaling.* as config.json's rope_scaling (null: none).
json rope_scaling(const Keys& k, const std::string& path) {
  const std::string type = k.string("rope.scaling.type").value_or("none");
  if (type == "none") return json();
  const auto factor = k.number("rope.scaling.factor");
  if (!factor) raise(Err::GgufMetadata, path + " has rope.scaling.type " + type + " but no factor");
  json r = {{"rope_type", type}, {"factor", *factor}};
  if (type == "linear") return r;
  if (type != "yarn")
    raise(Err::ArchUnsupported, path + ": not supported yet: rope.scaling.type \"" + type +
                                    "\" (qmpi runs none, linear, yarn)");
  if (auto n = k.integer("rope.scaling.original_context_length"))
    r["original_max_position_embeddings"] = *n;
  if (auto v = k.number("rope.scaling.yarn_beta_fast")) r["beta_fast"] = *v;
  if (auto v = k.number("rope.scaling.yarn_beta_slow")) r["beta_slow"] = *v;
  if (auto v = k.number("rope.scaling.yarn_attn_factor")) r["attention_factor"] = *v;
  return r;
}

std::optional<int64_t> token_id(const GgufFile& f, const char* key) {
  return f.integer(key);
}

}  // namespace

json gguf_config_json(const GgufWeights& model) {
  const GgufFile& f = model.meta();
  const std::string path = f.path();
  const auto arch_name = f.string("general.architecture");
  if (!arch_name)
    raise(Err::GgufMetadata, path + " has no general.architecture key",
          "Convert the model again with llama.cpp's convert_hf_to_gguf.py.");
  const GgufArch* arch = nullptr;
  for (const auto& a : kArchs)
    if (*arch_name == a.gguf) arch = &a;
  if (!arch)
    raise(Err::ArchUnsupported, path + ": general.architecture \"" + *arch_name +
                                    "\" is not supported (qmpi runs qwen2, qwen3, qwen2moe and "
                                    "qwen3moe GGUF files)");
  const Keys k(f, arch->gguf);
  json j;
  j["architectures"] = {arch->hf};
  j["model_type"] = arch->gguf;
  j["hidden_size"] = k.required("embedding_length");
  j["num_hidden_layers"] = k.required("block_count");
  j["num_attention_heads"] = k.required("attention.head_count");
  j["num_key_value_heads"] =
      k.integer("attention.head_count_kv").value_or(k.required("attention.head_count"));
  j["max_position_embeddings"] = k.required("context_length");
  j["rope_theta"] = k.number("rope.freq_base").value_or(10000.0);
  j["rms_norm_eps"] = k.required_number("attention.layer_norm_rms_epsilon");
  if (auto d = k.integer("attention.key_length")) j["head_dim"] = *d;
  j["rope_scaling"] = rope_scaling(k, path);
  // The embedding's rows are the vocabulary (the token list may be shorter: padding rows).
  const TensorInfo& embd = model.info("token_embd.weight");
  if (embd.shape.size() != 2)
    raise(Err::GgufTensorData, path + ": token_embd.weight has " +
                                   std::to_string(embd.shape.size()) + " dimensions, not 2");
  j["vocab_size"] = embd.shape[0];
  // llama.cpp ties the output to the embedding exactly when output.weight is absent.
  j["tie_word_embeddings"] = !model.has("output.weight");
  if (arch->moe) {
    j["num_experts"] = k.required("expert_count");
    j["num_experts_per_tok"] = k.required("expert_used_count");
    j["moe_intermediate_size"] = k.required("expert_feed_forward_length");
    if (auto s = k.integer("expert_shared_feed_forward_length"))
      j["shared_expert_intermediate_size"] = *s;
    j["norm_topk_prob"] = k.boolean("expert_weights_norm").value_or(arch->norm_topk);
    // GGUF has no decoder_sparse_step or mlp_only_layers: a layer without a router is dense.
    json dense = json::array();
    for (int64_t i = 0; i < j["num_hidden_layers"].get<int64_t>(); ++i)
      if (!model.has("blk." + std::to_string(i) + ".ffn_gate_inp.weight")) dense.push_back(i);
    if (!dense.empty()) j["mlp_only_layers"] = dense;
    j["intermediate_size"] =
        k.integer("feed_forward_length").value_or(k.required("expert_feed_forward_length"));
  } else {
    j["intermediate_size"] = k.required("feed_forward_length");
  }
  // Activations are float32 whatever the file holds; this only names the float tensors' type
  // (general.file_type 0: all F32, 1: mostly F16).
  const int64_t file_type = f.integer("general.file_type").value_or(-1);
  j["torch_dtype"] = file_type == 0 ? "float32" : file_type == 1 ? "float16" : "bfloat16";
  if (auto id = token_id(f, "tokenizer.ggml.bos_token_id")) j["bos_token_id"] = *id;
  if (auto id = token_id(f, "tokenizer.ggml.eos_token_id")) j["eos_token_id"] = *id;
  return j;
}

QuantConfig gguf_quant_config(const GgufWeights& model) {
  QuantConfig q;
  for (const std::string& name : model.names()) {
    const TensorInfo& t = model.info(name);
    if (!t.block_quantized()) continue;
    q.method = QuantMethod::Gguf;
    q.group_size = std::max<int64_t>(q.group_size, t.ggml->block_elems);
  }
  return q;
}

}  // namespace qmpi
