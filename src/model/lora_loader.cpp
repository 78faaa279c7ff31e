#include "model/lora_loader.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <string_view>
#include <vector>

#include "core/errors.h"
#include "io/checkpoint_dir.h"
#include "io/safetensors.h"

namespace qmpi {
namespace {

constexpr std::string_view kPeftPrefix = "base_model.model.model.layers.";

Linear& module_linear(LayerWeights& L, std::string_view m) {
  if (m == "q_proj") return L.attn.q;
  if (m == "k_proj") return L.attn.k;
  if (m == "v_proj") return L.attn.v;
  if (m == "o_proj") return L.attn.o;
  if (m == "gate_proj") return L.mlp.gate;
  if (m == "up_proj") return L.mlp.up;
  return L.mlp.down;
}

// The two halves of one adapted projection.
struct Pair {
  const TensorInfo* a = nullptr;
  const TensorInfo* b = nullptr;
};
using PairKey = std::pair<int64_t, std::string>;  // (layer, module)

// "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight" -> (3, q_proj, A), checking
// the module against the config and the adapter's target_modules.
void add_tensor(const ModelConfig& cfg, const LoraAdapterConfig& ac, const TensorInfo& t,
                const std::string& where, std::map<PairKey, Pair>& pairs) {
  const auto unknown = [&](const std::string& why) {
    raise(Err::LoraModuleUnknown, where + ": tensor " + t.name + " " + why);
  };
  std::string_view rest = t.name;
  if (!rest.starts_with(kPeftPrefix)) unknown("is not a decoder layer's lora_A / lora_B weight");
  rest.remove_prefix(kPeftPrefix.size());
  int64_t layer = -1;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), layer);
  if (ec != std::errc() || end == rest.data() || *end != '.')
    unknown("is not a decoder layer's lora_A / lora_B weight");
  rest.remove_prefix(size_t(end - rest.data()) + 1);
  const size_t dot1 = rest.find('.');
  const size_t dot2 = dot1 == std::string_view::npos ? dot1 : rest.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos) unknown("is not a decoder layer's lora_A / lora_B weight");
  const std::string_view block = rest.substr(0, dot1);
  const std::string module(rest.substr(dot1 + 1, dot2 - dot1 - 1));
  const std::string_view half = rest.substr(dot2 + 1);
  if (half != "lora_A.weight" && half != "lora_B.weight")
    unknown(
        "is not a lora_A.weight or lora_B.weight (embedding or magnitude vectors are not "
        "supported)");
  if (std::find(kLoraModules.begin(), kLoraModules.end(), module) == kLoraModules.end())
    unknown("adapts " + std::string(block) + "." + module + ", not a decoder projection");
  if (block != lora_module_shape(cfg, module).block)
    unknown("puts " + module + " under " + std::string(block));
  if (layer >= cfg.num_layers)
    unknown("is for layer " + std::to_string(layer) + ", but the base model has " +
            std::to_string(cfg.num_layers) + " layers");
  if (block == "mlp" && cfg.is_moe_layer(layer))
    unknown("adapts the MLP of layer " + std::to_string(layer) +
            ", a MoE layer (LoRA on experts is not supported)");
  if (!ac.targets_module(module))
    unknown("adapts " + module + ", which target_modules does not name");
  Pair& p = pairs[{layer, module}];
  (half == "lora_A.weight" ? p.a : p.b) = &t;
}

void check_pair(const ModelConfig& cfg, const LoraAdapterConfig& ac, const PairKey& key,
                const Pair& p, const std::string& where) {
  const std::string name = "layer " + std::to_string(key.first) + " " + key.second;
  if (!p.a || !p.b)
    raise(Err::LoraShapeMismatch, where + ": " + name + " has lora_" + (p.a ? "A" : "B") +
                                      " but no lora_" + (p.a ? "B" : "A"));
  const LoraModuleShape s = lora_module_shape(cfg, key.second);
  const std::vector<int64_t> want_a{ac.r, s.in}, want_b{s.out, ac.r};
  for (const auto& [t, want] : {std::pair{p.a, want_a}, std::pair{p.b, want_b}}) {
    if (!is_float_weight(t->dtype))
      raise(Err::LoraShapeMismatch, where + ": " + t->name + " has dtype " +
                                        std::string(dtype_name(t->dtype)) +
                                        ", not F32, F16 or BF16");
    if (t->shape != want)
      raise(Err::LoraShapeMismatch, where + ": " + t->name + " has shape " +
                                        shape_string(t->shape) + " but r " + std::to_string(ac.r) +
                                        " on the base model's " + key.second + " [" +
                                        std::to_string(s.out) + ", " + std::to_string(s.in) +
                                        "] needs " + shape_string(want));
  }
}

// `t`'s slice as a weight of dtype `held`: the file's dtype, or BF16 rounded from F32 / F16.
Weight upload(Backend& be, const SafetensorsFile& f, const TensorInfo& t, const Slice& slice,
              DType held, uint64_t& bytes) {
  int64_t rows = t.shape[0], cols = t.shape[1];
  if (slice.length >= 0) (slice.dim == 0 ? rows : cols) = slice.length;
  bytes += uint64_t(rows * cols) * dtype_size(held);
  return be.make_weight(held, rows, cols, [&](void* dst) {
    if (held == t.dtype) {
      copy_slice(f.data(t.name), t, slice, dst);
      return;
    }
    std::vector<uint8_t> raw(size_t(rows * cols) * dtype_size(t.dtype));
    copy_slice(f.data(t.name), t, slice, raw.data());
    auto* out = static_cast<uint16_t*>(dst);
    for (size_t i = 0; i < size_t(rows * cols); ++i) {
      float v;
      if (t.dtype == DType::F32) {
        std::memcpy(&v, raw.data() + 4 * i, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, raw.data() + 2 * i, 2);
        v = f16_to_f32(h);
      }
      out[i] = f32_to_bf16(v);
    }
  });
}

// The adapter's safetensors file; its header and truncation errors become the adapter's.
SafetensorsFile open_adapter_file(const std::string& path, const std::string& where) {
  try {
    return SafetensorsFile(path, Err::LoraAdapterUnreadable);
  } catch (const Error& e) {
    if (e.code() == Err::LoraAdapterUnreadable) throw;
    raise(Err::LoraAdapterUnreadable, where + ": " + e.message());
  }
}

}  // namespace

uint64_t load_lora_adapters(const ModelConfig& cfg, const ShardPlan& plan, const LoraOptions& opts,
                            Backend& be, DecoderWeights& w, bool bf16_activations) {
  uint64_t bytes = 0;
  for (size_t i = 0; i < opts.modules.size(); ++i) {
    const LoraModule& m = opts.modules[i];
    const std::string where = "LoRA adapter \"" + m.name + "\" (" + m.path + ")";
    const LoraAdapterConfig ac = read_lora_adapter_config(m.path);
    if (ac.r > opts.max_lora_rank)
      raise(Err::LoraRankTooLarge,
            where + " has rank r " + std::to_string(ac.r) + ", above --max-lora-rank " +
                std::to_string(opts.max_lora_rank),
            "Add --max-lora-rank " + std::to_string(ac.r) + ".");
    const std::string file = (std::filesystem::path(m.path) / "adapter_model.safetensors").string();
    const SafetensorsFile f = open_adapter_file(file, where);

    std::map<PairKey, Pair> pairs;
    for (const TensorInfo& t : f.tensors()) add_tensor(cfg, ac, t, where, pairs);
    if (pairs.empty())
      raise(Err::LoraAdapterUnreadable, where + ": " + file + " holds no lora_A / lora_B weights");
    for (const auto& [key, p] : pairs) check_pair(cfg, ac, key, p, where);

    for (const auto& [key, p] : pairs) {
      const auto [layer, module] = key;
      if (layer < plan.layers.begin || layer >= plan.layers.end) continue;
      const std::string base = "model.layers." + std::to_string(layer) + "." +
                               lora_module_shape(cfg, module).block + "." + module + ".weight";
      const auto split = plan.slice_for(cfg, base);
      if (!split) raise(Err::Internal, "shard plan does not assign " + base + " to this rank");
      // B follows a column-parallel projection's output rows, A a row-parallel one's input
      // columns; the other half is whole on every rank.
      const bool rows_split = split->dim == 0;
      Linear& lin = module_linear(w.layers[size_t(layer - plan.layers.begin)], module);
      const bool bf16 = bf16_activations && lin.weight && lin.weight.dtype == DType::BF16;
      LoraWeight lw;
      lw.a = upload(be, f, *p.a, rows_split ? Slice::whole() : *split,
                    bf16 ? DType::BF16 : p.a->dtype, bytes);
      lw.b = upload(be, f, *p.b, rows_split ? *split : Slice::whole(),
                    bf16 ? DType::BF16 : p.b->dtype, bytes);
      lw.scale = ac.scale();
      if (lin.lora.size() <= i) lin.lora.resize(i + 1);
      lin.lora[i] = std::move(lw);
    }
  }
  w.lora_adapters = int(opts.modules.size());
  return bytes;
}

}  // namespace qmpi
