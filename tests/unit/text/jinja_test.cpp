// The Jinja-subset engine piece by piece: whitespace rules, expressions, statements, filters,
// tests, methods, errors naming the line, and the provenance spans role safety relies on.
// The whole-template comparison with Jinja2 itself is tests/integration/chat_template_vs_jinja2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "text/jinja_template.h"

namespace qmpi::jinja {
namespace {

using ::testing::HasSubstr;

std::map<std::string, Value> vars_of(const Json& data) {
  std::map<std::string, Value> vars;
  for (const auto& [k, v] : data.items()) vars[k] = Value::data(v);
  return vars;
}

std::string render(const std::string& src, const Json& data = Json::object()) {
  return Template(src, "t").render(vars_of(data)).text;
}

Error render_error(const std::string& src, const Json& data = Json::object()) {
  try {
    render(src, data);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << src;
  return Error(Err::Internal, "none");
}

TEST(JinjaWhitespace, TrimAndLstripBlocksAsTransformersSetsThem) {
  // trim_blocks eats the newline after %}, lstrip_blocks the indentation before {%.
  EXPECT_EQ(render("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
  // {{ }} is neither trimmed nor lstripped.
  EXPECT_EQ(render("  {{ 'x' }}\ny"), "  x\ny");
  // '-' strips all whitespace on its side, newlines included; '+' keeps the indentation.
  EXPECT_EQ(render("a  \n {{- 'b' -}} \n\n c"), "abc");
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");
  // Comments follow the block rules; one trailing newline of the source is dropped.
  EXPECT_EQ(render("a\n  {# note #}\nb\n"), "a\nb");
  EXPECT_EQ(render("x {% if true %}y{% endif %}"), "x y");  // not at a line start: kept
}

TEST(JinjaExpressions, OperatorsAndPrecedence) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }}"),
            "7 9 3 -4 1");
  EXPECT_EQ(render("{{ 7 / 2 }} {{ 2 ** 3 }} {{ 'a' ~ 1 ~ none }}"), "3.5 8 a1None");
  EXPECT_EQ(render("{{ xs|length - 1 }}", {{"xs", {1, 2, 3}}}), "2");
  EXPECT_EQ(render("{{ 1 < 2 and not 2 < 1 }} {{ 0 or 'd' }} {{ '' and 'x' }}"), "True d ");
  EXPECT_EQ(render("{{ 'b' in 'abc' }} {{ 2 not in [1, 2] }} {{ 'k' in {'k': 1} }}"),
            "True False True");
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 1e3 }} {{ 2.5E-1 }}"),
            "True False 1000.0 0.25");
  EXPECT_EQ(render("{{ 'y' if x else 'n' }}{{ 'y' if not x else 'n' }}", {{"x", 0}}), "ny");
  EXPECT_EQ(render("{{ [1, 'a', none, true] }} {{ {'k': [1]} }}"),
            "[1, 'a', None, True] {'k': [1]}");
}

TEST(JinjaExpressions, AttributesItemsAndSlices) {
  const Json data = {{"m", {{"role", "user"}, {"parts", {"a", "b", "c"}}}}, {"s", "héllo"}};
  EXPECT_EQ(render("{{ m.role }} {{ m['role'] }} {{ m.parts[-1] }} {{ m.parts.1 }}", data),
            "user user c b");
  EXPECT_EQ(render("{{ m.parts[::-1] }} {{ m.parts[1:] }} {{ s[1:3] }} {{ s[-1] }}", data),
            "['c', 'b', 'a'] ['b', 'c'] él o");
  EXPECT_EQ(render("{{ m.missing is defined }} {{ m.missing is undefined }}{{ m.missing }}", data),
            "False True");
}

TEST(JinjaStatements, ForLoopsWithLoopVariablesFilterAndElse) {
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}"
                   "{{ loop.length }},{% endfor %}",
                   {{"xs", {"a", "b"}}}),
            "0TrueFalse2,1FalseTrue2,");
  EXPECT_EQ(render("{% for x in xs if x > 1 %}{{ x }}{{ loop.index }} {% else %}none{% endfor %}",
                   {{"xs", {1, 2, 3}}}),
            "21 32 ");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
                   {{"d", {{"b", 1}, {"a", 2}}}}),
            "b=1;a=2;");  // the request's key order
  EXPECT_EQ(render("{% for x in [1,2,3,4] %}{% if x == 2 %}{% continue %}{% endif %}"
                   "{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "13");
}

TEST(JinjaStatements, SetScopesAndNamespaces) {
  // A set inside a loop stays inside it; a namespace carries values out.
  EXPECT_EQ(render("{% set n = 0 %}{% set ns = namespace(n=0) %}{% for x in [1, 2] %}"
                   "{% set n = n + x %}{% set ns.n = ns.n + x %}{% endfor %}{{ n }} {{ ns.n }}"),
            "0 3");
  EXPECT_EQ(render("{% if true %}{% set a = 'in if' %}{% endif %}{{ a }}"), "in if");
  EXPECT_THAT(render_error("{% set x = 1 %}{% set x.y = 2 %}").what(), HasSubstr("namespace"));
}

TEST(JinjaBuiltins, FiltersTestsAndStringMethods) {
  EXPECT_EQ(render("{{ '  a b  '|trim }}|{{ 'AbC'|lower }}{{ 'abc'|upper }}|{{ x|default('d') }}"
                   "|{{ [1, 2]|join('-') }}|{{ 5|string ~ 'x' }}"),
            "a b|abcABC|d|1-2|5x");
  EXPECT_EQ(render("{{ s.strip('\\n') }}|{{ s.lstrip() }}|{{ s.rstrip() }}|", {{"s", "\n x \n"}}),
            " x |x \n|\n x|");
  EXPECT_EQ(
      render(
          "{{ 'a</t>b</t>c'.split('</t>') }} {{ ' a  b '.split() }} {{ 'a,b,c'.split(',', 1) }}"),
      "['a', 'b', 'c'] ['a', 'b'] ['a', 'b,c']");
  EXPECT_EQ(render("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}"
                   "{{ 'aXbX'.replace('X', '-') }}"),
            "TrueTruea-b-");
  EXPECT_EQ(render("{{ x is none }}{{ x is not none }}{{ 's' is string }}{{ {} is mapping }}"
                   "{{ false is false }}{{ 0 is false }}{{ 3 is odd }}",
                   {{"x", nullptr}}),
            "TrueFalseTrueTrueTrueFalseTrue");
  EXPECT_EQ(render("{{ d|items|list }} {{ d.get('a') }} {{ d.get('z', 0) }} {{ [3, 1]|first }}",
                   {{"d", {{"a", 1}}}}),
            "[['a', 1]] 1 0 3");
}

TEST(JinjaBuiltins, TojsonIsPythonJsonDumps) {
  const Json tool = {{"name", "f"}, {"description", "Zürich \"q\"\n"}, {"args", {1, 2.5, true}}};
  EXPECT_EQ(
      render("{{ t|tojson }}", {{"t", tool}}),
      "{\"name\": \"f\", \"description\": \"Zürich \\\"q\\\"\\n\", \"args\": [1, 2.5, true]}");
  EXPECT_EQ(render("{{ t|tojson(indent=2) }}", {{"t", {{"a", 1}}}}), "{\n  \"a\": 1\n}");
  EXPECT_EQ(render("{{ [] | tojson }} {{ none|tojson }} {{ 'x'|tojson }}"), "[] null \"x\"");
}

TEST(JinjaErrors, NameTheTemplateLine) {
  Error e = render_error("line one\n{% if %}");
  EXPECT_EQ(e.code(), Err::ChatTemplateInvalid);
  EXPECT_THAT(e.what(), HasSubstr("t line 2"));
  EXPECT_EQ(render_error("{% for x in xs %}").code(), Err::ChatTemplateInvalid);
  EXPECT_THAT(render_error("{% macro m() %}{% endmacro %}").what(), HasSubstr("'macro'"));
  EXPECT_EQ(render_error("{{ 'a' ").code(), Err::ChatTemplateInvalid);

  e = render_error("ok\n\n{{ x.y.z }}");
  EXPECT_EQ(e.code(), Err::ChatTemplateFailed);
  EXPECT_THAT(e.what(), HasSubstr("t line 3"));
  e = render_error("{{ 'a' + m.content }}", {{"m", {{"content", nullptr}}}});
  EXPECT_THAT(e.what(), HasSubstr("string and none"));
  e = render_error("\n{{ raise_exception('roles must alternate') }}");
  EXPECT_EQ(e.code(), Err::ChatTemplateFailed);
  EXPECT_THAT(e.what(), HasSubstr("roles must alternate"));
  EXPECT_THAT(e.what(), HasSubstr("line 2"));
}

TEST(JinjaProvenance, RequestBytesAreMarkedPlainThroughStringOperations) {
  const Json data = {{"m", {{"role", "user"}, {"content", "\nhi<|x|>"}}}};
  const Rendered r =
      Template("<|s|>{{ m.role + '\\n' + m.content.lstrip('\\n') }}<|e|>{{ 'lit' }}", "t")
          .render(vars_of(data));
  EXPECT_EQ(r.text, "<|s|>user\nhi<|x|><|e|>lit");
  ASSERT_EQ(r.plain.size(), 2u);
  EXPECT_EQ(r.text.substr(r.plain[0].begin, r.plain[0].end - r.plain[0].begin), "user");
  EXPECT_EQ(r.text.substr(r.plain[1].begin, r.plain[1].end - r.plain[1].begin), "hi<|x|>");
  // Numbers and tojson of request data are plain too; template literals never are.
  const Rendered j = Template("{{ t|tojson }}{{ n }}{{ [1]|tojson }}", "t")
                         .render(vars_of({{"t", {{"a", "<|x|>"}}}, {"n", 5}}));
  ASSERT_EQ(j.plain.size(), 1u);
  EXPECT_EQ(j.plain[0].begin, 0u);
  EXPECT_EQ(j.plain[0].end, j.text.size() - 3);
}

}  // namespace
}  // namespace qmpi::jinja
