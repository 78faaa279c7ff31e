#include "plan/memory_model.h"

#include <algorithm>

#include "core/errors.h"
#include "engine/kv_sizing.h"
#include "io/weight_source.h"
#include "kernels/kv_dtype.h"
#include "model/lora_config.h"

namespace qmpi {
namespace {

// Decoder linears are what AWQ/GPTQ quantize; embeddings, lm_head, norms and biases stay fp16.
bool is_quantized_linear(const std::string& name) {
  return name.starts_with("model.layers.") && name.ends_with("_proj.weight");
}

DType tensor_dtype(const ModelConfig& cfg, const PlanInputs& in, const std::string& name) {
  auto it = in.tensor_dtypes.find(name);
  return it != in.tensor_dtypes.end() ? it->second : cfg.torch_dtype;
}

uint64_t activation_bytes(const ModelConfig& cfg, const ShardPlan& plan, const PlanInputs& in) {
  const ProfileShape step = profile_shape(in.max_step_tokens, resolved_max_model_len(cfg, in),
                                          in.max_num_seqs, in.speculative_tokens);
  const uint64_t T = uint64_t(step.tokens);
  const uint64_t h = uint64_t(cfg.hidden_size);
  const uint64_t q = uint64_t(plan.q_heads.size() * cfg.head_dim);
  const uint64_t kv = uint64_t(plan.kv_heads.size() * cfg.head_dim);
  const uint64_t im = uint64_t(plan.intermediate.size());
  uint64_t floats = T * (3 * h + 2 * q + 2 * kv + 2 * im);
  if (cfg.moe.num_experts > 0) {
    const uint64_t moe_im = uint64_t(cfg.moe.intermediate_size);
    const uint64_t shared = uint64_t(plan.shared_intermediate.size());
    floats += T * (uint64_t(cfg.moe.num_experts) + 2 * h + 2 * moe_im);
    if (shared > 0) floats += T * (h + 2 * shared);
  }
  if (plan.last_stage) {
    const uint64_t R = uint64_t(step.logit_rows);
    const uint64_t per_rank = uint64_t(plan.max_vocab_rows(cfg));
    floats += R * (h + per_rank * (1 + uint64_t(plan.tp)) + 2 * uint64_t(cfg.vocab_size));
  }
  return floats * sizeof(float);
}

}  // namespace

int64_t resolved_max_model_len(const ModelConfig& cfg, const PlanInputs& in) {
  return in.max_model_len > 0 ? in.max_model_len : cfg.derived_max_model_len();
}

int64_t sequence_kv_tokens(const ModelConfig& cfg, const PlanInputs& in) {
  const int bs = std::max(in.block_size, 1);
  return blocks_for_sequences(1, resolved_max_model_len(cfg, in), bs) * bs;
}

bool kv_cache_fixed(const PlanInputs& in) {
  return in.kv_blocks > 0;
}

int64_t kv_cache_tokens(const ModelConfig& cfg, const PlanInputs& in) {
  if (in.kv_blocks > 0) return in.kv_blocks * std::max(in.block_size, 1);
  return sequence_kv_tokens(cfg, in);
}

uint64_t kv_bytes_per_token(const ModelConfig& cfg, int64_t layers, int64_t kv_heads,
                            DType kv_dtype) {
  return 2ull * uint64_t(layers) * uint64_t(kv_heads) * kv_vector_bytes(kv_dtype, cfg.head_dim);
}

uint64_t kv_bytes_per_token(const ModelConfig& cfg, DType kv_dtype) {
  return kv_bytes_per_token(cfg, cfg.num_layers, cfg.num_kv_heads, kv_dtype);
}

uint64_t runtime_overhead(BackendKind backend) {
  return backend == BackendKind::Cuda ? kRuntimeOverheadCuda : kRuntimeOverheadCpu;
}

int ranks_per_host(const PlanInputs& in, int ranks) {
  const int nodes = std::max(in.nodes, 1);
  const int per_host = (std::max(in.gpus, 1) + nodes - 1) / nodes;
  return std::min(per_host, ranks);
}

uint64_t rank_budget(const PlanInputs& in, int ranks) {
  if (in.backend == BackendKind::Cuda) return uint64_t(double(in.gpu_mem) * in.gpu_util);
  return in.host_mem / uint64_t(std::max(ranks_per_host(in, ranks), 1));
}

uint64_t tensor_bytes(const ModelConfig& cfg, const PlanInputs& in, const std::string& tensor,
                      int64_t numel, bool cuts_blocks) {
  const uint64_t n = uint64_t(numel);
  if (auto it = in.tensor_blocks.find(tensor); it != in.tensor_blocks.end()) {
    // GGUF blocks as model/ggml_weight.h holds them (the embedding too: model/decoder_weights.cpp).
    if (cuts_blocks) return n * sizeof(float);
    return uint64_t(ggml_bytes(*it->second, numel));
  }
  if (cfg.quant.fp8() && is_quantized_linear(tensor)) {
    // A byte per e4m3 weight and a float32 scale per block (a TP slice that starts inside a
    // block holds one more row or column of scales; the estimate rounds up by one block).
    const uint64_t block = uint64_t(cfg.quant.block_n * cfg.quant.block_k);
    return n + (n / block + 1) * sizeof(float);
  }
  if (cfg.quant.int4() && is_quantized_linear(tensor)) {
    // An int4 checkpoint as the engine holds it (model/int4_weight.h): half a byte per weight,
    // and per group of inputs an fp16 scale and a one-byte zero point per output.
    const uint64_t gs = cfg.quant.group_size > 0 ? uint64_t(cfg.quant.group_size) : 0;
    return n / 2 + (gs ? n * 3 / gs : 0);
  }
  if (!in.int4_weights) return n * dtype_size(tensor_dtype(cfg, in, tensor));
  if (is_quantized_linear(tensor)) return n * kInt4BytesNum / kInt4BytesDen;
  return n * 2;
}

namespace {

// True when `slice` cuts a GGUF block of `t` along its columns (see model/ggml_weight.h).
bool cuts_blocks(const PlanInputs& in, const TensorSpec& t, const Slice& slice) {
  auto it = in.tensor_blocks.find(t.name);
  if (it == in.tensor_blocks.end() || slice.length < 0 || size_t(slice.dim) + 1 < t.shape.size())
    return false;
  const int64_t blk = it->second->block_elems, end = slice.start + slice.length;
  return slice.start % blk != 0 || (end % blk != 0 && end != t.shape.back());
}

}  // namespace

RankMemory rank_memory(const ModelConfig& cfg, const ShardPlan& plan, const PlanInputs& in,
                       const std::vector<TensorSpec>& tensors) {
  RankMemory m;
  m.stage = plan.stage;
  m.tp_rank = plan.tp_rank;
  m.rank = plan.stage * plan.tp + plan.tp_rank;
  m.layers = plan.layers;
  m.kv_heads = plan.kv_heads.size();
  for (const auto& t : tensors) {
    const auto slice = plan.slice_for(cfg, t.name);
    if (!slice) continue;
    const uint64_t bytes =
        tensor_bytes(cfg, in, t.name, slice_numel(t.shape, *slice), cuts_blocks(in, t, *slice));
    m.weights += bytes;
    if (t.name.find(".mlp.experts.") != std::string::npos) m.expert_weights += bytes;
  }
  m.lora_weights = lora_weight_bytes(cfg, plan, in);
  m.weights += m.lora_weights;
  m.kv_per_token =
      kv_bytes_per_token(cfg, plan.layers.size(), int64_t(plan.kv_heads.size()), in.kv_dtype);
  if (m.rank == 0) {
    m.draft_weights = in.draft_weights;
    m.weights += in.draft_weights;
    m.kv_per_token += in.draft_kv_per_token;
  }
  m.kv_cache = m.kv_per_token * uint64_t(kv_cache_tokens(cfg, in));
  m.activations = activation_bytes(cfg, plan, in);
  m.overhead = runtime_overhead(in.backend);
  return m;
}

uint64_t model_weight_bytes(const ModelConfig& cfg, const PlanInputs& in) {
  uint64_t total = 0;
  for (const auto& t : expected_tensors(cfg))
    total += tensor_bytes(cfg, in, t.name, slice_numel(t.shape, Slice::whole()));
  return total;
}

uint64_t lora_weight_bytes(const ModelConfig& cfg, const ShardPlan& plan, const PlanInputs& in) {
  if (in.max_loras <= 0 || in.max_lora_rank <= 0) return 0;
  uint64_t elements_at[2] = {0, 0};  // [0]: held in float32, [1]: in bf16
  for (int64_t layer = plan.layers.begin; layer < plan.layers.end; ++layer)
    for (std::string_view module : kLoraModules) {
      const LoraModuleShape s = lora_module_shape(cfg, module);
      if (std::string_view(s.block) == "mlp" && cfg.is_moe_layer(layer)) continue;
      const std::string base = "model.layers." + std::to_string(layer) + "." + s.block + "." +
                               std::string(module) + ".weight";
      const auto split = plan.slice_for(cfg, base);
      if (!split) continue;
      int64_t out = s.out, in_features = s.in;
      if (split->length >= 0) (split->dim == 0 ? out : in_features) = split->length;
      const bool bf16 = in.bf16_activations && !in.int4_weights && !cfg.quant &&
                        !in.tensor_blocks.count(base) && tensor_dtype(cfg, in, base) == DType::BF16;
      elements_at[bf16] += uint64_t(in_features + out);
    }
  const uint64_t slots = uint64_t(in.max_loras) * uint64_t(in.max_lora_rank);
  return slots * (elements_at[0] * sizeof(float) + elements_at[1] * 2);
}

uint64_t lora_weight_bytes(const ModelConfig& cfg, const PlanInputs& in) {
  return lora_weight_bytes(cfg, make_shard_plan(cfg, Layout{1, 1, {}}, 0), in);
}

}  // namespace qmpi
