// Reading tokenizer.json (and tokenizer_config.json) into a Tokenizer, with every check that
// decides whether our pipeline reproduces Hugging Face's for this file.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "text/byte_level.h"
#include "text/normalizer.h"
#include "text/tokenizer_impl.h"
#include "text/utf8.h"

namespace qmpi {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kUseOriginal = "Use the tokenizer.json from the model's repository.";

[[noreturn]] void invalid(const std::string& source, const std::string& what) {
  raise(Err::TokenizerInvalid, source + ": " + what, kUseOriginal);
}

std::string read_file(const fs::path& path, Err missing) {
  std::ifstream in(path, std::ios::binary);
  if (!in) raise(missing, path.string() + " cannot be opened");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A string, a null, or an object with "content" (the AddedToken form tokenizer_config.json
// sometimes uses): the token's text, or nothing.
std::optional<std::string> token_text(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content")) return j.at("content").get<std::string>();
  return std::nullopt;
}

bool flag(const json& j, const char* key, bool fallback) {
  return j.contains(key) && !j.at(key).is_null() ? j.at(key).get<bool>() : fallback;
}

std::string type_of(const json& j) {
  return j.is_object() && j.contains("type") ? j.at("type").get<std::string>() : std::string();
}

// Only NFC (alone, or as the sole kind in a Sequence) or no normalizer.
bool read_normalizer(const json& j, const std::string& source) {
  if (j.is_null()) return false;
  const std::string type = type_of(j);
  if (type == "NFC") return true;
  if (type == "Sequence") {
    bool any = false;
    for (const json& n : j.at("normalizers")) {
      if (type_of(n) != "NFC")
        invalid(source, "normalizer '" + type_of(n) +
                            "' is not supported (qmpi implements NFC, which Qwen uses)");
      any = true;
    }
    return any;
  }
  invalid(source,
          "normalizer '" + type + "' is not supported (qmpi implements NFC, which Qwen uses)");
}

// A Sequence of Split(Regex, Isolated) then ByteLevel(no prefix space, no built-in regex).
std::string read_split_pattern(const json& pre, const std::string& source) {
  const std::string expected =
      "the pre_tokenizer must be a Sequence of Split (a Regex, behavior Isolated) and ByteLevel "
      "(add_prefix_space false, use_regex false), as in Qwen's tokenizer.json";
  if (type_of(pre) != "Sequence" || !pre.contains("pretokenizers") ||
      pre.at("pretokenizers").size() != 2)
    invalid(source, expected + "; this file has '" + pre.dump(-1, ' ', true).substr(0, 200) + "'");
  const json& split = pre.at("pretokenizers")[0];
  const json& bytes = pre.at("pretokenizers")[1];
  if (type_of(split) != "Split" || type_of(bytes) != "ByteLevel")
    invalid(source, expected + "; this file has " + type_of(split) + " then " + type_of(bytes));
  if (!split.at("pattern").contains("Regex"))
    invalid(source,
            "the Split pre-tokenizer must use a Regex pattern, not " + split.at("pattern").dump());
  if (split.at("behavior").get<std::string>() != "Isolated" || flag(split, "invert", false))
    invalid(source,
            "the Split pre-tokenizer must have behavior Isolated and invert false; it has " +
                split.at("behavior").dump());
  if (flag(bytes, "add_prefix_space", false) || flag(bytes, "use_regex", false))
    invalid(source, "the ByteLevel pre-tokenizer must have add_prefix_space and use_regex false");
  return split.at("pattern").at("Regex").get<std::string>();
}

void check_model_options(const json& model, const std::string& source) {
  if (type_of(model) != "BPE")
    invalid(source, "model type '" + type_of(model) + "' is not supported (qmpi reads BPE)");
  if (flag(model, "byte_fallback", false))
    invalid(source, "BPE byte_fallback is not supported (qmpi reads byte-level BPE)");
  if (model.contains("dropout") && !model.at("dropout").is_null() &&
      model.at("dropout").get<double>() > 0)
    invalid(source, "BPE dropout must be null for inference");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && !model.at(key).is_null() &&
        !model.at(key).get<std::string>().empty())
      invalid(source, std::string("BPE ") + key + " must be empty for byte-level BPE");
}

void set_token(Tokenizer::Impl& t, int32_t id, std::string spelling, bool special) {
  if (static_cast<size_t>(id) >= t.spelling.size()) {
    t.spelling.resize(id + 1);
    t.bytes.resize(id + 1);
    t.present.resize(id + 1, false);
    t.special.resize(id + 1, false);
  }
  t.bytes[id] = byte_level::decode(spelling);
  t.ids_by_spelling[spelling] = id;
  t.spelling[id] = std::move(spelling);
  t.present[id] = true;
  t.special[id] = special;
}

// vocab and merges -> the Bpe, and the regular tokens into `t`. Returns the vocab's entry count.
size_t read_bpe(const json& model, Tokenizer::Impl& t, const std::string& source) {
  check_model_options(model, source);
  const json& vocab = model.at("vocab");
  if (!vocab.is_object() || vocab.empty())
    invalid(source, "model.vocab must be a non-empty object");
  auto& ids = t.ids_by_spelling;  // only regular tokens so far: added ones come later
  ids.reserve(vocab.size() + 1024);
  std::vector<bool> taken;
  for (const auto& [spelling, value] : vocab.items()) {
    const auto id = value.get<int64_t>();
    if (id < 0 || id > INT32_MAX)
      invalid(source, "vocab entry '" + spelling + "' has id " + std::to_string(id) +
                          ", outside 0.." + std::to_string(INT32_MAX));
    if (static_cast<size_t>(id) >= taken.size()) taken.resize(id + 1, false);
    if (taken[id]) invalid(source, "vocab id " + std::to_string(id) + " is used twice");
    taken[id] = true;
    set_token(t, static_cast<int32_t>(id), spelling, false);
  }

  std::array<int32_t, 256> byte_ids{};
  for (int b = 0; b < 256; ++b) {
    std::string s;
    utf8::append(s, byte_level::byte_to_char(static_cast<uint8_t>(b)));
    auto it = ids.find(s);
    if (it == ids.end()) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", b);
      invalid(source, std::string("the vocab lacks the byte-level symbol '") + s + "' of byte " +
                          hex + ", so it is not a byte-level BPE vocabulary");
    }
    byte_ids[b] = it->second;
  }

  const json& merges = model.at("merges");
  if (!merges.is_array()) invalid(source, "model.merges must be an array");
  std::unordered_map<uint64_t, Bpe::Merge> table;
  table.reserve(merges.size());
  auto id_of = [&](std::string_view s, size_t rank) {
    auto it = ids.find(s);
    if (it == ids.end())
      invalid(source, "merge " + std::to_string(rank) + " uses '" + std::string(s) +
                          "', which is not in the vocab");
    return it->second;
  };
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const json& m = merges[rank];
    std::string_view left, right;
    if (m.is_string()) {  // "a b"
      const std::string& s = m.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        invalid(source, "merge " + std::to_string(rank) + " '" + s +
                            "' is not two tokens separated by one space");
      left = std::string_view(s).substr(0, sp);
      right = std::string_view(s).substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get_ref<const std::string&>();  // ["a", "b"]
      right = m[1].get_ref<const std::string&>();
    } else {
      invalid(source, "merge " + std::to_string(rank) +
                          " is neither \"a b\" nor [\"a\", \"b\"]: " + m.dump());
    }
    const int32_t a = id_of(left, rank);
    const int32_t b = id_of(right, rank);
    joined.assign(left).append(right);
    const int32_t merged = id_of(joined, rank);
    // A pair listed twice keeps its last rank, as Hugging Face's loader does.
    table.insert_or_assign(Bpe::pair_key(a, b), Bpe::Merge{static_cast<int32_t>(rank), merged});
  }

  const bool ignore_merges = flag(model, "ignore_merges", false);
  StringMap<int32_t> whole;
  if (ignore_merges) {
    for (const auto& [spelling, id] : ids) {
      std::string raw = byte_level::decode(spelling);
      if (byte_level::encode(raw) == spelling) whole.emplace(std::move(raw), id);
    }
  }
  t.bpe.emplace(byte_ids, std::move(table), ignore_merges, std::move(whole));
  return vocab.size();
}

// Added tokens, with the ids Hugging Face would give them checked against the ids the file
// declares (it reassigns silently; a mismatch means the ids the model saw are uncertain).
void read_added_tokens(const json& list, size_t vocab_entries, Tokenizer::Impl& t,
                       const std::string& source) {
  std::vector<AddedToken> raw, normalized;
  std::unordered_map<std::string, int32_t> added;
  int64_t max_added = -1;
  for (const json& j : list) {
    AddedToken tok;
    tok.content = j.at("content").get<std::string>();
    if (tok.content.empty()) continue;  // Hugging Face ignores these too
    const auto declared = j.at("id").get<int64_t>();
    tok.special = flag(j, "special", false);
    tok.lstrip = flag(j, "lstrip", false);
    tok.rstrip = flag(j, "rstrip", false);
    tok.single_word = flag(j, "single_word", false);
    tok.normalized = flag(j, "normalized", true);
    if (tok.normalized && t.nfc) tok.content = nfc(tok.content);

    int64_t expected;
    if (auto a = added.find(tok.content); a != added.end()) {
      expected = a->second;
    } else if (auto v = t.ids_by_spelling.find(tok.content); v != t.ids_by_spelling.end()) {
      expected = v->second;  // already a vocab entry: the token keeps that id
    } else {
      const auto model_size = static_cast<int64_t>(vocab_entries);
      expected = max_added >= model_size ? max_added + 1 : model_size;
    }
    if (declared != expected)
      invalid(source, "added token '" + tok.content + "' declares id " + std::to_string(declared) +
                          " but Hugging Face's loader would give it id " +
                          std::to_string(expected) + " (ids must follow the vocab in order)");
    if (added.count(tok.content)) continue;
    tok.id = static_cast<int32_t>(declared);
    added.emplace(tok.content, tok.id);
    if (tok.id >= static_cast<int32_t>(vocab_entries)) max_added = std::max(max_added, declared);
    set_token(t, tok.id, tok.content, tok.special);
    (tok.normalized ? normalized : raw).push_back(std::move(tok));
  }
  t.raw_added = AddedTokenMatcher(std::move(raw));
  t.normalized_added = AddedTokenMatcher(std::move(normalized));
}

std::optional<int32_t> config_token(const json& cfg, const char* key, const Tokenizer::Impl& t,
                                    const std::string& source) {
  if (!cfg.contains(key)) return std::nullopt;
  auto text = token_text(cfg.at(key));
  if (!text) return std::nullopt;
  auto it = t.ids_by_spelling.find(*text);
  if (it == t.ids_by_spelling.end())
    raise(Err::TokenizerInvalid,
          source + ": " + key + " '" + *text + "' is not a token of tokenizer.json",
          "Use the tokenizer_config.json that ships with this tokenizer.json.");
  return it->second;
}

}  // namespace

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, std::string_view config_json,
                               const std::string& source) {
  auto t = std::make_unique<Impl>();
  t->source = source;
  json doc;
  try {
    doc = json::parse(tokenizer_json);
  } catch (const json::exception& e) {
    invalid(source, std::string("not valid JSON (") + e.what() + ")");
  }
  try {
    if (!doc.is_object() || !doc.contains("model")) invalid(source, "has no \"model\" section");
    t->nfc = read_normalizer(doc.value("normalizer", json()), source);
    const size_t entries = read_bpe(doc.at("model"), *t, source);
    if (doc.contains("added_tokens") && !doc.at("added_tokens").is_null())
      read_added_tokens(doc.at("added_tokens"), entries, *t, source);
    t->splitter.emplace(read_split_pattern(doc.value("pre_tokenizer", json()), source), source);
    if (type_of(doc.value("decoder", json())) != "ByteLevel")
      invalid(source, "the decoder must be ByteLevel; this file has '" +
                          doc.value("decoder", json()).dump() + "'");
  } catch (const json::exception& e) {
    invalid(source, std::string("unexpected structure (") + e.what() + ")");
  }

  if (!config_json.empty()) {
    const std::string cfg_source =
        (fs::path(source).parent_path() / "tokenizer_config.json").string();
    try {
      const json cfg = json::parse(config_json);
      t->eos = config_token(cfg, "eos_token", *t, cfg_source);
      t->pad = config_token(cfg, "pad_token", *t, cfg_source);
    } catch (const json::exception& e) {
      raise(Err::TokenizerInvalid, cfg_source + " cannot be read (" + e.what() + ")",
            "Use the tokenizer_config.json from the model's repository.");
    }
  }
  return Tokenizer(std::move(t));
}

Tokenizer Tokenizer::load(const std::string& path) {
  const std::string fix =
      "Copy tokenizer.json and tokenizer_config.json from the model's repository next to "
      "config.json.";
  fs::path file(path);
  std::error_code ec;
  if (fs::is_directory(file, ec)) {
    file /= "tokenizer.json";
    if (!fs::is_regular_file(file, ec))
      raise(Err::TokenizerMissing, path + " has no tokenizer.json", fix);
  } else if (!fs::is_regular_file(file, ec)) {
    raise(Err::TokenizerMissing,
          path + " does not exist (expected a model folder or its tokenizer.json)", fix);
  }
  const std::string text = read_file(file, Err::TokenizerMissing);
  const fs::path cfg = file.parent_path() / "tokenizer_config.json";
  const std::string cfg_text = fs::is_regular_file(cfg, ec) ? read_file(cfg, Err::InputFile) : "";
  return from_json(text, cfg_text, file.string());
}

}  // namespace qmpi
