#include "model/config_bounds.h"

#include <cstdint>

#include "core/errors.h"
#include "io/safetensors.h"

namespace qmpi {
namespace {

// Released Qwen models reach hidden 8192, 94 layers, 128 experts, a 152k vocabulary; these
// leave room for far larger ones while keeping every count and width an int32 the kernels and
// the planner can multiply without overflow.
struct Bound {
  const char* key;
  int64_t value;
  int64_t max;
};

void check(const Bound& b, const std::string& source) {
  if (b.value > b.max)
    raise(Err::ConfigInvalid,
          source + ": \"" + b.key + "\" is " + std::to_string(b.value) + ", above the " +
              std::to_string(b.max) + " qmpi accepts (no released model comes near it)",
          "Restore " + std::string(b.key) + " from the model's original config.json.");
}

}  // namespace

void check_config_bounds(const ModelConfig& c, const std::string& source) {
  const Bound bounds[] = {
      {"hidden_size", c.hidden_size, int64_t(1) << 16},
      {"num_hidden_layers", c.num_layers, 1024},
      {"num_attention_heads", c.num_heads, 1024},
      {"num_key_value_heads", c.num_kv_heads, 1024},
      {"head_dim", c.head_dim, 1024},
      {"intermediate_size", c.intermediate_size, int64_t(1) << 20},
      {"vocab_size", c.vocab_size, int64_t(1) << 24},
      {"max_position_embeddings", c.max_position_embeddings, int64_t(1) << 30},
      {"num_experts", c.moe.num_experts, 4096},
      {"moe_intermediate_size", c.moe.intermediate_size, int64_t(1) << 20},
      {"shared_expert_intermediate_size", c.moe.shared_intermediate_size, int64_t(1) << 20},
      {"decoder_sparse_step", c.moe.decoder_sparse_step, 1024},
      {"mlp_only_layers (entries)", int64_t(c.moe.mlp_only_layers.size()), c.num_layers},
      {"quantization_config group_size", c.quant.group_size, int64_t(1) << 16},
  };
  for (const Bound& b : bounds) check(b, source);
  // Every expert of every layer is a tensor to list, plan and load.
  if (c.moe.num_experts * c.num_layers > (int64_t(1) << 17))
    raise(Err::ConfigInvalid,
          source + ": " + std::to_string(c.num_layers) + " layers of " +
              std::to_string(c.moe.num_experts) + " experts are " +
              std::to_string(c.moe.num_experts * c.num_layers) +
              " experts in all, above the 131072 qmpi accepts",
          "Restore num_hidden_layers and num_experts from the model's original config.json.");
}

void confirm_config_with_weights(const ModelConfig& c, const WeightSource& src) {
  const std::string embed = "model.embed_tokens.weight";
  const TensorInfo& e = src.info(embed);
  if (e.shape != std::vector<int64_t>{c.vocab_size, c.hidden_size})
    raise(Err::TensorShapeMismatch,
          "tensor " + embed + " in " + e.file + " has shape " + shape_string(e.shape) +
              " but config.json says vocab_size " + std::to_string(c.vocab_size) +
              " and hidden_size " + std::to_string(c.hidden_size));
  auto layer = [](int64_t i) {
    return "model.layers." + std::to_string(i) + ".input_layernorm.weight";
  };
  if (!src.has(layer(c.num_layers - 1)))
    raise(Err::TensorMissing, "config.json says num_hidden_layers " + std::to_string(c.num_layers) +
                                  ", but the checkpoint has no " + layer(c.num_layers - 1));
  if (src.has(layer(c.num_layers)))
    raise(Err::ConfigInvalid,
          "config.json says num_hidden_layers " + std::to_string(c.num_layers) +
              ", but the checkpoint holds " + layer(c.num_layers) + " too",
          "Restore num_hidden_layers from the model's original config.json.");
  for (int64_t i = 0; i < c.num_layers; ++i) {
    if (!c.is_moe_layer(i)) continue;
    // An int4 checkpoint stores each projection as qweight (with qzeros and scales).
    const char* packed = c.quant.int4() ? ".gate_proj.qweight" : ".gate_proj.weight";
    auto expert = [&](int64_t x) {
      return "model.layers." + std::to_string(i) + ".mlp.experts." + std::to_string(x) + packed;
    };
    if (!src.has(expert(c.moe.num_experts - 1)))
      raise(Err::TensorMissing, "config.json says num_experts " +
                                    std::to_string(c.moe.num_experts) +
                                    ", but the checkpoint has no " + expert(c.moe.num_experts - 1));
    if (src.has(expert(c.moe.num_experts)))
      raise(Err::ConfigInvalid,
            "config.json says num_experts " + std::to_string(c.moe.num_experts) +
                ", but the checkpoint holds " + expert(c.moe.num_experts) + " too",
            "Restore num_experts from the model's original config.json.");
    break;  // every sparse layer has the same experts; the loader checks each tensor
  }
}

}  // namespace qmpi
