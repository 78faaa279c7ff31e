#include "constrain/grammar.h"

#include <algorithm>
#include <map>

#include "core/errors.h"

namespace qmpi {
namespace gx {

namespace {
ExprP make(Expr e) {
  return std::make_shared<const Expr>(std::move(e));
}
}  // namespace

ExprP bytes(ByteSet set) {
  Expr e;
  e.kind = Expr::Kind::Bytes;
  e.bytes = set;
  return make(std::move(e));
}
ExprP byte_range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  s.set_range(lo, hi);
  return bytes(s);
}
ExprP lit(std::string_view text) {
  std::vector<ExprP> items;
  for (char c : text) items.push_back(byte_range(uint8_t(c), uint8_t(c)));
  return seq(std::move(items));
}
ExprP seq(std::vector<ExprP> items) {
  if (items.size() == 1) return items[0];
  Expr e;
  e.kind = Expr::Kind::Seq;
  e.items = std::move(items);
  return make(std::move(e));
}
ExprP alt(std::vector<ExprP> items) {
  if (items.size() == 1) return items[0];
  Expr e;
  e.kind = Expr::Kind::Alt;
  e.items = std::move(items);
  return make(std::move(e));
}
ExprP ref(int32_t rule) {
  Expr e;
  e.kind = Expr::Kind::Ref;
  e.rule = rule;
  return make(std::move(e));
}
ExprP repeat(ExprP item, int64_t min, int64_t max) {
  Expr e;
  e.kind = Expr::Kind::Repeat;
  e.items = {std::move(item)};
  e.min = min;
  e.max = max;
  return make(std::move(e));
}
ExprP opt(ExprP item) {
  return repeat(std::move(item), 0, 1);
}
ExprP empty() {
  return seq({});
}

}  // namespace gx

int32_t Grammar::add_rule(std::string name) {
  names_.push_back(std::move(name));
  bodies_.emplace_back();
  defined_.push_back(false);
  return int32_t(names_.size() - 1);
}

int32_t Grammar::find_rule(std::string_view name) const {
  for (size_t i = 0; i < names_.size(); ++i)
    if (names_[i] == name) return int32_t(i);
  return -1;
}

bool Grammar::defined(int32_t rule) const {
  return defined_[size_t(rule)];
}

void Grammar::check_size() const {
  if (symbols_ > kMaxGrammarSymbols)
    raise(Err::RequestField,
          "the constraint compiles to more than " + std::to_string(kMaxGrammarSymbols) +
              " grammar symbols",
          "Use smaller repetition bounds (maxLength, maxItems, {m,n}) or a smaller schema.");
}

int32_t Grammar::set_index(const ByteSet& s) {
  for (size_t i = 0; i < sets_.size(); ++i)
    if (sets_[i] == s) return int32_t(i);
  sets_.push_back(s);
  return int32_t(sets_.size() - 1);
}

int32_t Grammar::helper_rule(const std::vector<Symbols>& alts) {
  const int32_t r = add_rule("");
  bodies_[size_t(r)] = alts;
  defined_[size_t(r)] = true;
  for (const auto& a : alts) symbols_ += a.size() + 1;
  check_size();
  return int32_t(r);
}

void Grammar::lower(const ExprP& e, Symbols& out) {
  switch (e->kind) {
    case Expr::Kind::Bytes:
      out.push_back({Elem::Kind::Term, set_index(e->bytes)});
      break;
    case Expr::Kind::Seq:
      for (const auto& i : e->items) lower(i, out);
      break;
    case Expr::Kind::Ref:
      out.push_back({Elem::Kind::Ref, e->rule});
      break;
    case Expr::Kind::Alt: {
      std::vector<Symbols> alts(e->items.size());
      for (size_t i = 0; i < alts.size(); ++i) lower(e->items[i], alts[i]);
      out.push_back({Elem::Kind::Ref, helper_rule(alts)});
      break;
    }
    case Expr::Kind::Repeat: {
      Symbols item;
      lower(e->items[0], item);
      if (item.empty()) break;  // a repeated empty string is the empty string
      // A longer item becomes a rule of its own so that its copies are one symbol each.
      if (item.size() > 1) item = {{Elem::Kind::Ref, helper_rule({item})}};
      symbols_ += size_t(e->min);
      check_size();
      for (int64_t i = 0; i < e->min; ++i) out.push_back(item[0]);
      if (e->max < 0) {
        // star := item star | "" (right recursion, which the automaton runs in constant depth)
        const int32_t star = add_rule("");
        Symbols again = {item[0], {Elem::Kind::Ref, star}};
        bodies_[size_t(star)] = {again, {}};
        defined_[size_t(star)] = true;
        out.push_back({Elem::Kind::Ref, star});
      } else if (e->max > e->min) {
        // opt_k := item opt_{k-1} | "", built innermost first.
        if (e->max - e->min > int64_t(kMaxGrammarSymbols))
          raise(Err::RequestField, "a repetition bound of " + std::to_string(e->max) +
                                       " is more than a constraint can hold");
        int32_t inner = helper_rule({item, {}});
        for (int64_t k = 1; k < e->max - e->min; ++k)
          inner = helper_rule({{item[0], {Elem::Kind::Ref, inner}}, {}});
        out.push_back({Elem::Kind::Ref, inner});
      }
      break;
    }
  }
  symbols_ += 1;
  check_size();
}

void Grammar::define(int32_t rule, const ExprP& body) {
  std::vector<Symbols> alts;
  if (body->kind == Expr::Kind::Alt) {
    for (const auto& i : body->items) lower(i, alts.emplace_back());
  } else {
    lower(body, alts.emplace_back());
  }
  bodies_[size_t(rule)] = std::move(alts);
  defined_[size_t(rule)] = true;
}

void Grammar::finish(int32_t root) {
  const size_t n = names_.size();
  const auto label = [&](size_t r) {
    return names_[r].empty() ? std::string("(a part of another rule)") : "\"" + names_[r] + "\"";
  };
  for (size_t r = 0; r < n; ++r)
    if (!defined_[r]) raise(Err::RequestField, "rule " + label(r) + " is used but not defined");

  // Productive rules (they derive some finite string) and nullable ones, by fixpoint.
  std::vector<bool> productive(n, false), nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r)
      for (const auto& a : bodies_[r]) {
        bool prod = true, null = true;
        for (const Elem& e : a) {
          const bool is_ref = e.kind == Elem::Kind::Ref;
          prod = prod && (!is_ref || productive[size_t(e.arg)]);
          null = null && is_ref && nullable[size_t(e.arg)];
        }
        if (prod && !productive[r]) productive[r] = changed = true;
        if (null && !nullable[r]) nullable[r] = changed = true;
      }
  }
  // Only rules the root reaches matter (a GBNF file may hold unused ones).
  std::vector<bool> reached(n, false);
  std::vector<size_t> todo = {size_t(root)};
  reached[size_t(root)] = true;
  while (!todo.empty()) {
    const size_t r = todo.back();
    todo.pop_back();
    for (const auto& a : bodies_[r])
      for (const Elem& e : a)
        if (e.kind == Elem::Kind::Ref && !reached[size_t(e.arg)])
          reached[size_t(e.arg)] = true, todo.push_back(size_t(e.arg));
  }
  for (size_t r = 0; r < n; ++r)
    if (reached[r] && !productive[r])
      raise(Err::RequestField, "rule " + label(r) + " can never end: it matches no finite text " +
                                   "(every alternative needs itself again, or an empty class)");

  // Left recursion: r can start with s when s comes after a nullable prefix of r's alternative.
  std::vector<std::vector<size_t>> starts(n);
  for (size_t r = 0; r < n; ++r)
    for (const auto& a : bodies_[r])
      for (const Elem& e : a) {
        if (e.kind != Elem::Kind::Ref) break;
        starts[r].push_back(size_t(e.arg));
        if (!nullable[size_t(e.arg)]) break;
      }
  std::vector<uint8_t> mark(n, 0);  // 0 new, 1 on the path, 2 done
  for (size_t r0 = 0; r0 < n; ++r0) {
    if (mark[r0] || !reached[r0]) continue;
    std::vector<std::pair<size_t, size_t>> stack = {{r0, 0}};
    mark[r0] = 1;
    while (!stack.empty()) {
      auto& [r, i] = stack.back();
      if (i == starts[r].size()) {
        mark[r] = 2;
        stack.pop_back();
        continue;
      }
      const size_t s = starts[r][i++];
      if (mark[s] == 1)
        raise(Err::RequestField,
              "rule " + label(s) + " is left-recursive (it can start with " +
                  "itself); rewrite it with repetition, e.g. x ::= y (\",\" y)*");
      if (mark[s] == 0) {
        mark[s] = 1;
        stack.push_back({s, 0});
      }
    }
  }

  // Flatten: each alternative's symbols then End.
  elems_.clear();
  alts_.assign(n, {});
  for (size_t r = 0; r < n; ++r)
    for (const auto& a : bodies_[r]) {
      alts_[r].push_back(uint32_t(elems_.size()));
      elems_.insert(elems_.end(), a.begin(), a.end());
      elems_.push_back({Elem::Kind::End, 0});
    }
  bodies_.clear();
  bodies_.shrink_to_fit();
  root_ = root;
}

}  // namespace qmpi
