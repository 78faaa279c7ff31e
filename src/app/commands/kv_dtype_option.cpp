#include "app/commands/kv_dtype_option.h"

#include "core/errors.h"

namespace qmpi {

const char* const kKvDtypeHelp =
    "KV cache element type: bf16, f32 (exact) or fp8 (e4m3 with a scale per token and KV head; "
    "half of bf16's memory); vLLM's --kv-cache-dtype, auto = bf16";

boost::program_options::typed_value<std::string>* kv_dtype_value(DType* target) {
  return boost::program_options::value<std::string>()->default_value("bf16")->notifier(
      [target](const std::string& s) { *target = parse_kv_dtype(s); });
}

DType parse_kv_dtype(const std::string& s) {
  if (s == "f32" || s == "fp32" || s == "float32" || s == "float") return DType::F32;
  // vLLM's auto is the model's dtype, bf16 for every Qwen checkpoint.
  if (s == "bf16" || s == "bfloat16" || s == "auto") return DType::BF16;
  if (s == "fp8" || s == "fp8_e4m3") return DType::F8_E4M3;
  raise(Err::Usage, "--kv-dtype '" + s + "' is not one of f32, bf16, fp8",
        "Give --kv-dtype bf16 (the default), f32 (exact) or fp8 (e4m3, half of bf16's memory).");
}

}  // namespace qmpi
