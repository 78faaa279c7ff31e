#include "requests/model_tokenizer.h"

#include <filesystem>

#include <spdlog/spdlog.h>

#include "core/errors.h"
#include "io/gguf_file.h"
#include "io/h5_checkpoint.h"
#include "text/gguf_tokenizer.h"

namespace qmpi {
namespace {

// A GGUF model's tokenizer: tokenizer.json beside the file, else the one the file embeds.
std::shared_ptr<const Tokenizer> gguf_tokenizer(const std::string& path) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (std::filesystem::exists(dir / "tokenizer.json")) {
    spdlog::info("tokenizer: {} (beside {}; it wins over the tokenizer the file embeds)",
                 (dir / "tokenizer.json").string(), path);
    return std::make_shared<const Tokenizer>(Tokenizer::load(dir.string()));
  }
  auto files = gguf_tokenizer_files(GgufFile(path));
  if (!files) return nullptr;
  spdlog::info("tokenizer: the one {} embeds (tokenizer.ggml.*)", path);
  return std::make_shared<const Tokenizer>(
      Tokenizer::from_json(files->tokenizer_json, files->config_json, path + ":tokenizer.ggml"));
}

}  // namespace

std::shared_ptr<const Tokenizer> find_model_tokenizer(const std::string& path) {
  if (path.empty()) return nullptr;
  if (is_gguf_path(path)) return gguf_tokenizer(path);
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
  const bool found =
      is_gguf_path(path) ? fs::exists(fs::path(path).parent_path() / "tokenizer.json", ec) ||
                               GgufFile(path).find("tokenizer.ggml.model") != nullptr
      : is_h5_path(path) ? read_h5_meta(path, "tokenizer.json").has_value()
                         : fs::exists((fs::is_directory(path, ec) ? fs::path(path)
                                                                  : fs::path(path).parent_path()) /
                                          "tokenizer.json",
                                      ec);
  if (!found)
    raise(Err::TokenizerMissing, "there is no tokenizer.json for the model at '" + path + "'",
          "Put the model's tokenizer.json (and tokenizer_config.json) beside config.json (or "
          "beside the .gguf file).");
}

}  // namespace qmpi
