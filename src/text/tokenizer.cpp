#include "text/tokenizer.h"

#include "core/errors.h"
#include "text/normalizer.h"
#include "text/tokenizer_impl.h"
#include "text/utf8.h"

namespace qmpi {

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  return encode_impl(text, parse_special, {});
}

std::vector<int32_t> Tokenizer::encode(std::string_view text,
                                       std::span<const TextRange> plain) const {
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const TextRange& r : plain)
    if (r.end > r.begin) ranges.emplace_back(r.begin, std::min(r.end, text.size()));
  return encode_impl(text, true, ranges);
}

std::vector<int32_t> Tokenizer::encode_impl(
    std::string_view text, bool parse_special,
    std::span<const std::pair<size_t, size_t>> plain) const {
  const Impl& t = *impl_;
  if (const size_t bad = utf8::find_invalid(text); bad != text.size())
    raise(Err::RequestField,
          "the text to tokenize is not valid UTF-8 (first bad byte at offset " +
              std::to_string(bad) + ")",
          "Send text as UTF-8; JSON strings must not carry lone surrogate escapes.");

  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  std::vector<TextSegment> outer, inner;
  std::vector<std::string_view> pieces;
  std::string normalized;
  t.raw_added.split(text, parse_special, outer, plain);
  for (const TextSegment& seg : outer) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    std::string_view part = text.substr(seg.begin, seg.end - seg.begin);
    if (t.nfc) {
      normalized = nfc(part);
      part = normalized;
    }
    inner.clear();
    // Offsets move under NFC; a segment that holds any plain byte is wholly plain here.
    bool has_plain = false;
    for (const auto& [b, e] : plain) has_plain = has_plain || (b < seg.end && e > seg.begin);
    t.normalized_added.split(part, parse_special && !has_plain, inner);
    for (const TextSegment& s : inner) {
      if (s.id >= 0) {
        ids.push_back(s.id);
        continue;
      }
      pieces.clear();
      t.splitter->split(part.substr(s.begin, s.end - s.begin), pieces);
      for (std::string_view p : pieces) t.bpe->encode(p, ids);
    }
  }
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) {
    if (!has_token(id))
      raise(Err::RequestField, "token id " + std::to_string(id) + " has no token in " +
                                   impl_->source + " (ids run 0.." +
                                   std::to_string(vocab_size() - 1) + ")");
    if (skip_special && impl_->special[id]) continue;
    out += impl_->bytes[id];
  }
  return utf8::make_valid(out);
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->ids_by_spelling.find(token);
  if (it == impl_->ids_by_spelling.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (!has_token(id)) return std::nullopt;
  return impl_->spelling[id];
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  return impl_->bytes[id];
}

bool Tokenizer::has_token(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->present.size() && impl_->present[id];
}

bool Tokenizer::is_special(int32_t id) const {
  return has_token(id) && impl_->special[id];
}

int32_t Tokenizer::vocab_size() const {
  return static_cast<int32_t>(impl_->present.size());
}
std::optional<int32_t> Tokenizer::eos_id() const {
  return impl_->eos;
}
std::optional<int32_t> Tokenizer::pad_id() const {
  return impl_->pad;
}
const std::string& Tokenizer::source() const {
  return impl_->source;
}

}  // namespace qmpi
