#include "requests/draft_tokenizer.h"

#include "core/errors.h"
#include "requests/model_tokenizer.h"

namespace qmpi {
namespace {

std::string id_text(const std::optional<int32_t>& id) {
  return id ? std::to_string(*id) : "none";
}

}  // namespace

std::optional<std::string> tokenizer_difference(const Tokenizer& t, const Tokenizer& d) {
  if (t.vocab_size() != d.vocab_size())
    return "the model's tokenizer has " + std::to_string(t.vocab_size()) + " tokens, the draft's " +
           std::to_string(d.vocab_size());
  for (int32_t id = 0; id < t.vocab_size(); ++id) {
    const auto a = t.id_to_token(id), b = d.id_to_token(id);
    if (a != b)
      return "token id " + std::to_string(id) + " is '" + a.value_or("(none)") +
             "' for the model and '" + b.value_or("(none)") + "' for the draft";
    if (a && t.is_special(id) != d.is_special(id))
      return "token id " + std::to_string(id) + " ('" + *a + "') is special for " +
             (t.is_special(id) ? "the model only" : "the draft only");
  }
  if (t.eos_id() != d.eos_id())
    return "the eos token is id " + id_text(t.eos_id()) + " for the model and " +
           id_text(d.eos_id()) + " for the draft";
  if (t.pad_id() != d.pad_id())
    return "the pad token is id " + id_text(t.pad_id()) + " for the model and " +
           id_text(d.pad_id()) + " for the draft";
  return std::nullopt;
}

void check_draft_tokenizer(const std::string& target_path, const std::string& draft_path) {
  const auto target = load_model_tokenizer(target_path);
  const auto draft = load_model_tokenizer(draft_path);
  if (const auto diff = tokenizer_difference(*target, *draft))
    raise(Err::DraftVocabMismatch, "the draft model " + draft_path + " cannot guess for " +
                                       target_path + ": " + *diff + " (" + target->source() +
                                       " vs " + draft->source() + ")");
}

}  // namespace qmpi
