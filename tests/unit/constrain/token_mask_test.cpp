// The vocabulary walk against brute force: a token is allowed exactly when feeding its bytes
// one by one keeps the automaton alive; stop ids come only where the grammar accepts; special
// tokens never; the gate holds the constraint back until </think>.
#include <gtest/gtest.h>

#include <random>

#include "constrain/grammar_token_constraint.h"
#include "match_helpers.h"

namespace qmpi {
namespace {

// Byte strings a BPE vocabulary might hold: single bytes, JSON-ish pieces, multi-byte
// characters and their halves; id 40 is "special" (empty: never allowed).
std::shared_ptr<const VocabIndex> toy_vocab() {
  std::vector<std::string> bytes = {"{",        "}",   "\"",   ":",     ",",    " ",    "\"a",
                                    "a\"",      "\":", "\": ", "{\"",   "true", "tr",   "ue",
                                    "1",        "12",  "-",    "0",     "null", "\xC3", "\xA9",
                                    "\xC3\xA9", "\"}", "ab",   "b",     "[",    "]",    "],",
                                    "1,",       " \"", "x",    "\n",    "\\",   "\\n",  "\"\"",
                                    "}\n",      "</",  "tool", "_call", ">"};
  bytes.resize(41);  // id 40: special
  return std::make_shared<const VocabIndex>(bytes, 50);
}

void expect_masks_match_brute_force(ConstraintKind kind, const std::string& text, unsigned seed) {
  const auto vocab = toy_vocab();
  CompiledConstraint c(compile_grammar({kind, text}), vocab);
  std::mt19937 rng(seed);
  for (int walk = 0; walk < 20; ++walk) {
    GrammarPosition at = c.start();
    for (int step = 0; step < 30; ++step) {
      const auto mask = c.mask(at);
      std::vector<int32_t> ok;
      for (int32_t id = 0; id < 50; ++id) {
        GrammarPosition probe = at;
        const bool has_bytes = !vocab->bytes(id).empty();
        if (has_bytes) c.advance(probe, id);
        const bool want = has_bytes && !probe.dead;
        const bool got = ((*mask)[size_t(id) / 64] >> (id % 64)) & 1;
        EXPECT_EQ(got, want) << text << ": token " << id << " at step " << step;
        if (want) ok.push_back(id);
      }
      if (ok.empty()) {
        EXPECT_TRUE(at.accept) << text << ": a state with no allowed token that is not accepting";
        break;
      }
      c.advance(at, ok[rng() % ok.size()]);
      ASSERT_FALSE(at.dead);
    }
  }
}

TEST(TokenMask, AgreesWithBruteForce) {
  expect_masks_match_brute_force(ConstraintKind::JsonSchema,
                                 R"({"type": "object", "properties": {"a": {"type": "boolean"},
                                     "ab": {"type": "array", "items": {"type": "integer"}, "maxItems": 3}},
                                     "required": ["a"]})",
                                 1);
  expect_masks_match_brute_force(ConstraintKind::JsonObject, "", 2);
  expect_masks_match_brute_force(ConstraintKind::Regex, "(ab|\xC3\xA9)+x?", 3);
  expect_masks_match_brute_force(ConstraintKind::JsonSchema,
                                 R"({"type": "string", "maxLength": 4})", 4);
}

TEST(TokenMask, StopIdsOnlyWhereTheGrammarAccepts) {
  auto compiled = std::make_shared<CompiledConstraint>(
      compile_grammar({ConstraintKind::Choice, R"(["true", "null"])"}), toy_vocab());
  GrammarTokenConstraint tc(compiled, {40, 45});
  auto st = tc.start();
  const auto bit = [](const std::vector<uint64_t>& m, int id) {
    return (m[size_t(id) / 64] >> (id % 64)) & 1;
  };
  auto m = st->allowed();
  EXPECT_FALSE(bit(m, 40));
  EXPECT_TRUE(bit(m, 11));   // "true"
  EXPECT_TRUE(bit(m, 12));   // "tr"
  EXPECT_TRUE(bit(m, 18));   // "null"
  EXPECT_FALSE(bit(m, 14));  // "1"
  st->advance(12);
  m = st->allowed();
  EXPECT_TRUE(bit(m, 13));  // "ue"
  EXPECT_FALSE(bit(m, 45));
  st->advance(13);
  m = st->allowed();
  for (int id = 0; id < 50; ++id) EXPECT_EQ(bit(m, id), id == 40 || id == 45) << id;
}

TEST(TokenMask, GateLeavesEverythingFreeUntilItsToken) {
  auto compiled = std::make_shared<CompiledConstraint>(
      compile_grammar({ConstraintKind::Choice, R"(["b"])"}), toy_vocab());
  GrammarTokenConstraint tc(compiled, {40}, 30);
  auto st = tc.start();
  EXPECT_TRUE(st->allowed().empty());
  st->advance(24);  // "b", inside the thinking: no effect
  EXPECT_TRUE(st->allowed().empty());
  st->advance(30);  // the gate
  const auto m = st->allowed();
  ASSERT_FALSE(m.empty());
  EXPECT_TRUE((m[0] >> 24) & 1);
  EXPECT_FALSE((m[0] >> 23) & 1);
}

}  // namespace
}  // namespace qmpi
