#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/regex_splitter.h"

#include <pcre2.h>

#include "core/errors.h"

namespace qmpi {
namespace {

// JIT code keeps its backtracking state on a stack: 32 KiB of the calling thread's own by default
// (which keeps concurrent calls independent); a subject that needs more is matched again with a
// private stack of this size.
constexpr size_t kJitStackBytes = 64 << 20;

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

// Hugging Face compiles the pattern with Oniguruma, whose \s in Unicode mode is exactly the
// White_Space property. PCRE2's \s (UCP) also takes U+180E, which left White_Space in Unicode 6.3,
// so \s and \S are spelled as the property here. Everything else passes through unchanged; \Q..\E
// literals are copied as they are.
std::string to_pcre2(const std::string& pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c != '\\' || i + 1 == pattern.size()) {
      out.push_back(c);
      continue;
    }
    const char e = pattern[++i];
    if (e == 's') {
      out += "\\p{White_Space}";
    } else if (e == 'S') {
      out += "\\P{White_Space}";
    } else if (e == 'Q') {
      const size_t end = pattern.find("\\E", i + 1);
      const size_t stop = end == std::string::npos ? pattern.size() : end + 2;
      out.append(pattern, i - 1, stop - (i - 1));
      i = stop - 1;
    } else {
      out.push_back(c);
      out.push_back(e);
    }
  }
  return out;
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

// A match context with a large JIT stack, made only for the rare subject that needs one.
class BigStack {
 public:
  BigStack()
      : stack_(pcre2_jit_stack_create(32 << 10, kJitStackBytes, nullptr)),
        ctx_(pcre2_match_context_create(nullptr)) {
    if (!stack_ || !ctx_) raise(Err::Internal, "PCRE2 could not allocate a JIT stack");
    pcre2_jit_stack_assign(ctx_.get(), nullptr, stack_.get());
  }
  pcre2_match_context* context() const { return ctx_.get(); }

 private:
  struct FreeStack {
    void operator()(pcre2_jit_stack* s) const { pcre2_jit_stack_free(s); }
  };
  struct FreeContext {
    void operator()(pcre2_match_context* c) const { pcre2_match_context_free(c); }
  };
  std::unique_ptr<pcre2_jit_stack, FreeStack> stack_;
  std::unique_ptr<pcre2_match_context, FreeContext> ctx_;  // declared last: freed first
};

}  // namespace

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  std::string source;

  ~Compiled() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(const std::string& pattern, const std::string& source)
    : re_(std::make_unique<Compiled>()) {
  re_->source = source;
  int err = 0;
  PCRE2_SIZE err_at = 0;
  const std::string translated = to_pcre2(pattern);
  re_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                            PCRE2_UTF | PCRE2_UCP, &err, &err_at, nullptr);
  if (!re_->code)
    raise(Err::TokenizerInvalid,
          source + ": the pre-tokenizer regex does not compile with PCRE2 (" + pcre2_message(err) +
              " at offset " + std::to_string(err_at) + " of '" + translated + "')");
  // Without JIT support pcre2_match falls back to the interpreter by itself.
  pcre2_jit_compile(re_->code, PCRE2_JIT_COMPLETE);
}

RegexSplitter::~RegexSplitter() = default;
RegexSplitter::RegexSplitter(RegexSplitter&&) noexcept = default;
RegexSplitter& RegexSplitter::operator=(RegexSplitter&&) noexcept = default;

void RegexSplitter::split(std::string_view text, std::vector<std::string_view>& out) const {
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(
      pcre2_match_data_create_from_pattern(re_->code, nullptr));
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::unique_ptr<BigStack> big;
  size_t pos = 0;   // where the next search starts
  size_t done = 0;  // text before this offset has been emitted
  while (pos < text.size()) {
    // The caller validated the UTF-8 once; checking it again on every call would make long
    // lines quadratic.
    int rc = pcre2_match(re_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md.get(),
                         big ? big->context() : nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !big) {
      big = std::make_unique<BigStack>();
      rc = pcre2_match(re_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md.get(),
                       big->context());
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0)
      raise(Err::TokenizerInvalid, re_->source + ": the pre-tokenizer regex failed on the input (" +
                                       pcre2_message(rc) + ")");
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    const size_t start = ov[0];
    const size_t end = ov[1];
    if (end == start) {
      // An empty match makes no piece; search again one character further on.
      pos = start + 1;
      while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (start > done) out.push_back(text.substr(done, start - done));
    out.push_back(text.substr(start, end - start));
    done = pos = end;
  }
  if (done < text.size()) out.push_back(text.substr(done));
}

}  // namespace qmpi
