// --kv-dtype (vLLM's --kv-cache-dtype): the KV cache's element type, for every command that
// builds or plans a KV cache.
#pragma once
#include <boost/program_options.hpp>
#include <string>

#include "core/dtype.h"

namespace qmpi {

// f32, bf16 or fp8, with the other spellings vLLM and torch use for the same types (float32,
// bfloat16, auto = bf16, fp8_e4m3); anything else raises Err::Usage.
DType parse_kv_dtype(const std::string& s);

// The one declaration of the option, shared by the engine commands and `qmpi plan` so that its
// default and help cannot drift apart: ("kv-dtype", kv_dtype_value(&dtype), kKvDtypeHelp).
// The text is parsed into `target` when the options are notified.
boost::program_options::typed_value<std::string>* kv_dtype_value(DType* target);
extern const char* const kKvDtypeHelp;

}  // namespace qmpi
