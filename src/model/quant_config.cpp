#include "model/quant_config.h"

#include <algorithm>
#include <cctype>
#include <numeric>

#include "core/errors.h"

namespace qmpi {
namespace {

using nlohmann::json;

[[noreturn]] void unsupported(const std::string& source, const std::string& what,
                              const std::string& fix = {}) {
  raise(Err::QuantUnsupported, source + ": quantization_config " + what,
        fix.empty() ? "Use an AWQ (version gemm) or GPTQ 4-bit checkpoint, or the model's bf16 "
                      "release."
                    : fix);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The string at `key`, lower-cased; `fallback` when absent or null.
std::string text(const json& q, const char* key, const std::string& fallback,
                 const std::string& source) {
  auto it = q.find(key);
  if (it == q.end() || it->is_null()) return fallback;
  if (!it->is_string())
    raise(Err::ConfigInvalid,
          source + ": quantization_config \"" + key + "\" must be a string, got " + it->dump());
  return lower(it->get<std::string>());
}

bool flag(const json& q, const char* key, bool fallback, const std::string& source) {
  auto it = q.find(key);
  if (it == q.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    raise(Err::ConfigInvalid, source + ": quantization_config \"" + key +
                                  "\" must be true or false, got " + it->dump());
  return it->get<bool>();
}

int64_t integer(const json& q, const char* key, int64_t fallback, const std::string& source) {
  auto it = q.find(key);
  if (it == q.end() || it->is_null()) return fallback;
  if (!it->is_number_integer())
    raise(Err::ConfigInvalid,
          source + ": quantization_config \"" + key + "\" must be an integer, got " + it->dump());
  return it->get<int64_t>();
}

// modules_to_not_convert (AWQ) lists layers kept in float; qmpi quantizes all or none.
void check_all_converted(const json& q, const std::string& source) {
  auto it = q.find("modules_to_not_convert");
  if (it == q.end() || it->is_null() || (it->is_array() && it->empty())) return;
  unsupported(source, "keeps modules in float (modules_to_not_convert " + it->dump() +
                          "); qmpi runs checkpoints whose every decoder projection is int4");
}

void parse_awq(const json& q, QuantConfig& c, const std::string& source) {
  const std::string version = text(q, "version", "gemm", source);
  if (version != "gemm")
    unsupported(
        source,
        "has AWQ version \"" + version +
            "\"; qmpi reads the GEMM packing (version \"gemm\", qweight [in, out/8]) only",
        "Use an AWQ checkpoint saved with version \"gemm\" (Qwen's own -AWQ releases are).");
  if (!flag(q, "zero_point", true, source))
    unsupported(source, "has zero_point false; qmpi runs AWQ with zero points (zero_point true)");
  c.group_size = integer(q, "group_size", 128, source);
  c.sym = false;
}

void parse_gptq(const json& q, QuantConfig& c, const std::string& source) {
  const std::string format = text(q, "checkpoint_format", "gptq", source);
  if (format != "gptq")
    unsupported(source, "has checkpoint_format \"" + format +
                            "\"; qmpi reads the original GPTQ packing (checkpoint_format \"gptq\", "
                            "zero points stored minus one)");
  if (flag(q, "is_marlin_format", false, source))
    unsupported(source, "is marlin-packed (is_marlin_format true); qmpi reads GPTQ's own packing");
  if (flag(q, "lm_head", false, source))
    unsupported(source, "quantizes lm_head; qmpi expects lm_head in float");
  c.group_size = integer(q, "group_size", 128, source);
  c.desc_act = flag(q, "desc_act", false, source);
  c.sym = flag(q, "sym", true, source);
}

// Qwen's -FP8 releases: e4m3 weights with one float32 scale_inv per weight_block_size block and
// activations quantized on the fly ("dynamic"), which qmpi does by not quantizing them at all.
void parse_fp8(const json& q, QuantConfig& c, const std::string& source) {
  const std::string fix =
      "Use an FP8 checkpoint with fmt e4m3, activation_scheme dynamic and weight_block_size "
      "(Qwen's own -FP8 releases are), or the model's bf16 release.";
  c.method = QuantMethod::Fp8;
  c.bits = 8;
  const std::string fmt = text(q, "fmt", "e4m3", source);
  if (fmt != "e4m3")
    unsupported(source, "has FP8 fmt \"" + fmt + "\"; qmpi runs e4m3 weights only", fix);
  const std::string act = text(q, "activation_scheme", "dynamic", source);
  if (act != "dynamic")
    unsupported(source,
                "has FP8 activation_scheme \"" + act +
                    "\"; qmpi runs \"dynamic\" (no stored activation scales) only",
                fix);
  auto it = q.find("weight_block_size");
  if (it == q.end() || it->is_null())
    unsupported(source,
                "is FP8 without weight_block_size (per-tensor scales); qmpi runs block-wise "
                "scales only",
                fix);
  if (!it->is_array() || it->size() != 2 || !(*it)[0].is_number_integer() ||
      !(*it)[1].is_number_integer() || (*it)[0].get<int64_t>() < 1 || (*it)[1].get<int64_t>() < 1)
    raise(Err::ConfigInvalid, source +
                                  ": quantization_config \"weight_block_size\" must be two "
                                  "positive integers [rows, columns], got " +
                                  it->dump());
  c.block_n = (*it)[0].get<int64_t>();
  c.block_k = (*it)[1].get<int64_t>();
  // Listed modules stay in bf16: fine for what qmpi keeps in float anyway (lm_head, routers),
  // not for a decoder projection, which would be one float linear among FP8 ones.
  auto skip = q.find("modules_to_not_convert");
  if (skip != q.end() && skip->is_array())
    for (const json& m : *skip)
      if (m.is_string() && m.get<std::string>().ends_with("_proj"))
        unsupported(source,
                    "keeps the decoder projection " + m.get<std::string>() +
                        " in float (modules_to_not_convert); qmpi runs FP8 "
                        "checkpoints whose every decoder projection is FP8",
                    fix);
}

}  // namespace

std::string QuantConfig::method_name() const {
  switch (method) {
    case QuantMethod::Awq:
      return "awq";
    case QuantMethod::Gptq:
      return "gptq";
    case QuantMethod::Fp8:
      return "fp8";
    case QuantMethod::Gguf:
      return "gguf";
    default:
      return "none";
  }
}

int64_t QuantConfig::split_unit() const {
  if (method == QuantMethod::None) return 1;
  if (method == QuantMethod::Fp8) return std::lcm(block_n, block_k);
  return group_size > 0 ? group_size : 8;
}

QuantConfig parse_quant_config(const json& j, const std::string& source) {
  QuantConfig c;
  auto it = j.find("quantization_config");
  if (it == j.end() || it->is_null()) return c;
  const json& q = *it;
  if (!q.is_object())
    raise(Err::ConfigInvalid,
          source + ": \"quantization_config\" must be an object, got " + q.dump());
  const std::string method = text(q, "quant_method", "", source);
  if (method == "fp8") {
    parse_fp8(q, c, source);
    return c;
  }
  if (method == "awq")
    c.method = QuantMethod::Awq;
  else if (method == "gptq")
    c.method = QuantMethod::Gptq;
  else
    unsupported(source,
                "has quant_method \"" + method + "\"; qmpi runs \"awq\", \"gptq\" and \"fp8\"");
  c.bits = int(integer(q, "bits", c.method == QuantMethod::Awq ? integer(q, "w_bit", 4, source) : 4,
                       source));
  if (c.bits != 4)
    unsupported(source, "has bits " + std::to_string(c.bits) + "; qmpi runs 4-bit weights only",
                "Use the model's 4-bit (Int4 / AWQ) release, or its bf16 release.");
  check_all_converted(q, source);
  if (c.method == QuantMethod::Awq)
    parse_awq(q, c, source);
  else
    parse_gptq(q, c, source);
  if (c.group_size != -1 && (c.group_size < 8 || c.group_size % 8 != 0))
    unsupported(source, "has group_size " + std::to_string(c.group_size) +
                            "; qmpi runs group sizes that are multiples of 8 (32, 64, 128) or -1");
  return c;
}

void check_quant_widths(const QuantConfig& q, int64_t hidden, int64_t q_width, int64_t kv_width,
                        int64_t intermediate, const std::string& source,
                        int64_t expert_intermediate, int64_t shared_intermediate) {
  if (!q.int4()) return;
  struct Width {
    const char* what;
    int64_t w;
    bool input;  // some projection's input width (AWQ groups run along inputs)
  };
  const Width widths[] = {{"hidden_size", hidden, true},
                          {"num_attention_heads x head_dim", q_width, true},
                          {"num_key_value_heads x head_dim", kv_width, false},
                          {"intermediate_size", intermediate, true},
                          {"moe_intermediate_size", expert_intermediate, true},
                          {"shared_expert_intermediate_size", shared_intermediate, true}};
  for (const auto& [what, w, input] : widths) {
    if (w % 8 != 0)
      unsupported(source, "cannot pack " + std::string(what) + " " + std::to_string(w) +
                              ": int4 widths must be multiples of 8 (one int32 holds 8 weights)");
    if (input && q.method == QuantMethod::Awq && q.group_size > 0 && w % q.group_size != 0)
      unsupported(source, "has AWQ group_size " + std::to_string(q.group_size) +
                              " that does not divide " + what + " " + std::to_string(w) +
                              " (AWQ needs whole groups of input rows)");
  }
}

}  // namespace qmpi
