#include "model/int4_tensors.h"

#include <string_view>

#include "model/fp8_weight.h"

namespace qmpi {

bool is_quantized_projection(const std::string& name) {
  // q/k/v/o_proj and gate/up/down_proj of the dense MLP, every expert and the shared expert;
  // not the MoE routers (mlp.gate, mlp.shared_expert_gate).
  return name.starts_with("model.layers.") && name.ends_with("_proj.weight");
}

std::vector<CheckpointTensorSpec> checkpoint_tensors(const ModelConfig& cfg) {
  std::vector<CheckpointTensorSpec> out;
  const bool awq = cfg.quant.method == QuantMethod::Awq;
  for (const TensorSpec& t : expected_tensors(cfg)) {
    if (cfg.quant.fp8() && is_quantized_projection(t.name)) {
      const int64_t N = t.shape[0], K = t.shape[1], bn = cfg.quant.block_n, bk = cfg.quant.block_k;
      out.push_back({t.name, t.shape, DType::F8_E4M3});
      out.push_back({fp8_scale_name(t.name), {(N + bn - 1) / bn, (K + bk - 1) / bk}, DType::F32});
      continue;
    }
    if (!cfg.quant.int4() || !is_quantized_projection(t.name)) {
      out.push_back({t.name, t.shape, std::nullopt});
      continue;
    }
    const std::string p = t.name.substr(0, t.name.size() - std::string_view("weight").size());
    const int64_t N = t.shape[0], K = t.shape[1], G = cfg.quant.groups(K);
    out.push_back({p + "qweight",
                   awq ? std::vector<int64_t>{K, N / 8} : std::vector<int64_t>{K / 8, N},
                   DType::I32});
    out.push_back({p + "qzeros", {G, N / 8}, DType::I32});
    out.push_back({p + "scales", {G, N}, DType::F16});
    if (!awq) out.push_back({p + "g_idx", {K}, DType::I32});
  }
  return out;
}

}  // namespace qmpi
