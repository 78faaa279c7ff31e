// The pre-tokenizer's Split step: a regex from tokenizer.json, compiled with PCRE2 (UTF + Unicode
// properties, JIT when the platform has it), with Hugging Face's "Isolated" behaviour: every match
// is a piece and so is every stretch of text between matches, so no byte is ever dropped.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace qmpi {

class RegexSplitter {
 public:
  // Throws TokenizerInvalid naming `source` when PCRE2 rejects the pattern.
  RegexSplitter(const std::string& pattern, const std::string& source);
  ~RegexSplitter();
  RegexSplitter(RegexSplitter&&) noexcept;
  RegexSplitter& operator=(RegexSplitter&&) noexcept;

  // Appends the pieces of `text` (valid UTF-8) to `out`, in order; they concatenate to `text`.
  void split(std::string_view text, std::vector<std::string_view>& out) const;

 private:
  struct Compiled;
  std::unique_ptr<Compiled> re_;
};

}  // namespace qmpi
