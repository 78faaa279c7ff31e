// The one grammar form every constraint compiles to (JSON Schema, regex, choice, GBNF): rules
// made of alternatives, each a sequence of byte classes and references to other rules. Compilers
// build expressions (Expr) and define rules with them; finish() lowers the rules into the flat
// table the automaton walks and checks that every rule can end and none is left-recursive (the
// automaton expands rules top-down, so both would make it loop or stall).
#pragma once
#include <compare>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace qmpi {

struct ByteSet {
  uint64_t w[4] = {0, 0, 0, 0};
  bool test(uint8_t b) const { return (w[b >> 6] >> (b & 63)) & 1; }
  void set(uint8_t b) { w[b >> 6] |= uint64_t(1) << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) set(uint8_t(b));
  }
  auto operator<=>(const ByteSet&) const = default;
};

struct Expr;
using ExprP = std::shared_ptr<const Expr>;

struct Expr {
  enum class Kind : uint8_t { Bytes, Seq, Alt, Ref, Repeat };
  Kind kind = Kind::Seq;
  ByteSet bytes;             // Bytes: one byte from the set
  std::vector<ExprP> items;  // Seq, Alt; Repeat: its one item
  int32_t rule = -1;         // Ref
  int64_t min = 0, max = 0;  // Repeat; max < 0: no upper bound
};

namespace gx {
ExprP bytes(ByteSet set);
ExprP byte_range(uint8_t lo, uint8_t hi);
ExprP lit(std::string_view text);  // the exact bytes
ExprP seq(std::vector<ExprP> items);
ExprP alt(std::vector<ExprP> items);  // no items: matches nothing
ExprP ref(int32_t rule);
ExprP repeat(ExprP item, int64_t min, int64_t max);
ExprP opt(ExprP item);
ExprP empty();  // the empty string
}  // namespace gx

// Bounds on a compiled grammar's size (docs/user-guide.md, "Structured output").
constexpr size_t kMaxGrammarSymbols = 1 << 21;

class Grammar {
 public:
  struct Elem {
    enum class Kind : uint8_t { Term, Ref, End };
    Kind kind = Kind::End;
    int32_t arg = 0;  // Term: index into sets(); Ref: the rule
  };

  // Declares a rule (defined later, so that rules can refer to each other).
  int32_t add_rule(std::string name);
  int32_t find_rule(std::string_view name) const;  // -1 when absent
  void define(int32_t rule, const ExprP& body);
  bool defined(int32_t rule) const;
  // Lowers and checks; `root` is where matching starts. Raises `err` (RequestField or
  // FieldUnsupported) naming the rule for an undefined, endless or left-recursive one.
  void finish(int32_t root);

  int32_t root() const { return root_; }
  const std::vector<Elem>& elems() const { return elems_; }
  // Where each alternative of `rule` starts in elems().
  const std::vector<uint32_t>& alternatives(int32_t rule) const { return alts_[size_t(rule)]; }
  const std::vector<ByteSet>& sets() const { return sets_; }
  size_t num_rules() const { return names_.size(); }
  const std::string& name(int32_t rule) const { return names_[size_t(rule)]; }
  size_t size() const { return elems_.size(); }

 private:
  using Symbols = std::vector<Elem>;
  void lower(const ExprP& e, Symbols& out);
  int32_t set_index(const ByteSet& s);
  int32_t helper_rule(const std::vector<Symbols>& alts);
  void check_size() const;

  std::vector<std::string> names_;
  std::vector<std::vector<Symbols>> bodies_;  // per rule, its alternatives (before finish)
  std::vector<bool> defined_;
  std::vector<ByteSet> sets_;
  std::vector<Elem> elems_;
  std::vector<std::vector<uint32_t>> alts_;
  size_t symbols_ = 0;
  int32_t root_ = -1;
};

}  // namespace qmpi
