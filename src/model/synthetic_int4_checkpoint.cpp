#include "model/synthetic_int4_checkpoint.h"

#include <cmath>
#include <functional>

#include "core/errors.h"
#include "core/splitmix64.h"
#include "model/config.h"
#include "model/synthetic.h"
#include "model/synthetic_blobs.h"

namespace qmpi {
using nlohmann::json;

namespace {

// AWQ packs output column 8c + kAwqOrder[i] into nibble i of word c (AutoAWQ's pack order).
constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// splitmix64: a counter-free stream seeded per projection, enough for random test weights.
struct Rng {
  uint64_t s;
  uint64_t next() { return mix64(s += kGoldenGamma); }
  uint32_t below(uint32_t n) { return uint32_t(next() % n); }
  float unit() { return float(next() >> 40) / float(1ull << 24); }
};

// One projection's random int4 values, unpacked: what both files are made from.
struct Int4Values {
  int64_t K = 0, N = 0, G = 0;
  std::vector<uint8_t> q;       // [K, N]
  std::vector<uint8_t> zero;    // [G, N], true zero point
  std::vector<uint16_t> scale;  // [G, N] F16
  std::vector<int32_t> g_idx;   // [K]
};

Int4Values random_int4(uint64_t seed, const TensorSpec& spec, const Int4ModelOptions& opt) {
  Int4Values v;
  v.N = spec.shape[0];
  v.K = spec.shape[1];
  const int64_t gs = opt.group_size < 0 ? v.K : opt.group_size;
  v.G = (v.K + gs - 1) / gs;
  Rng rng{seed ^ std::hash<std::string>{}(spec.name)};
  // Dequantized weights get about the spread of the dense generator's weights for this tensor
  // (a uniform of half-width h has standard deviation h / sqrt(3); q - z has about 6.5).
  const SyntheticTensor dense(seed, spec.name, spec.shape);
  float h = 0.0f;
  for (int64_t i = 0; i < 512; ++i) h = std::max(h, std::fabs(dense.value(i)));
  const float base = h / std::sqrt(3.0f) / 6.5f;
  v.q.resize(size_t(v.K * v.N));
  for (auto& x : v.q) x = uint8_t(rng.below(16));
  v.zero.resize(size_t(v.G * v.N));
  for (auto& z : v.zero) {
    if (opt.method == QuantMethod::Awq)
      z = uint8_t(rng.below(16));
    else  // GPTQ stores zero - 1 in a nibble: 1..15 (a zero of 0 would wrap to 15)
      z = opt.sym ? uint8_t(8) : uint8_t(1 + rng.below(15));
  }
  v.scale.resize(size_t(v.G * v.N));
  for (auto& s : v.scale) s = f32_to_f16(base * (0.75f + 0.5f * rng.unit()));
  v.g_idx.resize(size_t(v.K));
  if (opt.desc_act) {  // act-order: input k is the perm-th row quantized, group perm / gs
    std::vector<int32_t> perm(size_t(v.K));
    for (int64_t k = 0; k < v.K; ++k) perm[k] = int32_t(k);
    for (int64_t k = v.K - 1; k > 0; --k) std::swap(perm[k], perm[rng.below(uint32_t(k + 1))]);
    for (int64_t i = 0; i < v.K; ++i) v.g_idx[perm[i]] = int32_t(i / gs);
  } else {
    for (int64_t k = 0; k < v.K; ++k) v.g_idx[k] = int32_t(k / gs);
  }
  return v;
}

// Eight 4-bit values into one int32, value i in bits 4i..4i+3.
int32_t pack8(const uint8_t (&nib)[8]) {
  uint32_t w = 0;
  for (int i = 0; i < 8; ++i) w |= uint32_t(nib[i] & 15u) << (4 * i);
  return int32_t(w);
}

// [R, C] values packed along C, 8 per int32, in AWQ's interleaved order or in sequence.
std::vector<int32_t> pack_columns(const std::vector<uint8_t>& v, int64_t R, int64_t C, bool awq,
                                  int minus) {
  std::vector<int32_t> out(size_t(R * (C / 8)));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C / 8; ++c) {
      uint8_t nib[8];
      for (int i = 0; i < 8; ++i)
        nib[i] = uint8_t(v[r * C + 8 * c + (awq ? kAwqOrder[i] : i)] - minus);
      out[r * (C / 8) + c] = pack8(nib);
    }
  return out;
}

std::vector<Blob> int4_blobs(const std::string& prefix, const Int4Values& v,
                             const Int4ModelOptions& opt) {
  const bool awq = opt.method == QuantMethod::Awq;
  std::vector<Blob> out;
  if (awq) {  // qweight [K, N/8]: 8 output columns per int32, interleaved
    out.push_back(
        blob(prefix + "qweight", DType::I32, {v.K, v.N / 8}, pack_columns(v.q, v.K, v.N, true, 0)));
    out.push_back(blob(prefix + "qzeros", DType::I32, {v.G, v.N / 8},
                       pack_columns(v.zero, v.G, v.N, true, 0)));
  } else {  // qweight [K/8, N]: 8 input rows per int32, in sequence; zeros stored minus one
    std::vector<int32_t> qw(size_t(v.K / 8 * v.N));
    for (int64_t r = 0; r < v.K / 8; ++r)
      for (int64_t n = 0; n < v.N; ++n) {
        uint8_t nib[8];
        for (int j = 0; j < 8; ++j) nib[j] = v.q[(8 * r + j) * v.N + n];
        qw[r * v.N + n] = pack8(nib);
      }
    out.push_back(blob(prefix + "qweight", DType::I32, {v.K / 8, v.N}, qw));
    out.push_back(blob(prefix + "qzeros", DType::I32, {v.G, v.N / 8},
                       pack_columns(v.zero, v.G, v.N, false, 1)));
  }
  out.push_back(blob(prefix + "scales", DType::F16, {v.G, v.N}, v.scale));
  if (!awq) out.push_back(blob(prefix + "g_idx", DType::I32, {v.K}, v.g_idx));
  return out;
}

// The float twin's weight [N, K]: (q - zero) * scale of each input's group, exact in float32.
Blob dequantized_blob(const std::string& name, const Int4Values& v) {
  std::vector<float> w(size_t(v.N * v.K));
  for (int64_t k = 0; k < v.K; ++k) {
    const int64_t g = v.g_idx[k];
    for (int64_t n = 0; n < v.N; ++n)
      w[n * v.K + k] =
          (float(v.q[k * v.N + n]) - float(v.zero[g * v.N + n])) * f16_to_f32(v.scale[g * v.N + n]);
  }
  return blob(name, DType::F32, {v.N, v.K}, w);
}

}  // namespace

json quantization_config_json(const Int4ModelOptions& opt) {
  if (opt.method == QuantMethod::Awq)
    return {{"bits", 4},
            {"group_size", opt.group_size},
            {"modules_to_not_convert", nullptr},
            {"quant_method", "awq"},
            {"version", "gemm"},
            {"zero_point", true}};
  return {{"bits", 4},
          {"group_size", opt.group_size},
          {"desc_act", opt.desc_act},
          {"sym", opt.sym},
          {"damp_percent", 0.01},
          {"true_sequential", true},
          {"quant_method", "gptq"},
          {"checkpoint_format", "gptq"},
          {"static_groups", false}};
}

CheckpointSummary write_synthetic_int4_checkpoint(const std::string& dir, json config_json,
                                                  uint64_t seed, const Int4ModelOptions& opt,
                                                  int shards, const std::string& float_dir) {
  if (opt.method == QuantMethod::None) raise(Err::Usage, "make-model: no int4 format chosen");
  if (opt.method == QuantMethod::Awq && (opt.desc_act || opt.sym))
    raise(Err::Usage,
          "make-model: --desc-act and --sym are GPTQ options; AWQ is asymmetric and "
          "in input order");
  config_json["torch_dtype"] = "float16";
  config_json["quantization_config"] = quantization_config_json(opt);
  const ModelConfig cfg = ModelConfig::from_json(config_json, "the config for " + dir);
  const std::vector<TensorSpec> specs = expected_tensors(cfg);

  return write_quantized_model(
      dir, config_json, specs, shards, cfg, seed, DType::F16,
      {[&](const TensorSpec& t) {
         const std::string prefix = t.name.substr(0, t.name.size() - 6);  // "weight"
         return int4_blobs(prefix, random_int4(seed, t, opt), opt);
       },
       [&](const TensorSpec& t) { return dequantized_blob(t.name, random_int4(seed, t, opt)); }},
      float_dir);
}

}  // namespace qmpi
