#include "model/gguf_names.h"

#include <string_view>

#include "core/errors.h"

namespace qmpi {
namespace {

struct Rename {
  std::string_view gguf, hf;
};
// llama.cpp's names (gguf-py's tensor map) of the tensors outside the layers...
constexpr Rename kModel[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};
// ...and inside layer N (blk.N. / model.layers.N.).
constexpr Rename kLayer[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"ffn_gate_inp.weight", "mlp.gate.weight"},
    {"ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight"},
    {"ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight"},
    {"ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight"},
    {"ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight"},
};
// The experts of a sparse layer, stacked into one [experts, rows, cols] tensor each.
constexpr Rename kExperts[] = {
    {"ffn_gate_exps.weight", "gate_proj.weight"},
    {"ffn_up_exps.weight", "up_proj.weight"},
    {"ffn_down_exps.weight", "down_proj.weight"},
};

// "blk.12.attn_q.weight" -> 12, "attn_q.weight"; false for another name.
bool split_layer(std::string_view name, std::string_view prefix, std::string& layer,
                 std::string_view& rest) {
  if (!name.starts_with(prefix)) return false;
  name.remove_prefix(prefix.size());
  const size_t dot = name.find('.');
  if (dot == 0 || dot == std::string_view::npos) return false;
  for (char c : name.substr(0, dot))
    if (c < '0' || c > '9') return false;
  layer = std::string(name.substr(0, dot));
  rest = name.substr(dot + 1);
  return true;
}

// The name an expert's slab of a stacked tensor has: "GGUF_NAME#E" (no real tensor has '#').
std::string slab_name(const std::string& stacked, int64_t expert) {
  return stacked + "#" + std::to_string(expert);
}

}  // namespace

std::optional<std::string> gguf_tensor_name(const std::string& hf) {
  for (const Rename& r : kModel)
    if (hf == r.hf) return std::string(r.gguf);
  std::string layer;
  std::string_view rest;
  if (!split_layer(hf, "model.layers.", layer, rest)) return std::nullopt;
  for (const Rename& r : kLayer)
    if (rest == r.hf) return "blk." + layer + "." + std::string(r.gguf);
  constexpr std::string_view kExpert = "mlp.experts.";
  if (!rest.starts_with(kExpert)) return std::nullopt;
  std::string expert;
  std::string_view proj;
  if (!split_layer(rest, kExpert, expert, proj)) return std::nullopt;
  for (const Rename& r : kExperts)
    if (proj == r.hf)
      return slab_name("blk." + layer + "." + std::string(r.gguf), std::stoll(expert));
  return std::nullopt;
}

GgufNamedWeights::GgufNamedWeights(const std::string& path) : file_(path) {
  for (const std::string& g : file_.names()) {
    const TensorInfo& info = file_.info(g);
    std::string layer;
    std::string_view rest;
    auto add = [&](std::string hf, std::string gguf, TensorInfo i) {
      // llama.cpp stores Qwen2-MoE's shared-expert gate [1, hidden] as a vector.
      if (hf.ends_with("shared_expert_gate.weight") && i.shape.size() == 1)
        i.shape.insert(i.shape.begin(), 1);
      i.name = hf;
      order_.push_back(hf);
      to_gguf_[hf] = std::move(gguf);
      infos_[hf] = std::move(i);
    };
    bool named = false;
    for (const Rename& r : kModel)
      if (g == r.gguf) add(std::string(r.hf), g, info), named = true;
    if (!named && split_layer(g, "blk.", layer, rest)) {
      const std::string hf_layer = "model.layers." + layer + ".";
      for (const Rename& r : kLayer)
        if (rest == r.gguf) add(hf_layer + std::string(r.hf), g, info), named = true;
      for (const Rename& r : kExperts) {
        if (rest != r.gguf || info.shape.size() != 3) continue;
        TensorInfo slab = info;
        slab.shape.erase(slab.shape.begin());
        slab.nbytes = info.nbytes / uint64_t(info.shape[0]);
        for (int64_t e = 0; e < info.shape[0]; ++e)
          add(hf_layer + "mlp.experts." + std::to_string(e) + "." + std::string(r.hf),
              slab_name(g, e), slab);
        named = true;
      }
    }
    // Tensors qmpi has no use for keep their own name (confirm_config_with_weights and doctor
    // then see them as unexpected).
    if (!named) add(g, g, info);
  }
}

bool GgufNamedWeights::has(const std::string& name) const {
  return infos_.count(name) > 0;
}

const TensorInfo& GgufNamedWeights::info(const std::string& name) const {
  auto it = infos_.find(name);
  if (it == infos_.end()) {
    const auto g = gguf_tensor_name(name);
    raise(Err::TensorMissing, "tensor " + name + (g ? " (" + *g + ")" : std::string()) +
                                  " is not in " + file_.meta().path());
  }
  return it->second;
}

std::vector<std::string> GgufNamedWeights::names() const {
  return order_;
}

const std::string& GgufNamedWeights::gguf_name(const std::string& hf) const {
  info(hf);
  return to_gguf_.at(hf);
}

void GgufNamedWeights::read(const std::string& name, const Slice& slice, void* dst) {
  const std::string& g = gguf_name(name);
  const size_t hash = g.find('#');
  if (hash == std::string::npos) return file_.read(g, slice, dst);
  // An expert's slab: experts are held whole (model/shard_plan.h).
  if (slice.length >= 0)
    raise(Err::Internal, "a slice of the expert tensor " + name + " was requested");
  file_.read(g.substr(0, hash), Slice{0, std::stoll(g.substr(hash + 1)), 1}, dst);
}

std::unique_ptr<WeightSource> open_model_weights(const std::string& model_path,
                                                 bool verify_checksums) {
  if (is_gguf_path(model_path)) return std::make_unique<GgufNamedWeights>(model_path);
  return open_weight_source(model_path, verify_checksums);
}

}  // namespace qmpi
