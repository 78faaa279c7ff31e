// config.json's quantization_config: which int4 format (AWQ GEMM or GPTQ) a checkpoint's
// decoder linears are stored in. Anything qmpi cannot run is refused here, from the config
// alone, before a byte of weights is read.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace qmpi {

enum class QuantMethod : uint8_t { None, Awq, Gptq };

struct QuantConfig {
  QuantMethod method = QuantMethod::None;
  int bits = 16;
  int64_t group_size = 0;  // input rows per scale/zero group; -1 = one group over all of K
  bool desc_act = false;   // GPTQ act-order: rows' groups come from g_idx, not k / group_size
  bool sym = true;         // GPTQ symmetric (every stored zero is 7, i.e. 8 after the +1)

  explicit operator bool() const { return method != QuantMethod::None; }
  // "awq" / "gptq"
  std::string method_name() const;
  // Input rows per group for a linear with `k` input rows.
  int64_t group_rows(int64_t k) const { return group_size < 0 ? k : group_size; }
  // Scale/zero rows of a linear with `k` input rows (GPTQ rounds a short last group up).
  int64_t groups(int64_t k) const { return (k + group_rows(k) - 1) / group_rows(k); }
  // MLP columns and vocab rows are cut on multiples of this (the shard plan's split unit):
  // whole groups, which are whole packed int32 words (8 nibbles) too.
  int64_t split_unit() const;
};

// Parses `j["quantization_config"]` (absent or null: not quantized). Throws
// Error(QuantUnsupported) for a format qmpi does not run (bits other than 4, AWQ versions other
// than gemm, marlin or exllama packing, modules left unquantized...) and Error(ConfigInvalid)
// for a malformed entry, naming `source`.
QuantConfig parse_quant_config(const nlohmann::json& j, const std::string& source);

// Throws Error(QuantUnsupported) when a quantized model's projection widths do not pack: every
// input and output width must be a multiple of 8 (one int32 word), and AWQ's input widths a
// multiple of the group size. `widths`: {hidden, q_width, kv_width, intermediate}.
void check_quant_widths(const QuantConfig& q, int64_t hidden, int64_t q_width, int64_t kv_width,
                        int64_t intermediate, const std::string& source);

}  // namespace qmpi
