#include "model/synthetic.h"

#include <cmath>
#include <cstring>

#include "core/errors.h"
#include "core/splitmix64.h"

namespace qmpi {
namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// Uniform(-1, 1) has standard deviation 1/sqrt(3); these half-widths set the std we want.
constexpr float kSqrt3 = 1.7320508f;
constexpr float kEmbedLogitStd = 4.0f;    // std of <unit-rms hidden, embedding row>
constexpr float kNormNoise = 0.1f;        // norm weights in [0.9, 1.1] (final norm: twice that)
constexpr float kFinalNormCentre = 2.0f;  // doubles the logit spread: std ~8, wide top-1 margins
constexpr float kBiasScale = 0.1f;        // q/k/v biases in [-0.1, 0.1]
// o_proj and down_proj write into the residual stream. Their writes are made larger than a
// token's own embedding, since otherwise (with tied embeddings) the final hidden state is
// dominated by the current token's embedding and greedy decoding repeats that token forever.
constexpr float kResidualWriteGain = 6.0f;

}  // namespace

SyntheticTensor::SyntheticTensor(uint64_t seed, const std::string& name,
                                 const std::vector<int64_t>& shape)
    : key_(mix64(mix64(seed) ^ fnv1a(name))), scale_(1.0f), offset_(0.0f) {
  const float fan_in = shape.size() >= 2 ? float(shape.back()) : 1.0f;
  if (name == "model.norm.weight") {
    offset_ = kFinalNormCentre;
    scale_ = kFinalNormCentre * kNormNoise;
  } else if (ends_with(name, "norm.weight")) {
    offset_ = 1.0f;
    scale_ = kNormNoise;
  } else if (ends_with(name, ".bias")) {
    scale_ = kBiasScale;
  } else if (ends_with(name, "embed_tokens.weight") || ends_with(name, "lm_head.weight")) {
    // logit = <unit-rms hidden, row>: std = sqrt(hidden) * std(row element).
    scale_ = kSqrt3 * kEmbedLogitStd / std::sqrt(fan_in);
  } else if (ends_with(name, "o_proj.weight") || ends_with(name, "down_proj.weight")) {
    scale_ = kResidualWriteGain * kSqrt3 / std::sqrt(fan_in);
  } else {
    // Keeps the output rms of a linear layer equal to its input rms.
    scale_ = kSqrt3 / std::sqrt(fan_in);
  }
}

float SyntheticTensor::value(int64_t index) const {
  const uint64_t bits = mix64(key_ + uint64_t(index + 1) * kGoldenGamma);
  // 24 random bits give a float in [-1, 1) exactly, with no rounding bias.
  const float u = float(int32_t(bits >> 40) - (1 << 23)) * (1.0f / float(1 << 23));
  return offset_ + scale_ * u;
}

void SyntheticTensor::fill(int64_t first, int64_t count, DType dtype, void* dst) const {
  switch (dtype) {
    case DType::F32: {
      auto* out = static_cast<float*>(dst);
      for (int64_t i = 0; i < count; ++i) out[i] = value(first + i);
      return;
    }
    case DType::BF16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < count; ++i) out[i] = f32_to_bf16(value(first + i));
      return;
    }
    case DType::F16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < count; ++i) out[i] = f32_to_f16(value(first + i));
      return;
    }
    default:
      raise(Err::DTypeUnsupported,
            "synthetic weights can be F32, F16 or BF16, not " + std::string(dtype_name(dtype)));
  }
}

SyntheticWeights::SyntheticWeights(const ModelConfig& cfg, uint64_t seed, DType dtype)
    : seed_(seed) {
  if (!is_float_weight(dtype))
    raise(Err::DTypeUnsupported,
          "synthetic weights can be F32, F16 or BF16, not " + std::string(dtype_name(dtype)));
  for (auto& spec : expected_tensors(cfg)) {
    TensorInfo t;
    t.name = spec.name;
    t.dtype = dtype;
    t.shape = spec.shape;
    uint64_t n = dtype_size(dtype);
    for (int64_t d : t.shape) n *= uint64_t(d);
    t.nbytes = n;
    t.file = "synthetic weights (seed " + std::to_string(seed) + ")";
    index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }
}

bool SyntheticWeights::has(const std::string& name) const {
  return index_.count(name) != 0;
}

const TensorInfo& SyntheticWeights::info(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end())
    raise(Err::TensorMissing, "tensor '" + name + "' is not part of this model's config");
  return tensors_[it->second];
}

std::vector<std::string> SyntheticWeights::names() const {
  std::vector<std::string> out;
  for (const auto& t : tensors_) out.push_back(t.name);
  return out;
}

void SyntheticWeights::read(const std::string& name, const Slice& slice, void* dst) {
  const TensorInfo& t = info(name);
  const int64_t n = slice_numel(t.shape, slice);
  const SyntheticTensor gen(seed_, name, t.shape);
  const size_t esize = dtype_size(t.dtype);
  auto* out = static_cast<uint8_t*>(dst);
  if (t.shape.empty()) {
    gen.fill(0, 1, t.dtype, out);
  } else {
    // Same outer x [dim] x inner walk as a file read: one contiguous run per outer index.
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < slice.dim; ++d) outer *= t.shape[size_t(d)];
    for (size_t d = size_t(slice.dim) + 1; d < t.shape.size(); ++d) inner *= t.shape[d];
    const int64_t extent = t.shape[size_t(slice.dim)];
    const int64_t run = (slice.length < 0 ? extent : slice.length) * inner;
    for (int64_t o = 0; o < outer; ++o)
      gen.fill((o * extent + slice.start) * inner, run, t.dtype, out + size_t(o * run) * esize);
  }
  bytes_read_ += uint64_t(n) * esize;
}

}  // namespace qmpi
