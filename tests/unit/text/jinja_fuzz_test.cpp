// A template fuzzer: the real Qwen chat templates (the Qwen3 one in .cache/qwen-tokenizer and the
// built-in ChatML one) mutated byte by byte and token by token, plus generated deep nesting,
// each compiled and rendered over a conversation with tools. Every case must render or fail with
// QM302/QM303: any other exception, a signal, or (under scripts/sanitize.sh) an ASan/UBSan
// report fails the test. Bounded in count and in seconds; QMPI_FUZZ_ITERATIONS and
// QMPI_FUZZ_SEED run it longer or with another seed, and a failure prints the seed and case.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../serve/request_fuzz.h"  // QMPI_FUZZ_ITERATIONS, QMPI_FUZZ_SEED
#include "core/errors.h"
#include "text/chatml_template.h"
#include "text/jinja_template.h"

namespace qmpi::jinja {
namespace {

std::string qwen_template() {
  std::ifstream in(std::string(QMPI_SOURCE_DIR) + "/.cache/qwen-tokenizer/tokenizer_config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return Json::parse(ss.str()).at("chat_template").get<std::string>();
}

std::map<std::string, Value> conversation() {
  const Json messages = Json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": "", "reasoning_content": "call the tool",
     "tool_calls": [{"type": "function", "function": {"name": "weather",
                     "arguments": {"city": "Paris", "days": 2}}}]},
    {"role": "tool", "content": "{\"temp\": 21}"},
    {"role": "assistant", "content": "<think>\nok\n</think>\n\nIt is 21 degrees."},
    {"role": "user", "content": "Thanks \u00e9\u4e16"}])");
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "weather",
    "description": "Forecast", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}])");
  std::map<std::string, Value> vars;
  vars["messages"] = Value::data(messages);
  vars["tools"] = Value::data(tools);
  vars["add_generation_prompt"] = Value::literal(Json(true));
  vars["bos_token"] = Value::literal(Json("<|endoftext|>"));
  vars["eos_token"] = Value::literal(Json("<|im_end|>"));
  return vars;
}

// Pieces worth splicing in: template syntax, the operators and filters that once crashed or
// hung the engine, numbers at int64's edges, bytes that are not UTF-8.
const char* const kPieces[] = {"{%",
                               "%}",
                               "{{",
                               "}}",
                               "{#",
                               "#}",
                               "{%-",
                               "-%}",
                               "(",
                               ")",
                               "[",
                               "]",
                               "{",
                               "}",
                               ",",
                               ":",
                               ".",
                               "|",
                               "~",
                               " + ",
                               " - ",
                               " * ",
                               " / ",
                               " // ",
                               " % ",
                               " ** ",
                               " ** 64",
                               " // -1",
                               " % -1",
                               "-9223372036854775807 - 1",
                               "9223372036854775807",
                               "99999999999999999999",
                               "1e999",
                               "0",
                               "-1",
                               "'x'",
                               "\"\"",
                               " if ",
                               " else ",
                               " not ",
                               " and ",
                               " or ",
                               " in ",
                               " is ",
                               "{% for i in range(100000) %}",
                               "{% endfor %}",
                               "{% if true %}",
                               "{% endif %}",
                               "{% else %}",
                               "{% elif x %}",
                               "{% set ns = namespace(a=[]) %}",
                               "{% set ns.a = [ns.a] %}",
                               "{% set x = x ~ x %}",
                               "{% break %}",
                               "{% continue %}",
                               "loop.index",
                               "loop.previtem",
                               "messages",
                               "messages[0]",
                               "messages[-1]",
                               "messages[::-1]",
                               "tools",
                               "message.content",
                               "|tojson",
                               "|tojson(indent=99999999999)",
                               "|tojson(indent=-3)",
                               "|length",
                               "|int",
                               "|abs",
                               "|join(',')",
                               "|items",
                               "|list",
                               "|first",
                               "|last",
                               "|reverse",
                               "|string",
                               "|trim",
                               "|map('string')",
                               "|selectattr('role', 'equalto', 'user')",
                               "|default('d')",
                               " is divisibleby(-1)",
                               " is defined",
                               ".split()",
                               ".strip()",
                               ".startswith('<')",
                               ".replace('a', 'bb')",
                               ".items()",
                               ".keys()",
                               ".get('x')",
                               "raise_exception('no')",
                               "range(9223372036854775800, 9223372036854775807, 5)",
                               "'ab' * 99999999",
                               "\xff",
                               "\xc3",
                               "\xe4\xb8",
                               "\n",
                               " "};

std::string mutate(std::string s, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return n ? size_t(rng() % n) : 0; };
  const int edits = 1 + int(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const size_t at = pick(s.size() + 1);
    switch (rng() % 5) {
      case 0:  // delete a range
        s.erase(at, std::min<size_t>(1 + pick(40), s.size() - std::min(at, s.size())));
        break;
      case 1: {  // copy a range elsewhere (duplicates blocks, opens and closes tags)
        const size_t from = pick(s.size()), len = 1 + pick(120);
        s.insert(at, s.substr(from, len));
        break;
      }
      case 2:  // overwrite a byte with anything
        if (!s.empty()) s[pick(s.size())] = char(rng() & 0xFF);
        break;
      default:
        s.insert(at, kPieces[pick(std::size(kPieces))]);
    }
  }
  return s;
}

// A template nesting `depth` levels of one construct around a value, deep enough at times to
// pass parse_depth: the SIGSEGVs of deep recursion.
std::string nested(int depth, int kind) {
  std::string open, close, mid = kind == 3 ? "messages" : "1";
  for (int i = 0; i < depth; ++i) {
    switch (kind) {
      case 0:
        open += "(";
        close = ")" + close;
        break;
      case 1:
        open += "[";
        close = "]" + close;
        break;
      case 2:
        mid += " + 1";
        break;
      case 3:
        mid += ".a";
        break;
      case 4:
        open += "-";
        break;
      case 5:
        open += "not ";
        break;
      case 6:
        mid += "|string";
        break;
      case 7:
        mid += " if 1 else 2";
        break;
    }
  }
  if (kind == 8) {
    std::string body = "{{ 1 }}";
    for (int i = 0; i < depth; ++i) body = "{% if true %}" + body + "{% endif %}";
    return body;
  }
  if (kind == 9) {
    std::string body = "x";
    for (int i = 0; i < depth; ++i) body = "{% for i in range(4) %}" + body + "{% endfor %}";
    return body;
  }
  return "{{ " + open + mid + close + " }}";
}

TEST(JinjaFuzz, EveryTemplateRendersOrFailsWithTheTemplateCodes) {
  const std::vector<std::string> seeds = {qwen_template(), kChatMlTemplate};
  const auto vars = conversation();
  // Small budgets keep each case to milliseconds, so the run's length is its count.
  Limits limits;
  limits.steps = 200000;
  limits.loop_iterations = 50000;
  limits.output_bytes = size_t(1) << 20;
  std::mt19937_64 rng(fuzz::seed());
  const int64_t n = fuzz::iterations(1500);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int64_t rendered = 0, invalid = 0, failed = 0, done = 0;
  for (int64_t i = 0; i < n && std::chrono::steady_clock::now() < deadline; ++i, ++done) {
    std::string src;
    if (i % 8 == 7)
      src = nested(1 + int(rng() % 600), int(rng() % 10));
    else
      src = mutate(seeds[size_t(i) % seeds.size()], rng);
    try {
      Template t(src, "fuzz", limits);
      t.render(vars);
      ++rendered;
    } catch (const Error& e) {
      if (e.code() == Err::ChatTemplateInvalid) {
        ++invalid;
      } else if (e.code() == Err::ChatTemplateFailed) {
        ++failed;
      } else {
        ADD_FAILURE() << "seed " << fuzz::seed() << " case " << i << ": " << error_id(e.code())
                      << " " << e.message() << "\n--- template ---\n"
                      << fuzz::shown(src);
        return;
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "seed " << fuzz::seed() << " case " << i
                    << ": not a template error: " << e.what() << "\n--- template ---\n"
                    << fuzz::shown(src);
      return;
    }
  }
  // The mutations must reach all three outcomes, or the fuzzer tests nothing.
  EXPECT_GT(rendered, 0);
  EXPECT_GT(invalid, 0);
  EXPECT_GT(failed, 0);
  std::printf("jinja fuzz: %lld cases: %lld rendered, %lld QM302, %lld QM303\n", (long long)done,
              (long long)rendered, (long long)invalid, (long long)failed);
}

}  // namespace
}  // namespace qmpi::jinja
