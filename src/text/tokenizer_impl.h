// The parts of a loaded Tokenizer, shared by its loader (tokenizer_loader.cpp) and its runtime
// (tokenizer.cpp). Not for use outside src/text.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "text/added_tokens.h"
#include "text/bpe.h"
#include "text/regex_splitter.h"
#include "text/string_map.h"
#include "text/tokenizer.h"

namespace qmpi {

struct Tokenizer::Impl {
  std::string source;

  // Indexed by id; an id no token has keeps an empty spelling and present = false.
  std::vector<std::string> spelling;  // as written in tokenizer.json ("Ġthe", "<|im_end|>")
  std::vector<std::string> bytes;     // what the id decodes to
  std::vector<bool> present;
  std::vector<bool> special;
  StringMap<int32_t> ids_by_spelling;

  bool nfc = false;
  AddedTokenMatcher raw_added;         // matched before normalization
  AddedTokenMatcher normalized_added;  // matched on the NFC text
  std::optional<RegexSplitter> splitter;
  std::optional<Bpe> bpe;

  std::optional<int32_t> eos;
  std::optional<int32_t> pad;
};

}  // namespace qmpi
