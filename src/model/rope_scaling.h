// config.json's rope_scaling (linear, dynamic NTK, YaRN) and the RoPE inverse frequencies it
// implies, computed on the host once and handed to every backend (Backend::rope).
//
// The formulas are transformers' (modeling_rope_utils.py: _compute_default_rope_parameters,
// _compute_linear_scaling_rope_parameters, _compute_dynamic_ntk_parameters and
// _compute_yarn_parameters), with YaRN's `factor` taken as written even when
// original_max_position_embeddings is present (transformers before issue 38224's fix derived it
// from max_position_embeddings / original_max_position_embeddings instead, which turns Qwen's
// documented {factor 4, original 32768} on a 32768 config into no scaling at all).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/kernel_types.h"

namespace qmpi {

struct BatchInput;
struct ModelConfig;

enum class RopeKind { Default, Linear, Dynamic, Yarn };

struct RopeScaling {
  RopeKind kind = RopeKind::Default;
  double factor = 1.0;
  // YaRN: the training length the correction range is measured against (default:
  // max_position_embeddings).
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0, beta_slow = 1.0;
  double attention_factor = 1.0;  // on cos and sin; YaRN's 0.1 ln(factor) + 1 unless given
  bool truncate = true;           // YaRN: floor/ceil the correction range

  // Parses config.json's "rope_scaling" (null: Default). Refuses (ConfigInvalid) an unknown
  // type or field, naming it, and out-of-range values.
  static RopeScaling parse(const nlohmann::json& j, int64_t max_position_embeddings,
                           const std::string& source);
  // The longest context vLLM derives for it: YaRN's original_max_position_embeddings x factor,
  // else max_position_embeddings.
  int64_t derived_max_len(int64_t max_position_embeddings) const;
  std::string describe() const;  // "yarn x4 (original 32768)", "none"
};

// transformers' float32 inverse frequencies [head_dim / 2] for a sequence of `seq_len` tokens
// (only dynamic NTK depends on it).
std::vector<float> rope_inv_freq(double theta, int32_t head_dim, const RopeScaling& s,
                                 int64_t max_position_embeddings, int64_t seq_len);

// The frequencies of a step's tokens: one row shared by every token, or under dynamic NTK one
// row per token, for its sequence's length at the end of the step (what transformers uses with
// a KV cache: the keys already cached keep the rotation they were stored with).
class RotaryFrequencies {
 public:
  explicit RotaryFrequencies(const ModelConfig& cfg);
  // Valid until the next call; every layer of a step passes the same batch.
  RopeFreqs of(const BatchInput& batch);

 private:
  double theta_;
  int32_t head_dim_;
  int64_t max_position_embeddings_;
  RopeScaling scaling_;
  std::vector<float> shared_;  // the row of every token not past max_position_embeddings
  std::vector<int32_t> lens_;  // (q_begin, q_len, ctx_len) of the seqs `rows_` was built for
  std::vector<float> rows_;    // dynamic: [tokens, head_dim / 2]
};

}  // namespace qmpi
