// Shared by the text tests: the real Qwen tokenizer (fetched by scripts/setup.sh) and a tiny
// byte-level BPE tokenizer.json built in memory.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "text/byte_level.h"
#include "text/qwen_tokenizer_json.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace qmpi::test {

inline const std::string kQwenTokenizerPath =
    std::string(QMPI_SOURCE_DIR) + "/.cache/qwen-tokenizer/tokenizer.json";

// Tests that need the real tokenizer derive from this; a missing file fails them (never skips).
class QwenTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!tokenizer_ && std::filesystem::exists(kQwenTokenizerPath))
      tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::load(kQwenTokenizerPath));
  }
  void SetUp() override {
    ASSERT_NE(tokenizer_, nullptr) << kQwenTokenizerPath
                                   << " is missing: run scripts/setup.sh to fetch the Qwen "
                                      "tokenizer";
  }
  const Tokenizer& tok() const { return *tokenizer_; }

 private:
  static inline std::unique_ptr<Tokenizer> tokenizer_;
};

// The byte-level spelling of raw bytes, e.g. " w" -> "Ġw".
inline std::string bl(std::string_view raw) {
  return byte_level::encode(raw);
}

// A byte-level BPE tokenizer.json in Qwen's form (text/qwen_tokenizer_json.h): ids 0..255 are
// the bytes in order, then one id per merge result in merge order, then `added` (objects in
// tokenizer.json's added_tokens form). `pair_merges` writes merges as ["a", "b"] instead of
// "a b".
inline nlohmann::json tiny_tokenizer(const std::vector<std::pair<std::string, std::string>>& merges,
                                     bool pair_merges = false,
                                     nlohmann::json added = nlohmann::json::array()) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[bl(std::string(1, static_cast<char>(b)))] = b;
  nlohmann::json merge_list = nlohmann::json::array();
  for (const auto& [a, b] : merges) {
    if (!vocab.contains(a + b)) vocab[a + b] = vocab.size();
    if (pair_merges)
      merge_list.push_back({a, b});
    else
      merge_list.push_back(a + " " + b);
  }
  return qwen_tokenizer_json(std::move(vocab), std::move(merge_list), std::move(added));
}

inline nlohmann::json added_token(int id, const std::string& content, bool special,
                                  bool normalized = false, bool lstrip = false, bool rstrip = false,
                                  bool single_word = false) {
  nlohmann::json t = added_token_json(id, content, special);
  t["normalized"] = normalized;
  t["lstrip"] = lstrip;
  t["rstrip"] = rstrip;
  t["single_word"] = single_word;
  return t;
}

inline Tokenizer from(const nlohmann::json& j, const std::string& config = "") {
  return Tokenizer::from_json(j.dump(), config, "tiny/tokenizer.json");
}

}  // namespace qmpi::test
