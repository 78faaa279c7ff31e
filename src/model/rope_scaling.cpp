#include "model/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>

#include "core/errors.h"
#include "model/batch.h"
#include "model/config.h"

namespace qmpi {
using nlohmann::json;

namespace {

const char* kind_name(RopeKind k) {
  switch (k) {
    case RopeKind::Linear:
      return "linear";
    case RopeKind::Dynamic:
      return "dynamic";
    case RopeKind::Yarn:
      return "yarn";
    case RopeKind::Default:
      break;
  }
  return "default";
}

[[noreturn]] void refuse_value(const std::string& source, const std::string& key,
                               const std::string& want, const json& got) {
  raise(Err::ConfigInvalid,
        source + ": rope_scaling \"" + key + "\" must be " + want + ", got " + got.dump());
}

double number_at_least(const json& j, const std::string& key, double low, bool inclusive,
                       const std::string& source) {
  const json& v = j.at(key);
  if (!v.is_number() || (inclusive ? v.get<double>() < low : v.get<double>() <= low))
    refuse_value(
        source, key,
        std::string("a number ") + (inclusive ? ">= " : "> ") + std::to_string(low).substr(0, 3),
        v);
  return v.get<double>();
}

// The fields transformers reads for each type (beside "type"/"rope_type"). Dynamic's
// original_max_position_embeddings is accepted and unused, as transformers leaves it.
bool known_field(RopeKind k, const std::string& key) {
  if (key == "type" || key == "rope_type" || key == "factor") return true;
  if (k == RopeKind::Dynamic) return key == "original_max_position_embeddings";
  if (k != RopeKind::Yarn) return false;
  static const char* yarn[] = {"original_max_position_embeddings",
                               "attention_factor",
                               "beta_fast",
                               "beta_slow",
                               "mscale",
                               "mscale_all_dim",
                               "truncate"};
  return std::find(std::begin(yarn), std::end(yarn), key) != std::end(yarn);
}

// YaRN's attention scaling for `scale` with multiplier `mscale` (the paper's 0.1 ln(s) + 1).
double yarn_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// The (fractional) pair index whose wavelength turns `rotations` times over `length` tokens.
double correction_dim(double rotations, int32_t dim, double base, double length) {
  return double(dim) * std::log(length / (rotations * 2.0 * std::numbers::pi)) /
         (2.0 * std::log(base));
}

// base^(2m / dim) in float32, the exponent formed in float32 as torch does.
float pair_wavelength_factor(double base, int32_t m, int32_t dim) {
  const float expo = float(2 * m) / float(dim);
  return float(std::pow(double(float(base)), double(expo)));
}

}  // namespace

RopeScaling RopeScaling::parse(const json& j, int64_t max_position_embeddings,
                               const std::string& source) {
  RopeScaling s;
  if (j.is_null()) return s;
  if (!j.is_object())
    raise(Err::ConfigInvalid, source + ": \"rope_scaling\" must be an object, got " + j.dump());
  // transformers renamed "type" to "rope_type" and reads either.
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_string()) refuse_value(source, key, "a string", j[key]);
    const std::string t = j[key].get<std::string>();
    if (!type.empty() && t != type)
      raise(Err::ConfigInvalid, source + ": rope_scaling says both \"rope_type\": \"" + type +
                                    "\" and \"type\": \"" + t + "\"");
    type = t;
  }
  if (type.empty())
    raise(Err::ConfigKeyMissing, source + ": rope_scaling has no \"rope_type\" (or \"type\")",
          "Add \"rope_type\": \"yarn\" (or \"linear\", \"dynamic\") to rope_scaling.");
  if (type == "linear")
    s.kind = RopeKind::Linear;
  else if (type == "dynamic")
    s.kind = RopeKind::Dynamic;
  else if (type == "yarn")
    s.kind = RopeKind::Yarn;
  else if (type != "default")
    raise(Err::ArchUnsupported,
          source + ": not supported yet: rope_scaling type \"" + type +
              "\" (qmpi runs \"yarn\", \"linear\" and \"dynamic\")",
          "Remove rope_scaling from config.json, or use one of the supported types.");
  for (const auto& [key, value] : j.items())
    if (!known_field(s.kind, key))
      raise(Err::ArchUnsupported,
            source + ": not supported yet: rope_scaling field \"" + key + "\" with type \"" + type +
                "\"",
            "Remove \"" + key + "\" from rope_scaling.");
  if (s.kind == RopeKind::Default) return s;

  s.original_max_position_embeddings = max_position_embeddings;
  if (j.contains("original_max_position_embeddings")) {
    const json& v = j["original_max_position_embeddings"];
    if (!v.is_number_integer() || v.get<int64_t>() <= 0)
      refuse_value(source, "original_max_position_embeddings", "a positive integer", v);
    s.original_max_position_embeddings = v.get<int64_t>();
  }
  const bool has_factor = j.contains("factor") && !j["factor"].is_null();
  if (has_factor) {
    s.factor = number_at_least(j, "factor", 1.0, true, source);
  } else if (s.kind == RopeKind::Yarn &&
             s.original_max_position_embeddings < max_position_embeddings) {
    // transformers' rule when factor is absent: the extension max_position_embeddings implies.
    s.factor = double(max_position_embeddings) / double(s.original_max_position_embeddings);
  } else {
    raise(Err::ConfigKeyMissing, source + ": rope_scaling type \"" + type + "\" has no \"factor\"",
          "Add \"factor\" (e.g. 4.0) to rope_scaling.");
  }
  if (s.kind != RopeKind::Yarn) return s;

  // transformers: `get("beta_fast") or 32`, so null (and 0) fall back to the default.
  auto beta = [&](const char* key, double fallback) {
    if (!j.contains(key) || j[key].is_null() || (j[key].is_number() && j[key] == 0))
      return fallback;
    return number_at_least(j, key, 0.0, false, source);
  };
  s.beta_fast = beta("beta_fast", 32.0);
  s.beta_slow = beta("beta_slow", 1.0);
  if (j.contains("truncate")) {
    if (!j["truncate"].is_boolean())
      refuse_value(source, "truncate", "true or false", j["truncate"]);
    s.truncate = j["truncate"].get<bool>();
  }
  if (j.contains("attention_factor") && !j["attention_factor"].is_null()) {
    s.attention_factor = number_at_least(j, "attention_factor", 0.0, false, source);
  } else {
    auto scale_of = [&](const char* key) {
      if (!j.contains(key) || j[key].is_null()) return 0.0;
      if (!j[key].is_number()) refuse_value(source, key, "a number", j[key]);
      return j[key].get<double>();
    };
    const double mscale = scale_of("mscale"), mscale_all_dim = scale_of("mscale_all_dim");
    s.attention_factor = mscale != 0.0 && mscale_all_dim != 0.0
                             ? yarn_mscale(s.factor, mscale) / yarn_mscale(s.factor, mscale_all_dim)
                             : yarn_mscale(s.factor, 1.0);
  }
  return s;
}

int64_t RopeScaling::derived_max_len(int64_t max_position_embeddings) const {
  if (kind == RopeKind::Default) return max_position_embeddings;
  const int64_t base =
      kind == RopeKind::Yarn ? original_max_position_embeddings : max_position_embeddings;
  return int64_t(double(base) * factor);
}

std::string RopeScaling::describe() const {
  if (kind == RopeKind::Default) return "none";
  std::ostringstream o;
  o << kind_name(kind) << " x" << factor;
  if (kind == RopeKind::Yarn)
    o << " (original " << original_max_position_embeddings << ", attention " << attention_factor
      << ")";
  return o.str();
}

std::vector<float> rope_inv_freq(double theta, int32_t head_dim, const RopeScaling& s,
                                 int64_t max_position_embeddings, int64_t seq_len) {
  if (head_dim <= 0 || head_dim % 2 != 0)
    raise(Err::Internal, "rope needs an even head_dim, got " + std::to_string(head_dim));
  const int32_t half = head_dim / 2;
  std::vector<float> inv(static_cast<size_t>(half));
  double base = theta;
  if (s.kind == RopeKind::Dynamic) {
    // NTK: the base grows with the sequence once it passes max_position_embeddings.
    const double len = double(std::max(seq_len, max_position_embeddings));
    base = theta * std::pow(s.factor * len / double(max_position_embeddings) - (s.factor - 1.0),
                            double(head_dim) / double(head_dim - 2));
  }
  for (int32_t m = 0; m < half; ++m)
    inv[size_t(m)] = 1.0f / pair_wavelength_factor(base, m, head_dim);
  if (s.kind == RopeKind::Linear)
    for (float& f : inv) f /= float(s.factor);
  if (s.kind != RopeKind::Yarn) return inv;

  // YaRN: pairs that turn fewer than beta_slow times over the original length are interpolated
  // (divided by factor), those that turn more than beta_fast times keep their frequency, and a
  // linear ramp over the pair index blends the ones between.
  const double length = double(s.original_max_position_embeddings);
  double low = correction_dim(s.beta_fast, head_dim, theta, length);
  double high = correction_dim(s.beta_slow, head_dim, theta, length);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, double(head_dim - 1));
  if (low == high) high += 0.001;
  const float factor = float(s.factor);
  for (int32_t m = 0; m < half; ++m) {
    const float pos_freq = pair_wavelength_factor(theta, m, head_dim);
    const float extrapolated = 1.0f / pos_freq;
    const float interpolated = 1.0f / (factor * pos_freq);
    const float ramp = std::clamp((float(m) - float(low)) / float(high - low), 0.0f, 1.0f);
    const float keep = 1.0f - ramp;
    inv[size_t(m)] = interpolated * (1.0f - keep) + extrapolated * keep;
  }
  return inv;
}

RotaryFrequencies::RotaryFrequencies(const ModelConfig& cfg)
    : theta_(cfg.rope_theta),
      head_dim_(int32_t(cfg.head_dim)),
      max_position_embeddings_(cfg.max_position_embeddings),
      scaling_(cfg.rope_scaling),
      shared_(rope_inv_freq(theta_, head_dim_, scaling_, max_position_embeddings_, 0)) {}

RopeFreqs RotaryFrequencies::of(const BatchInput& batch) {
  RopeFreqs f{shared_.data(), 1, head_dim_, float(scaling_.attention_factor)};
  if (scaling_.kind != RopeKind::Dynamic) return f;
  bool longer = false;
  std::vector<int32_t> lens;
  lens.reserve(3 * batch.seqs.size());
  for (const AttentionSeq& s : batch.seqs) {
    lens.insert(lens.end(), {s.q_begin, s.q_len, s.ctx_len});
    longer = longer || s.ctx_len > max_position_embeddings_;
  }
  if (!longer) return f;
  if (lens != lens_ || rows_.empty()) {
    const size_t half = size_t(head_dim_ / 2);
    rows_.assign(size_t(batch.num_tokens()) * half, 0.0f);
    for (const AttentionSeq& s : batch.seqs) {
      const std::vector<float> row =
          s.ctx_len > max_position_embeddings_
              ? rope_inv_freq(theta_, head_dim_, scaling_, max_position_embeddings_, s.ctx_len)
              : shared_;
      for (int32_t t = 0; t < s.q_len; ++t)
        std::copy(row.begin(), row.end(), rows_.begin() + ptrdiff_t((s.q_begin + t) * half));
    }
    lens_ = std::move(lens);
  }
  f.inv_freq = rows_.data();
  f.rows = batch.num_tokens();
  return f;
}

}  // namespace qmpi
