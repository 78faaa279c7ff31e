// --dtype (vLLM's flag): the type activations take inside the matmuls of 16-bit weights, for
// every engine command.
#pragma once
#include <boost/program_options.hpp>
#include <string>

#include "engine/engine_config.h"

namespace qmpi {

// auto, bfloat16 (also bf16) or float32 (also float, f32); anything else raises Err::Usage.
ActivationDtype parse_activation_dtype(const std::string& s);

// ("dtype", activation_dtype_value(&b.activations), kActivationDtypeHelp): default auto.
boost::program_options::typed_value<std::string>* activation_dtype_value(ActivationDtype* target);
extern const char* const kActivationDtypeHelp;

}  // namespace qmpi
