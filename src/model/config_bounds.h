// Sanity of config.json's size fields before anything is sized from them. A config is a file
// anyone can edit or download: num_hidden_layers 1e9 or num_experts 2^31 made the planner list
// billions of tensors and hang. Each field gets a bound far above every released model and far
// below what would overflow the int32 the kernels index with or exhaust memory, and the
// checkpoint must then confirm the numbers before the loader allocates anything from them.
#pragma once
#include <string>

#include "io/weight_source.h"
#include "model/config.h"

namespace qmpi {

// Throws ConfigInvalid (QM201) naming the field, its value and the bound.
void check_config_bounds(const ModelConfig& c, const std::string& source);

// The checkpoint's own tensors agree with the config's counts and widths: the embedding is
// [vocab_size, hidden_size], the last layer (and the last expert of a sparse layer) exists and
// the one after it does not. Cheap (a few header look-ups); throws TensorMissing (QM209),
// TensorShapeMismatch (QM210) or ConfigInvalid naming the tensor.
void confirm_config_with_weights(const ModelConfig& c, const WeightSource& src);

}  // namespace qmpi
