#include "app/commands/dtype_option.h"

#include "core/errors.h"

namespace qmpi {

const char* const kActivationDtypeHelp =
    "activations in the matmuls of bf16 weights: auto (= bfloat16: bf16 dot products, as vLLM "
    "and llama.cpp compute; float32 and float16 weights keep float32 activations, int4 and fp8 "
    "prefill takes bf16 ones (fp8 decode too with bf16 dot products), int4 decode int16 ones "
    "(AVX2 and AVX-512 builds), GGUF "
    "Q8_0/Q4_0/Q5_0/Q4_K/Q6_K decode int8 ones: docs/user-guide.md), "
    "bfloat16, or float32 (exact: within 1e-4 of the float64 reference; CPU only)";

ActivationDtype parse_activation_dtype(const std::string& s) {
  if (s == "auto") return ActivationDtype::Auto;
  if (s == "bfloat16" || s == "bf16") return ActivationDtype::BFloat16;
  if (s == "float32" || s == "float" || s == "f32") return ActivationDtype::Float32;
  raise(Err::Usage, "--dtype '" + s + "' is not one of auto, bfloat16, float32",
        "Give --dtype auto (the default: bf16 activations for bf16 weights), bfloat16, or "
        "float32 (exact float32 activations, CPU only). qmpi keeps weights in the checkpoint's "
        "dtype, so float16 and half are not offered.");
}

boost::program_options::typed_value<std::string>* activation_dtype_value(ActivationDtype* target) {
  return boost::program_options::value<std::string>()->default_value("auto")->notifier(
      [target](const std::string& s) { *target = parse_activation_dtype(s); });
}

}  // namespace qmpi
