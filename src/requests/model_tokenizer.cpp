#include "requests/model_tokenizer.h"

#include <filesystem>

#include "core/errors.h"
#include "io/h5_checkpoint.h"

namespace qmpi {

std::shared_ptr<const Tokenizer> find_model_tokenizer(const std::string& path) {
  if (path.empty()) return nullptr;
  if (is_h5_path(path)) {
    const auto json = read_h5_meta(path, "tokenizer.json");
    if (!json) return nullptr;
    return std::make_shared<const Tokenizer>(
        Tokenizer::from_json(*json, read_h5_meta(path, "tokenizer_config.json").value_or(""),
                             path + ":/meta/tokenizer.json"));
  }
  std::filesystem::path dir = path;
  if (!std::filesystem::is_directory(dir)) dir = dir.parent_path();  // config.json or the file
  if (!std::filesystem::exists(dir / "tokenizer.json")) return nullptr;
  return std::make_shared<const Tokenizer>(Tokenizer::load(dir.string()));
}

std::shared_ptr<const Tokenizer> load_model_tokenizer(const std::string& path) {
  auto tok = find_model_tokenizer(path);
  if (!tok)
    raise(Err::TokenizerMissing, "there is no tokenizer.json for the model at '" + path + "'",
          "Put the model's tokenizer.json (and tokenizer_config.json) beside config.json.");
  return tok;
}

void require_model_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty() || !fs::exists(path, ec)) return;
  const bool found = is_h5_path(path)
                         ? read_h5_meta(path, "tokenizer.json").has_value()
                         : fs::exists((fs::is_directory(path, ec) ? fs::path(path)
                                                                  : fs::path(path).parent_path()) /
                                          "tokenizer.json",
                                      ec);
  if (!found)
    raise(Err::TokenizerMissing, "there is no tokenizer.json for the model at '" + path + "'",
          "Put the model's tokenizer.json (and tokenizer_config.json) beside config.json.");
}

}  // namespace qmpi
