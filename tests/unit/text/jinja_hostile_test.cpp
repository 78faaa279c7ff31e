// Hostile templates against the sandbox (jinja_limits.h): each case once crashed the process
// (SIGSEGV from deep recursion, SIGFPE from INT64_MIN / -1), hung it (nested loops, exponents,
// doubling strings) or wrapped silently; now each is a template error with its catalogue code,
// QM302 when the source cannot be compiled and QM303 when a render fails.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include <fstream>

#include <sys/resource.h>

#include "../temp_dir.h"
#include "core/errors.h"
#include "text/chat_template.h"
#include "text/jinja_template.h"

namespace qmpi::jinja {
namespace {

// The bound on the huge split's memory: the unbounded split grew 10 GiB. AddressSanitizer keeps
// freed blocks in quarantine and adds shadow memory, so there peak RSS overstates the allocator's.
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kMaxSplitGrowth = size_t(2048) << 20;
#else
constexpr size_t kMaxSplitGrowth = size_t(400) << 20;
#endif

using ::testing::HasSubstr;

std::string render(const std::string& src, const Limits& limits = {}) {
  return Template(src, "t", limits).render({}).text;
}

Error error_of(const std::string& src, const Limits& limits = {}) {
  try {
    render(src, limits);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << src.substr(0, 200);
  return Error(Err::Internal, "none");
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

void expect_invalid(const std::string& src, const std::string& needle) {
  const Error e = error_of(src);
  EXPECT_EQ(e.code(), Err::ChatTemplateInvalid) << e.message();
  EXPECT_THAT(e.message(), HasSubstr(needle));
}

void expect_failed(const std::string& src, const std::string& needle, const Limits& limits = {}) {
  const Error e = error_of(src, limits);
  EXPECT_EQ(e.code(), Err::ChatTemplateFailed) << e.message();
  EXPECT_THAT(e.message(), HasSubstr(needle));
}

TEST(JinjaHostileParse, DeepNestingIsACompileErrorNotAStackOverflow) {
  constexpr int n = 50000;
  expect_invalid("{{ " + repeat("(", n) + "1" + repeat(")", n) + " }}", "nests deeper than");
  expect_invalid(repeat("{% if true %}", n) + repeat("{% endif %}", n), "nests deeper than");
  expect_invalid("{{ 1" + repeat(" + 1", n) + " }}", "nests deeper than");
  expect_invalid("{{ x" + repeat(".a", n) + " }}", "nests deeper than");
  expect_invalid("{{ x" + repeat("[0]", n) + " }}", "nests deeper than");
  expect_invalid("{{ " + repeat("-", n) + "1 }}", "nests deeper than");
  expect_invalid("{{ " + repeat("not ", n) + "1 }}", "nests deeper than");
  expect_invalid("{{ " + repeat("[", n) + repeat("]", n) + " }}", "nests deeper than");
  expect_invalid("{{ 1" + repeat(" if 1 else 2", n) + " }}", "nests deeper than");
  expect_invalid("{{ 'a'" + repeat("|trim", n) + " }}", "nests deeper than");
  // Within the limit, nesting works as before.
  EXPECT_EQ(render("{{ " + repeat("(", 50) + "1" + repeat(")", 50) + " }}"), "1");
  EXPECT_EQ(render("{{ 1" + repeat(" + 1", 150) + " }}"), "151");
  // The deepest the defaults allow, blocks and an expression together, renders: the renderer's
  // recursion at its worst fits a thread's stack (under ASan too, in scripts/sanitize.sh).
  std::string deepest = "{{ 1" + repeat(" + 1", 190) + " }}";
  for (int i = 0; i < 190; ++i) deepest = "{% if true %}" + deepest + "{% endif %}";
  EXPECT_EQ(render(deepest), "191");
  Limits tight;
  tight.parse_depth = 10;
  EXPECT_EQ(error_of("{{ 1" + repeat(" + 1", 20) + " }}", tight).code(), Err::ChatTemplateInvalid);
}

TEST(JinjaHostileParse, LiteralsOutsideTheRangeAreCompileErrors) {
  expect_invalid("{{ 99999999999999999999 }}", "integer literal");
  expect_invalid("{{ 1e999 }}", "number literal");
  expect_invalid("{{ x.99999999999999999999 }}", "integer");
  expect_invalid("{{ '\\uzzzz' }}", "four hex digits");  // found by the fuzzer: was "stoul"
  expect_invalid("{{ '\\u12' }}", "four hex digits");
  expect_invalid("{{ '\\ud800' }}", "surrogate");
  EXPECT_EQ(render("{{ '\\u00e9' }}"), "\u00e9");
  EXPECT_EQ(render("{{ 9223372036854775807 }}"), "9223372036854775807");
}

TEST(JinjaHostileArithmetic, OverflowAndDivisionAreTemplateErrors) {
  const std::string min = "(-9223372036854775807 - 1)";
  expect_failed("{{ " + min + " // -1 }}", "integer overflow");
  EXPECT_EQ(render("{{ " + min + " % -1 }}"), "0");  // Python: exact, no overflow
  expect_failed("{{ 1 // 0 }}", "division by zero");
  expect_failed("{{ 1 % 0 }}", "division by zero");
  expect_failed("{{ 1.0 / 0 }}", "division by zero");
  expect_failed("{{ 9223372036854775807 + 1 }}", "integer overflow");
  expect_failed("{{ " + min + " - 1 }}", "integer overflow");
  expect_failed("{{ 4294967296 * 4294967296 }}", "integer overflow");
  expect_failed("{{ -" + min + " }}", "integer overflow");
  expect_failed("{{ 2 ** 1000 }}", "integer overflow");
  expect_failed("{{ " + min + "|abs }}", "integer overflow");
  expect_failed("{{ 1e300|int }}", "integer");
  EXPECT_EQ(render("{{ " + min + " is divisibleby(-1) }}"), "True");
  // A huge exponent of 1, 0 or -1 is exact and immediate, not a loop of 10^18 steps.
  EXPECT_EQ(render("{{ 1 ** 1000000000000000000 }} {{ (-1) ** 1000000000000000001 }}"), "1 -1");
  EXPECT_EQ(render("{{ 2 ** 62 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }}"),
            "4611686018427387904 -4 2 -2");
  EXPECT_EQ(render("{{ 9223372036854775806 % 9223372036854775807 }}"), "9223372036854775806");
  EXPECT_EQ(render("{{ -1 % 9223372036854775807 }}"), "9223372036854775806");
  EXPECT_EQ(render("{% for i in range(9223372036854775800, 9223372036854775807, 5) %}{{ i }} "
                   "{% endfor %}"),
            "9223372036854775800 9223372036854775805 ");
  EXPECT_EQ(render("{{ 'abcdef'[::9223372036854775807] }}"), "a");
}

TEST(JinjaHostileFilters, TojsonIndentIsBounded) {
  expect_failed("{{ [1]|tojson(indent=2147483648) }}", "indent");
  expect_failed("{{ [1]|tojson(indent=100000000) }}", "indent");
  EXPECT_EQ(render("{{ [1]|tojson(indent=2) }}"), "[\n  1\n]");
}

TEST(JinjaHostileRender, NestedLoopsRunOutOfSteps) {
  // Three loops of a thousand: 10^9 iterations took seconds per request before the budget.
  expect_failed(
      "{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(1000) %}"
      "{% endfor %}{% endfor %}{% endfor %}",
      "loop iterations");
  Limits few;
  few.steps = 1000;
  expect_failed("{% for i in range(10000) %}{{ i }}{% endfor %}", "steps", few);
  few = {};
  few.loop_iterations = 100;
  expect_failed("{% for i in range(101) %}{% endfor %}", "loop iterations", few);
  EXPECT_EQ(render("{% for i in range(100) %}{% endfor %}ok", few), "ok");
}

TEST(JinjaHostileRender, DoublingStringsAndListsHitTheSizeBudget) {
  const std::string doubling =
      "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
      "{% endfor %}{{ ns.s|length }}";
  // With the defaults the copying runs out of steps near 2^24 bytes, or the string passes
  // 64 MiB, whichever comes first; either way a template error in a fraction of a second.
  EXPECT_EQ(error_of(doubling).code(), Err::ChatTemplateFailed);
  Limits mib;
  mib.output_bytes = size_t(1) << 20;
  mib.steps = int64_t(1) << 40;
  expect_failed(doubling, "bytes", mib);
  expect_failed(
      "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
      "{% endfor %}",
      "bytes", mib);
  expect_failed("{{ 'ab' * 9223372036854775807 }}", "bytes");
  // Lists doubled by nesting grow as fast as strings: the steps that copy them run out.
  Limits few;
  few.steps = 100000;
  expect_failed(
      "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = [ns.l, ns.l] %}"
      "{% endfor %}",
      "steps", few);
  expect_failed(
      "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}"
      "{% endfor %}",
      "steps", few);
  Limits small;
  small.output_bytes = 100;
  expect_failed("{% for i in range(200) %}x{% endfor %}", "output", small);
  EXPECT_EQ(render("{% for i in range(100) %}x{% endfor %}", small).size(), 100u);
}

// The peak resident memory of this process so far, in bytes.
size_t peak_rss() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return size_t(u.ru_maxrss) * 1024;
}

TEST(JinjaHostileRender, SplittingAHugeStringStopsAtTheStepBudgetNotInMemory) {
  // 60 MB of "ab " (under the 64 MiB string limit) would split into 20 million parts and list
  // into 60 million characters, gigabytes as values, before the step budget saw them; now the
  // builders stop at the steps left, so the peak grows by about the string and its parts so far.
  const std::string big = "{% set s = 'ab ' * 20000000 %}";
  const size_t before = peak_rss();
  expect_failed(big + "{{ s.split()|length }}", "split: more than");
  expect_failed(big + "{{ s.split(' ')|length }}", "split: more than");
  expect_failed(big + "{{ s|list|length }}", "list: more than");
  expect_failed(big + "{{ s.split(' ', 3000000)|length }}", "step budget");
  const size_t grew = peak_rss() - before;
  EXPECT_LT(grew, kMaxSplitGrowth) << "peak RSS grew by " << (grew >> 20) << " MiB";
  // Within the budget the same calls give Python's results.
  EXPECT_EQ(render("{{ ' a  b\tc '.split() }}"), "['a', 'b', 'c']");
  EXPECT_EQ(render("{{ ' a  b\tc '.split(none, 1) }}"), "['a', 'b\\tc']");
  EXPECT_EQ(render("{{ 'a,b,,c'.split(',') }}"), "['a', 'b', '', 'c']");
  EXPECT_EQ(render("{{ 'h\u00e9\u00a0x'.split() }}"), "['hé', 'x']");
  EXPECT_EQ(render("{{ 'h\u00e9'|list }}"), "['h', 'é']");
  Limits few;
  few.steps = 1000;
  expect_failed("{{ ('x ' * 2000).split()|length }}", "step budget", few);
  EXPECT_EQ(render("{{ ('x ' * 100).split()|length }}", few), "100");
}

TEST(JinjaHostileRender, ValuesNestOnlySoDeep) {
  expect_failed(
      "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}"
      "{% endfor %}{{ ns.l }}",
      "nest deeper than");
  EXPECT_EQ(render("{% set ns = namespace(l=[]) %}{% for i in range(3) %}{% set ns.l = [ns.l] %}"
                   "{% endfor %}{{ ns.l }}"),
            "[[[[]]]]");
}

TEST(ChatTemplateStartUp, BrokenTemplatesFailBeforeServing) {
  // Bytes that are not UTF-8 are the template's fault, named as such (not the prompt's).
  try {
    ChatTemplate("ok \xff{{ 1 }}", "bad.jinja");
    ADD_FAILURE() << "accepted a template that is not UTF-8";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::ChatTemplateInvalid);
    EXPECT_THAT(e.message(), HasSubstr("bad.jinja is not UTF-8"));
  }
  // A template that fails on every conversation fails the dry run at start-up with QM302; one
  // that refuses only some conversations (here: a system turn) loads.
  testing::TempDir dir;
  const std::string file = dir.file("t.jinja");
  std::ofstream(file) << "{% for m in messages %}{{ m.content ~ (1 // 0) }}{% endfor %}";
  try {
    chat_template_for(dir.str(), file);
    ADD_FAILURE() << "the dry run passed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::ChatTemplateInvalid);
    EXPECT_THAT(e.message(), HasSubstr("sample conversation"));
    EXPECT_THAT(e.message(), HasSubstr("division by zero"));
  }
  std::ofstream(file) << "{% if messages[0].role == 'system' %}{{ raise_exception('no') }}"
                         "{% endif %}{{ messages|length }}";
  const auto picky = chat_template_for(dir.str(), file);
  EXPECT_EQ(picky->render(std::vector<ChatMessage>{{"user", "a"}}, true), "1");
  // The defaults leave room for long conversations: Qwen3's template over 5,000 messages.
  const auto qwen = chat_template_for(std::string(QMPI_SOURCE_DIR) + "/.cache/qwen-tokenizer");
  std::vector<ChatMessage> long_chat;
  for (int i = 0; i < 5000; ++i)
    long_chat.push_back({i % 2 ? "assistant" : "user", "message number " + std::to_string(i)});
  EXPECT_THAT(qwen->render(long_chat, true), HasSubstr("message number 4999"));
  // The limits reach the template: a tight step budget fails the dry run of the real template.
  Limits tight;
  tight.steps = 50;
  try {
    chat_template_for(std::string(QMPI_SOURCE_DIR) + "/.cache/qwen-tokenizer", "", tight);
    ADD_FAILURE() << "50 steps were enough";
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("steps"));
  }
}

TEST(JinjaLimits, ParsedFromTheOptionText) {
  const Limits l = parse_limits("steps=5,loop=6,depth=7,render-depth=8,output=1KiB");
  EXPECT_EQ(l.steps, 5);
  EXPECT_EQ(l.loop_iterations, 6);
  EXPECT_EQ(l.parse_depth, 7);
  EXPECT_EQ(l.render_depth, 8);
  EXPECT_EQ(l.output_bytes, 1024u);
  EXPECT_EQ(parse_limits("").steps, Limits{}.steps);
  for (const char* bad : {"steps", "steps=-1", "steps=x", "color=3", "depth=0"}) {
    try {
      parse_limits(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Err::Usage) << bad;
    }
  }
}

}  // namespace
}  // namespace qmpi::jinja
