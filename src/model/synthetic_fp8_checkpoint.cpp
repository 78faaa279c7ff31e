#include "model/synthetic_fp8_checkpoint.h"

#include <algorithm>
#include <cmath>

#include "core/dtype.h"
#include "model/config.h"
#include "model/fp8_weight.h"
#include "model/synthetic.h"
#include "model/synthetic_blobs.h"

namespace qmpi {
using nlohmann::json;

namespace {

constexpr int64_t kBlock = 128;

// One projection quantized as an FP8 checkpoint stores it: each block's scale is its largest
// |w| / 448 (e4m3's largest finite value), each weight e4m3(w / scale), rounded to nearest even.
struct Fp8Values {
  int64_t N = 0, K = 0, SN = 0, SK = 0;
  std::vector<uint8_t> q;    // [N, K]
  std::vector<float> scale;  // [SN, SK]
};

Fp8Values quantize(uint64_t seed, const TensorSpec& t) {
  Fp8Values v;
  v.N = t.shape[0];
  v.K = t.shape[1];
  v.SN = (v.N + kBlock - 1) / kBlock;
  v.SK = (v.K + kBlock - 1) / kBlock;
  const SyntheticTensor dense(seed, t.name, t.shape);
  std::vector<float> w(size_t(v.N * v.K));
  dense.fill(0, v.N * v.K, DType::F32, w.data());
  v.scale.assign(size_t(v.SN * v.SK), 0.0f);
  for (int64_t r = 0; r < v.N; ++r)
    for (int64_t c = 0; c < v.K; ++c) {
      float& s = v.scale[(r / kBlock) * v.SK + c / kBlock];
      s = std::max(s, std::fabs(w[r * v.K + c]));
    }
  for (float& s : v.scale) s = s > 0.0f ? s / kE4m3Max : 1.0f;
  v.q.resize(w.size());
  for (int64_t r = 0; r < v.N; ++r)
    for (int64_t c = 0; c < v.K; ++c)
      v.q[r * v.K + c] = f32_to_e4m3(w[r * v.K + c] / v.scale[(r / kBlock) * v.SK + c / kBlock]);
  return v;
}

Blob dequantized(const std::string& name, const Fp8Values& v) {
  std::vector<float> w(size_t(v.N * v.K));
  for (int64_t r = 0; r < v.N; ++r)
    for (int64_t c = 0; c < v.K; ++c)
      w[r * v.K + c] = e4m3_to_f32(v.q[r * v.K + c]) * v.scale[(r / kBlock) * v.SK + c / kBlock];
  return blob(name, DType::F32, {v.N, v.K}, w);
}

}  // namespace

json fp8_quantization_config_json() {
  return {{"activation_scheme", "dynamic"},
          {"fmt", "e4m3"},
          {"quant_method", "fp8"},
          {"weight_block_size", {kBlock, kBlock}}};
}

CheckpointSummary write_synthetic_fp8_checkpoint(const std::string& dir, json config_json,
                                                 uint64_t seed, int shards,
                                                 const std::string& float_dir) {
  config_json["torch_dtype"] = "bfloat16";
  config_json["quantization_config"] = fp8_quantization_config_json();
  const ModelConfig cfg = ModelConfig::from_json(config_json, "the config for " + dir);
  const std::vector<TensorSpec> specs = expected_tensors(cfg);
  return write_quantized_model(
      dir, config_json, specs, shards, cfg, seed, DType::BF16,
      {[&](const TensorSpec& t) -> std::vector<Blob> {
         const Fp8Values v = quantize(seed, t);
         return {blob(t.name, DType::F8_E4M3, {v.N, v.K}, v.q),
                 blob(fp8_scale_name(t.name), DType::F32, {v.SN, v.SK}, v.scale)};
       },
       [&](const TensorSpec& t) { return dequantized(t.name, quantize(seed, t)); }},
      float_dir);
}

}  // namespace qmpi
