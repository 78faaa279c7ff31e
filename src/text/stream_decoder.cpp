#include "text/stream_decoder.h"

#include "core/errors.h"
#include "text/utf8.h"

namespace qmpi {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string StreamDecoder::push(int32_t id) {
  if (!tokenizer_.has_token(id))
    raise(Err::RequestField, "token id " + std::to_string(id) + " has no token in " +
                                 tokenizer_.source() + " (ids run 0.." +
                                 std::to_string(tokenizer_.vocab_size() - 1) + ")");
  if (skip_special_ && tokenizer_.is_special(id)) return {};
  pending_ += tokenizer_.token_bytes(id);
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const utf8::Unit u = utf8::next_unit(std::string_view(pending_).substr(i));
    if (u.kind == utf8::Unit::Incomplete) break;  // the next token may complete it
    if (u.kind == utf8::Unit::Char)
      out.append(pending_, i, u.len);
    else
      out.append(utf8::kReplacement);
    i += u.len;
  }
  pending_.erase(0, i);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = utf8::make_valid(pending_);
  pending_.clear();
  return out;
}

}  // namespace qmpi
