// Before a draft model (--speculative-config "model") loads: its tokenizer must be the target's,
// id for id, since its guesses are token ids the target checks as its own. Only the tokenizers
// are compared: config.json's vocab_size may differ (Qwen2.5 pads one tokenizer to 151936 rows
// in its small checkpoints and to 152064 in its large ones), and the draft never guesses an id
// past either model's rows (engine/draft_model_proposer.h).
#pragma once
#include <optional>
#include <string>

#include "text/tokenizer.h"

namespace qmpi {

// The first difference between the two vocabularies (size, an id's token, which ids are
// special, eos and pad), in words; none when they agree.
std::optional<std::string> tokenizer_difference(const Tokenizer& target, const Tokenizer& draft);

// Loads both models' tokenizers and raises DraftVocabMismatch naming the first difference
// (TokenizerMissing when either model has none).
void check_draft_tokenizer(const std::string& target_path, const std::string& draft_path);

}  // namespace qmpi
