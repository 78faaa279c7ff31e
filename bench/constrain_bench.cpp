// Structured-output costs on rank 0 with the real tokenizer: building the vocabulary index,
// compiling a 50-property schema and a 200-rule grammar (cold, and as a cache hit), and the
// allowed-token mask per token per sequence (p50/p99) while random walks through the
// automaton sample uniformly among the allowed tokens. Usage:
//   qmpi_constrain_bench [tokenizer folder] [sequences] [tokens per sequence]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "constrain/constraint_cache.h"
#include "constrain/grammar_token_constraint.h"
#include "text/tokenizer.h"

namespace {

using clk = std::chrono::steady_clock;
double ms_since(clk::time_point t0) {
  return std::chrono::duration<double, std::milli>(clk::now() - t0).count();
}

std::string fifty_property_schema() {
  std::string s = R"({"type": "object", "properties": {)";
  const char* kinds[] = {R"({"type": "string", "maxLength": 12})",
                         R"({"type": "integer", "minimum": 0, "maximum": 5000})",
                         R"({"type": "boolean"})", R"({"enum": ["red", "green", "blue"]})",
                         R"({"type": "array", "items": {"type": "number"}, "maxItems": 4})"};
  std::string req;
  for (int i = 0; i < 50; ++i) {
    s += (i ? ", " : "") + std::string("\"field_") + std::to_string(i) + "\": " + kinds[i % 5];
    if (i % 2 == 0)
      req += (req.empty() ? "" : ", ") + std::string("\"field_") + std::to_string(i) + "\"";
  }
  return s + "}, \"required\": [" + req + "]}";
}

std::string two_hundred_rule_grammar() {
  std::string g = "root ::= \"[\" r0 (\",\" r0)* \"]\"\n";
  for (int i = 0; i < 199; ++i)
    g += "r" + std::to_string(i) + " ::= \"k" + std::to_string(i) + "=\" [a-z0-9]{1,4} " +
         (i + 1 < 199 ? "(\";\" r" + std::to_string(i + 1) + ")?" : "") + "\n";
  return g;
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace qmpi;
  const std::string dir = argc > 1 ? argv[1] : ".cache/qwen-tokenizer";
  const int seqs = argc > 2 ? std::stoi(argv[2]) : 16;
  const int tokens = argc > 3 ? std::stoi(argv[3]) : 200;
  const Tokenizer tok = Tokenizer::load(dir);
  auto t0 = clk::now();
  const auto vocab = VocabIndex::from_tokenizer(tok, tok.vocab_size());
  std::printf("vocabulary index: %d ids, %zu trie nodes, %.1f ms\n", tok.vocab_size(),
              vocab->nodes().size(), ms_since(t0));

  ConstraintCache cache;
  const ConstraintSource schema{ConstraintKind::JsonSchema, fifty_property_schema()};
  const ConstraintSource gbnf{ConstraintKind::Gbnf, two_hundred_rule_grammar()};
  for (const auto* src : {&schema, &gbnf}) {
    t0 = clk::now();
    const auto c = cache.get(*src, vocab);
    const double cold = ms_since(t0);
    t0 = clk::now();
    cache.get(*src, vocab);
    std::printf("%s: compile %.2f ms (%zu symbols), cache hit %.4f ms\n",
                src == &schema ? "50-property schema" : "200-rule grammar", cold, c->grammar_size(),
                ms_since(t0));
  }

  const int32_t eos = tok.token_to_id("<|im_end|>").value_or(0);
  for (const auto* src : {&schema, &gbnf}) {
    auto compiled = cache.get(*src, vocab);
    GrammarTokenConstraint tc(compiled, {eos});
    std::vector<double> times;
    std::mt19937 rng(1);
    int finished = 0;
    for (int s = 0; s < seqs; ++s) {
      auto st = tc.start();
      for (int i = 0; i < tokens; ++i) {
        t0 = clk::now();
        const auto m = st->allowed();
        times.push_back(ms_since(t0));
        std::vector<int32_t> ok;
        for (size_t w = 0; w < m.size(); ++w)
          for (uint64_t bits = m[w]; bits; bits &= bits - 1)
            ok.push_back(int32_t(w * 64 + size_t(__builtin_ctzll(bits))));
        if (ok.empty()) break;
        const int32_t pick = ok[rng() % ok.size()];
        if (pick == eos) {
          ++finished;
          break;
        }
        st->advance(pick);
      }
    }
    const auto stats = compiled->stats();
    std::printf(
        "%s masks: %zu calls, p50 %.3f ms, p99 %.3f ms, max %.2f ms; %llu walks (%.2f ms each), "
        "%llu cache hits; %d of %d walks reached the end\n",
        src == &schema ? "schema" : "grammar", times.size(), pct(times, 0.5), pct(times, 0.99),
        pct(times, 1.0), (unsigned long long)stats.masks_computed,
        stats.masks_computed ? stats.compute_seconds * 1e3 / double(stats.masks_computed) : 0.0,
        (unsigned long long)stats.mask_hits, finished, seqs);
  }
  return 0;
}
