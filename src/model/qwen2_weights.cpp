#include "model/qwen2_weights.h"

#include <string>

#include "core/errors.h"

namespace qmpi {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

class Loader {
 public:
  Loader(const ModelConfig& cfg, const ShardPlan& plan, WeightSource& src, Backend& be)
      : cfg_(cfg), plan_(plan), src_(src), be_(be) {}

  // Loads `name` (whose full shape must be `shape`) sliced per the shard plan.
  Weight load(const std::string& name, const std::vector<int64_t>& shape) {
    const TensorInfo& info = src_.info(name);
    if (!is_float_weight(info.dtype))
      raise(Err::DTypeUnsupported, "tensor " + name + " in " + info.file + " has dtype " +
                                       std::string(dtype_name(info.dtype)) +
                                       "; qmpi computes from F32, F16 or BF16 weights");
    if (info.shape != shape)
      raise(Err::TensorShapeMismatch, "tensor " + name + " in " + info.file + " has shape " +
                                          shape_str(info.shape) + " but config.json implies " +
                                          shape_str(shape));
    auto slice = plan_.slice_for(cfg_, name);
    if (!slice) raise(Err::Internal, "shard plan does not assign " + name + " to this rank");
    int64_t rows = shape.size() == 2 ? shape[0] : 1;
    int64_t cols = shape.size() == 2 ? shape[1] : shape[0];
    if (slice->length >= 0) {
      if (shape.size() == 1 || slice->dim == 1)
        cols = slice->length;
      else
        rows = slice->length;
    }
    Weight w =
        be_.make_weight(info.dtype, rows, cols, [&](void* dst) { src_.read(name, *slice, dst); });
    bytes_ += uint64_t(rows * cols) * dtype_size(info.dtype);
    return w;
  }

  uint64_t bytes() const { return bytes_; }

 private:
  const ModelConfig& cfg_;
  const ShardPlan& plan_;
  WeightSource& src_;
  Backend& be_;
  uint64_t bytes_ = 0;
};

}  // namespace

Qwen2Weights load_qwen2_weights(const ModelConfig& cfg, const ShardPlan& plan, WeightSource& source,
                                Backend& backend) {
  Loader ld(cfg, plan, source, backend);
  Qwen2Weights w;
  const int64_t h = cfg.hidden_size, q = cfg.q_width(), kv = cfg.kv_width(),
                im = cfg.intermediate_size, V = cfg.vocab_size;
  if (plan.first_stage) w.embedding = ld.load("model.embed_tokens.weight", {V, h});
  for (int64_t i = plan.layers.begin; i < plan.layers.end; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    Qwen2LayerWeights L;
    L.input_norm = ld.load(p + "input_layernorm.weight", {h});
    L.q = ld.load(p + "self_attn.q_proj.weight", {q, h});
    L.k = ld.load(p + "self_attn.k_proj.weight", {kv, h});
    L.v = ld.load(p + "self_attn.v_proj.weight", {kv, h});
    if (cfg.qkv_bias) {
      L.q_bias = ld.load(p + "self_attn.q_proj.bias", {q});
      L.k_bias = ld.load(p + "self_attn.k_proj.bias", {kv});
      L.v_bias = ld.load(p + "self_attn.v_proj.bias", {kv});
    }
    L.o = ld.load(p + "self_attn.o_proj.weight", {h, q});
    L.post_norm = ld.load(p + "post_attention_layernorm.weight", {h});
    L.gate = ld.load(p + "mlp.gate_proj.weight", {im, h});
    L.up = ld.load(p + "mlp.up_proj.weight", {im, h});
    L.down = ld.load(p + "mlp.down_proj.weight", {h, im});
    w.layers.push_back(std::move(L));
  }
  if (plan.last_stage) {
    w.final_norm = ld.load("model.norm.weight", {h});
    // Tied checkpoints usually omit lm_head.weight; some still carry a copy. Either way the
    // tied model's head is the embedding matrix, held once when this rank also embeds.
    if (cfg.tie_word_embeddings && !plan.first_stage)
      w.lm_head = ld.load("model.embed_tokens.weight", {V, h});
    else if (!cfg.tie_word_embeddings)
      w.lm_head = ld.load("lm_head.weight", {V, h});
  }
  w.bytes = ld.bytes();
  return w;
}

}  // namespace qmpi
