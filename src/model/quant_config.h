// config.json's quantization_config: which format (int4 AWQ GEMM or GPTQ, or block-wise FP8
// e4m3) a checkpoint's decoder linears are stored in. Anything qmpi cannot run is refused here,
// from the config alone, before a byte of weights is read.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace qmpi {

// Gguf: a GGUF file's block-quantized tensors, each with its own ggml type (TensorInfo::ggml);
// group_size is then the widest block.
enum class QuantMethod : uint8_t { None, Awq, Gptq, Fp8, Gguf };

struct QuantConfig {
  QuantMethod method = QuantMethod::None;
  int bits = 16;
  int64_t group_size = 0;  // input rows per scale/zero group; -1 = one group over all of K
  bool desc_act = false;   // GPTQ act-order: rows' groups come from g_idx, not k / group_size
  bool sym = true;         // GPTQ symmetric (every stored zero is 7, i.e. 8 after the +1)
  // FP8: one float32 scale per block of block_n output rows x block_k inputs (weight_block_size).
  int64_t block_n = 0, block_k = 0;

  explicit operator bool() const { return method != QuantMethod::None; }
  // "awq" / "gptq" / "fp8"
  std::string method_name() const;
  bool int4() const { return method == QuantMethod::Awq || method == QuantMethod::Gptq; }
  bool fp8() const { return method == QuantMethod::Fp8; }
  bool gguf() const { return method == QuantMethod::Gguf; }
  // Input rows per group for a linear with `k` input rows.
  int64_t group_rows(int64_t k) const { return group_size < 0 ? k : group_size; }
  // Scale/zero rows of a linear with `k` input rows (GPTQ rounds a short last group up).
  int64_t groups(int64_t k) const { return (k + group_rows(k) - 1) / group_rows(k); }
  // MLP columns and vocab rows are cut on multiples of this (the shard plan's split unit):
  // int4: whole groups, which are whole packed int32 words (8 nibbles) too; FP8: whole blocks
  // (gate/up cut their rows by block_n, down_proj its inputs by block_k); GGUF: whole blocks.
  int64_t split_unit() const;
};

// Parses `j["quantization_config"]` (absent or null: not quantized). Throws
// Error(QuantUnsupported) for a format qmpi does not run (bits other than 4, AWQ versions other
// than gemm, marlin or exllama packing, modules left unquantized, FP8 with static activation
// scales, per-tensor scales or e5m2...) and Error(ConfigInvalid)
// for a malformed entry, naming `source`.
QuantConfig parse_quant_config(const nlohmann::json& j, const std::string& source);

// Throws Error(QuantUnsupported) when a quantized model's projection widths do not pack: every
// input and output width must be a multiple of 8 (one int32 word), and AWQ's input widths a
// multiple of the group size. `widths`: {hidden, q_width, kv_width, intermediate}.
// (FP8 needs nothing: its edge blocks may be partial.) MoE models add their expert and shared
// expert widths (0: none).
void check_quant_widths(const QuantConfig& q, int64_t hidden, int64_t q_width, int64_t kv_width,
                        int64_t intermediate, const std::string& source,
                        int64_t expert_intermediate = 0, int64_t shared_intermediate = 0);

}  // namespace qmpi
