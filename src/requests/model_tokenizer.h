// The tokenizer a model comes with: tokenizer.json in its folder (or beside its config.json),
// or the one stored in a qmpi .h5.
#pragma once
#include <memory>
#include <string>

#include "text/tokenizer.h"

namespace qmpi {

// find_ returns null when there is none; load_ raises TokenizerMissing.
std::shared_ptr<const Tokenizer> find_model_tokenizer(const std::string& path);
std::shared_ptr<const Tokenizer> load_model_tokenizer(const std::string& path);
// Raises TokenizerMissing when the model at `path` has none, without reading it: commands that
// need one call it before the weights load, so that they fail in a second instead of after.
// (A path that does not exist is left for the engine to report.)
void require_model_tokenizer(const std::string& path);

}  // namespace qmpi
