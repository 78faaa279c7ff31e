#include "model/config.h"

#include <filesystem>
#include <fstream>

#include "core/errors.h"
#include "io/h5_checkpoint.h"
#include "model/config_bounds.h"
#include "model/gguf_config.h"

namespace qmpi {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// What each supported architecture adds to the Qwen2 decoder (facts §2b, §2c).
struct ArchTraits {
  const char* name;
  bool qk_norm;
  bool moe;
  bool shared_expert;
};
constexpr ArchTraits kArchs[] = {
    {"Qwen2ForCausalLM", false, false, false},
    {"Qwen3ForCausalLM", true, false, false},
    {"Qwen2MoeForCausalLM", false, true, true},
    {"Qwen3MoeForCausalLM", true, true, false},
};

std::string supported_arch_list() {
  std::string s;
  for (const auto& a : kArchs) s += std::string(s.empty() ? "" : ", ") + a.name;
  return s;
}

const json& require(const json& j, const char* key, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end())
    raise(Err::ConfigKeyMissing, source + " has no \"" + std::string(key) + "\"",
          "Add \"" + std::string(key) + "\" from the model's original config.json to " + source +
              ".");
  return *it;
}

int64_t positive_int(const json& j, const char* key, const std::string& source) {
  const json& v = require(j, key, source);
  if (!v.is_number_integer() || v.get<int64_t>() <= 0)
    raise(Err::ConfigInvalid,
          source + ": \"" + key + "\" must be a positive integer, got " + v.dump());
  return v.get<int64_t>();
}

double positive_number(const json& j, const char* key, const std::string& source) {
  const json& v = require(j, key, source);
  if (!v.is_number() || v.get<double>() <= 0)
    raise(Err::ConfigInvalid,
          source + ": \"" + key + "\" must be a positive number, got " + v.dump());
  return v.get<double>();
}

// eos_token_id is an int in config.json and often a list in generation_config.json.
std::vector<int64_t> token_ids(const json& v, const char* key, const std::string& source) {
  std::vector<int64_t> ids;
  if (v.is_null()) return ids;
  if (v.is_number_integer()) return {v.get<int64_t>()};
  if (v.is_array()) {
    for (const auto& x : v) {
      if (!x.is_number_integer())
        raise(Err::ConfigInvalid, source + ": \"" + key + "\" lists a non-integer " + x.dump());
      ids.push_back(x.get<int64_t>());
    }
    return ids;
  }
  raise(Err::ConfigInvalid,
        source + ": \"" + key + "\" must be an integer or a list, got " + v.dump());
}

DType parse_torch_dtype(const json& j, const std::string& source) {
  // transformers >= 4.56 writes "dtype"; older versions "torch_dtype".
  const json* v = j.contains("torch_dtype") ? &j["torch_dtype"]
                  : j.contains("dtype")     ? &j["dtype"]
                                            : nullptr;
  if (!v || v->is_null()) return DType::BF16;
  if (v->is_string()) {
    const auto& s = v->get_ref<const std::string&>();
    if (s == "bfloat16") return DType::BF16;
    if (s == "float16") return DType::F16;
    if (s == "float32") return DType::F32;
  }
  raise(Err::DTypeUnsupported, source + ": torch_dtype " + v->dump() +
                                   " is not supported; qmpi runs bfloat16, float16 or float32 "
                                   "models");
}

// Absent or null: the fallback (what transformers assumes); present with another type: an error.
template <class T>
T optional(const json& j, const char* key, T fallback, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    raise(Err::ConfigInvalid, source + ": \"" + key + "\" has the wrong type: " + it->dump());
  }
}

nlohmann::json read_json_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in) raise(Err::ConfigInvalid, "cannot read " + path.string());
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    raise(Err::ConfigInvalid, path.string() + " is not valid JSON (" + e.what() + ")");
  }
}

// /meta/<name> of a qmpi .h5 file as JSON; null when absent and not `required`.
nlohmann::json read_h5_json(const std::string& path, const std::string& name, bool required) {
  const auto text = read_h5_meta(path, name);
  const std::string source = path + ":/meta/" + name;
  if (!text) {
    if (!required) return json();
    raise(Err::ConfigInvalid, path + " holds no /meta/" + name,
          "Convert the model again with `qmpi convert` (it stores " + name + ").");
  }
  try {
    return json::parse(*text);
  } catch (const json::exception& e) {
    raise(Err::ConfigInvalid, source + " is not valid JSON (" + e.what() + ")");
  }
}

MoeConfig parse_moe(const json& j, int64_t num_layers, bool shared_expert,
                    const std::string& source) {
  MoeConfig m;
  m.num_experts = positive_int(j, "num_experts", source);
  m.experts_per_token = positive_int(j, "num_experts_per_tok", source);
  m.intermediate_size = positive_int(j, "moe_intermediate_size", source);
  if (shared_expert)
    m.shared_intermediate_size = positive_int(j, "shared_expert_intermediate_size", source);
  m.norm_topk_prob = optional<bool>(j, "norm_topk_prob", false, source);
  m.decoder_sparse_step = optional<int64_t>(j, "decoder_sparse_step", 1, source);
  m.mlp_only_layers = optional<std::vector<int64_t>>(j, "mlp_only_layers", {}, source);
  if (m.experts_per_token > m.num_experts)
    raise(Err::ConfigInvalid, source + ": num_experts_per_tok " +
                                  std::to_string(m.experts_per_token) + " exceeds num_experts " +
                                  std::to_string(m.num_experts));
  if (m.decoder_sparse_step < 1)
    raise(Err::ConfigInvalid, source + ": decoder_sparse_step must be at least 1, got " +
                                  std::to_string(m.decoder_sparse_step));
  for (int64_t l : m.mlp_only_layers)
    if (l < 0 || l >= num_layers)
      raise(Err::ConfigInvalid, source + ": mlp_only_layers lists layer " + std::to_string(l) +
                                    " of a " + std::to_string(num_layers) + "-layer model");
  return m;
}

// Where the rotary base and scaling are: transformers 5 writes both as one "rope_parameters"
// object ({"rope_type": "yarn", "rope_theta": ..., "factor": ...}, rope_type "default" when
// unscaled); earlier versions wrote "rope_theta" and "rope_scaling" beside the other keys.
struct RopeJson {
  json theta_holder;  // the object that holds "rope_theta"
  json scaling;       // rope_scaling's form: null, or an object with rope_type and its fields
};

RopeJson rope_json(const json& j, const std::string& source) {
  const auto params = j.find("rope_parameters");
  if (params == j.end() || params->is_null()) return {j, j.value("rope_scaling", json())};
  if (!params->is_object())
    raise(Err::ConfigInvalid,
          source + ": \"rope_parameters\" must be an object, got " + params->dump());
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null() && j["rope_scaling"] != *params)
    raise(Err::ConfigInvalid,
          source + ": both \"rope_parameters\" and \"rope_scaling\" are set, and they differ",
          "Keep one of them (transformers 5 writes rope_parameters).");
  RopeJson r{params->contains("rope_theta") ? *params : j, *params};
  r.scaling.erase("rope_theta");
  return r;
}

}  // namespace

bool ModelConfig::is_moe_layer(int64_t layer) const {
  if (moe.num_experts == 0) return false;
  for (int64_t l : moe.mlp_only_layers)
    if (l == layer) return false;
  return (layer + 1) % moe.decoder_sparse_step == 0;
}

ModelConfig ModelConfig::from_json(const json& j, const std::string& source) {
  if (!j.is_object()) raise(Err::ConfigInvalid, source + " is not a JSON object");
  ModelConfig c;
  const json& archs = require(j, "architectures", source);
  if (!archs.is_array() || archs.empty() || !archs[0].is_string())
    raise(Err::ConfigInvalid,
          source + ": \"architectures\" must be a list of names, got " + archs.dump());
  c.architecture = archs[0].get<std::string>();
  const ArchTraits* traits = nullptr;
  for (const auto& a : kArchs)
    if (c.architecture == a.name) traits = &a;
  if (!traits)
    raise(Err::ArchUnsupported, source + ": architecture not supported yet: " + c.architecture +
                                    " (qmpi runs " + supported_arch_list() + ")");
  c.model_type = optional<std::string>(j, "model_type", "qwen2", source);

  c.hidden_size = positive_int(j, "hidden_size", source);
  c.num_layers = positive_int(j, "num_hidden_layers", source);
  c.num_heads = positive_int(j, "num_attention_heads", source);
  c.num_kv_heads = positive_int(j, "num_key_value_heads", source);
  c.intermediate_size = positive_int(j, "intermediate_size", source);
  c.vocab_size = positive_int(j, "vocab_size", source);
  c.max_position_embeddings = positive_int(j, "max_position_embeddings", source);
  const RopeJson rope = rope_json(j, source);
  c.rope_theta = positive_number(rope.theta_holder, "rope_theta", source);
  c.rms_norm_eps = positive_number(j, "rms_norm_eps", source);
  if (j.contains("head_dim") && !j["head_dim"].is_null()) {
    c.head_dim = positive_int(j, "head_dim", source);
  } else {
    if (c.hidden_size % c.num_heads != 0)
      raise(Err::ConfigInvalid, source + ": hidden_size " + std::to_string(c.hidden_size) +
                                    " is not divisible by num_attention_heads " +
                                    std::to_string(c.num_heads));
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0)
    raise(Err::ConfigInvalid, source + ": head_dim " + std::to_string(c.head_dim) +
                                  " is odd, but rotary embeddings pair its halves");
  if (c.num_heads % c.num_kv_heads != 0)
    raise(Err::ConfigInvalid, source + ": num_attention_heads " + std::to_string(c.num_heads) +
                                  " is not a multiple of num_key_value_heads " +
                                  std::to_string(c.num_kv_heads));

  const auto act = optional<std::string>(j, "hidden_act", "silu", source);
  if (act != "silu")
    raise(Err::ArchUnsupported, source + ": not supported yet: hidden_act \"" + act + "\"");
  if (optional<bool>(j, "use_sliding_window", false, source))
    raise(Err::ArchUnsupported,
          source + ": not supported yet: use_sliding_window true (qmpi uses full attention)");
  c.rope_scaling = RopeScaling::parse(rope.scaling, c.max_position_embeddings, source);

  c.tie_word_embeddings = optional<bool>(j, "tie_word_embeddings", false, source);
  // Qwen2 has q/k/v biases without a flag; Qwen2-MoE stores qkv_bias, Qwen3 attention_bias
  // (which would also bias o_proj: no release sets it, so it is refused rather than half-done).
  c.qk_norm = traits->qk_norm;
  if (c.qk_norm) {
    c.qkv_bias = false;
    if (optional<bool>(j, "attention_bias", false, source))
      raise(Err::ArchUnsupported, source + ": not supported yet: attention_bias true");
  } else {
    c.qkv_bias = traits->moe ? optional<bool>(j, "qkv_bias", true, source) : true;
  }
  if (traits->moe) c.moe = parse_moe(j, c.num_layers, traits->shared_expert, source);
  c.torch_dtype = parse_torch_dtype(j, source);
  c.bos_token_id = optional<int64_t>(j, "bos_token_id", -1, source);
  c.eos_token_ids = token_ids(j.value("eos_token_id", json()), "eos_token_id", source);
  c.quant = parse_quant_config(j, source);
  // Quantized experts (int4 or FP8) are whole projections that load like any other; the routers
  // (mlp.gate, shared_expert_gate) stay in float.
  check_quant_widths(c.quant, c.hidden_size, c.q_width(), c.kv_width(), c.intermediate_size, source,
                     c.moe.intermediate_size, c.moe.shared_intermediate_size);
  check_config_bounds(c, source);
  c.raw = j;
  return c;
}

ModelConfig ModelConfig::load(const std::string& model_path, const ConfigOverrides& overrides) {
  const fs::path p(model_path);
  // A message about an overridden value names the options beside the file.
  const std::string changed = overrides.empty() ? "" : " (with --hf-overrides/--rope-scaling)";
  if (is_h5_path(model_path))
    return from_json(overrides.apply(read_h5_json(model_path, "config.json", true)),
                     model_path + ":/meta/config.json" + changed);
  if (!fs::exists(p)) raise(Err::ModelDirMissing, "model path " + model_path + " does not exist");
  if (is_gguf_path(model_path)) {
    const GgufWeights model(model_path);
    ModelConfig c = from_json(overrides.apply(gguf_config_json(model)),
                              model_path + " (GGUF metadata)" + changed);
    c.quant = gguf_quant_config(model);
    return c;
  }
  // A folder holds config.json; a .json file is taken as the config itself (--model-config).
  const fs::path file = fs::is_directory(p) ? p / "config.json" : p;
  if (!fs::exists(file))
    raise(Err::ConfigInvalid, model_path + " has no config.json",
          "Copy config.json from the model's repository into " + model_path + ".");
  return from_json(overrides.apply(read_json_file(file)), file.string() + changed);
}

namespace {

// A sparse block's tensors under `p` ("model.layers.3.mlp."), facts §2d.
void append_moe_tensors(const ModelConfig& cfg, const std::string& p, std::vector<TensorSpec>& t) {
  const int64_t h = cfg.hidden_size, im = cfg.moe.intermediate_size;
  t.push_back({p + "gate.weight", {cfg.moe.num_experts, h}});
  for (int64_t e = 0; e < cfg.moe.num_experts; ++e) {
    const std::string x = p + "experts." + std::to_string(e) + ".";
    t.push_back({x + "gate_proj.weight", {im, h}});
    t.push_back({x + "up_proj.weight", {im, h}});
    t.push_back({x + "down_proj.weight", {h, im}});
  }
  if (const int64_t s = cfg.moe.shared_intermediate_size; s > 0) {
    t.push_back({p + "shared_expert.gate_proj.weight", {s, h}});
    t.push_back({p + "shared_expert.up_proj.weight", {s, h}});
    t.push_back({p + "shared_expert.down_proj.weight", {h, s}});
    t.push_back({p + "shared_expert_gate.weight", {1, h}});
  }
}

}  // namespace

std::vector<TensorSpec> expected_tensors(const ModelConfig& cfg) {
  const int64_t h = cfg.hidden_size, q = cfg.q_width(), kv = cfg.kv_width();
  const int64_t inter = cfg.intermediate_size, d = cfg.head_dim;
  std::vector<TensorSpec> t;
  t.push_back({"model.embed_tokens.weight", {cfg.vocab_size, h}});
  for (int64_t i = 0; i < cfg.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t.push_back({p + "self_attn.q_proj.weight", {q, h}});
    if (cfg.qkv_bias) t.push_back({p + "self_attn.q_proj.bias", {q}});
    t.push_back({p + "self_attn.k_proj.weight", {kv, h}});
    if (cfg.qkv_bias) t.push_back({p + "self_attn.k_proj.bias", {kv}});
    t.push_back({p + "self_attn.v_proj.weight", {kv, h}});
    if (cfg.qkv_bias) t.push_back({p + "self_attn.v_proj.bias", {kv}});
    t.push_back({p + "self_attn.o_proj.weight", {h, q}});
    if (cfg.qk_norm) {
      t.push_back({p + "self_attn.q_norm.weight", {d}});
      t.push_back({p + "self_attn.k_norm.weight", {d}});
    }
    if (cfg.is_moe_layer(i)) {
      append_moe_tensors(cfg, p + "mlp.", t);
    } else {
      t.push_back({p + "mlp.gate_proj.weight", {inter, h}});
      t.push_back({p + "mlp.up_proj.weight", {inter, h}});
      t.push_back({p + "mlp.down_proj.weight", {h, inter}});
    }
    t.push_back({p + "input_layernorm.weight", {h}});
    t.push_back({p + "post_attention_layernorm.weight", {h}});
  }
  t.push_back({"model.norm.weight", {h}});
  if (!cfg.tie_word_embeddings) t.push_back({"lm_head.weight", {cfg.vocab_size, h}});
  return t;
}

GenerationConfig GenerationConfig::load(const std::string& model_path, const ModelConfig& config) {
  GenerationConfig g;
  g.eos_token_ids = config.eos_token_ids;
  const fs::path p(model_path);
  json j;
  std::string source;
  if (is_h5_path(model_path)) {
    j = read_h5_json(model_path, "generation_config.json", false);
    source = model_path + ":/meta/generation_config.json";
    if (j.is_null()) return g;
  } else {
    const fs::path file = p / "generation_config.json";
    if (!fs::is_directory(p) || !fs::exists(file)) return g;
    j = read_json_file(file);
    source = file.string();
  }
  if (!j.is_object()) raise(Err::ConfigInvalid, source + " is not a JSON object");
  g.temperature = optional<double>(j, "temperature", g.temperature, source);
  g.top_p = optional<double>(j, "top_p", g.top_p, source);
  g.top_k = optional<int64_t>(j, "top_k", g.top_k, source);
  g.repetition_penalty = optional<double>(j, "repetition_penalty", g.repetition_penalty, source);
  g.do_sample = optional<bool>(j, "do_sample", g.do_sample, source);
  if (auto ids = token_ids(j.value("eos_token_id", json()), "eos_token_id", source); !ids.empty())
    g.eos_token_ids = std::move(ids);
  return g;
}

}  // namespace qmpi
