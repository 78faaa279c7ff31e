// Each keyword against hand-written lists of texts the schema accepts and rejects.
#include <gtest/gtest.h>

#include "../expect_error.h"
#include "constrain/json_schema.h"
#include "match_helpers.h"

namespace qmpi {
namespace {

using testing_constrain::compile;

void expect_schema(const std::string& schema, const std::vector<std::string>& yes,
                   const std::vector<std::string>& no) {
  auto c = compile(ConstraintKind::JsonSchema, schema);
  for (const auto& s : yes) EXPECT_TRUE(c->matches(s)) << schema << " should accept " << s;
  for (const auto& s : no) EXPECT_FALSE(c->matches(s)) << schema << " should reject " << s;
}

TEST(JsonSchema, Types) {
  expect_schema(R"({"type": "string"})", {R"("")", R"("a b")", R"("\"\\\n")", "\"\xC3\xA9\""},
                {"a", R"("a)", "\"\n\"", R"("\x")", "1"});
  expect_schema(R"({"type": "integer"})", {"0", "-12", "907"}, {"01", "-0.5", "1e3", "-", "+1"});
  expect_schema(R"({"type": "number"})", {"0", "-1.5", "2e10", "3.25E-2"},
                {".5", "1.", "01", "1e"});
  expect_schema(R"({"type": "boolean"})", {"true", "false"}, {"1", "True"});
  expect_schema(R"({"type": "null"})", {"null"}, {"", "nil"});
  expect_schema(R"({"type": ["string", "null"]})", {R"("x")", "null"}, {"1"});
  expect_schema(R"({})", {"1", R"({"a": [true, null]})", R"("s")"}, {"{", "[1,]"});
}

TEST(JsonSchema, ObjectsPropertiesRequiredAdditional) {
  const std::string s = R"({"type": "object", "properties": {"a": {"type": "integer"},
      "b": {"type": "string"}, "c": {"type": "boolean"}}, "required": ["b"]})";
  expect_schema(s,
                {R"({"b":"x"})", R"({"a": 1, "b": "x"})", R"({"a":1,"b":"","c":true})",
                 R"({"b":"x", "c":false})"},
                {R"({})", R"({"a":1})", R"({"b":"x","a":1})", R"({"b":"x","d":1})", R"({ "b":"x"})",
                 R"({"b":"x",})", R"({"b":  "x"})"});
  expect_schema(
      R"({"properties": {"a": {"const": 1}}, "additionalProperties": {"type": "integer"}})",
      {R"({})", R"({"a":1})", R"({"a":1,"z":2})", R"({"z":2, "y":3})"}, {R"({"z":"s"})"});
  expect_schema(R"({"type": "object", "additionalProperties": true})", {R"({"k":[1]})"}, {"[]"});
  expect_schema(R"({"type": "object", "required": ["x"]})", {R"({"x":null})"}, {R"({})"});
}

TEST(JsonSchema, EnumAndConst) {
  expect_schema(R"({"enum": ["red", 2, null, {"a": [1]}]})",
                {R"("red")", "2", "null", R"({"a":[1]})"}, {R"("blue")", "3", R"({"a":[2]})"});
  expect_schema(R"({"const": "fixed"})", {R"("fixed")"}, {R"("other")"});
}

TEST(JsonSchema, Arrays) {
  expect_schema(R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})",
                {"[1]", "[1, 2]", "[1,2,3]"}, {"[]", "[1,2,3,4]", R"(["a"])", "[1,]"});
  expect_schema(R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}],
                    "items": false})",
                {"[]", R"(["a"])", R"(["a",1])"}, {R"([1])", R"(["a",1,2])"});
  expect_schema(R"({"prefixItems": [{"const": 0}], "items": {"type": "boolean"}, "minItems": 2})",
                {"[0,true]", "[0,true,false]"}, {"[0]", "[true,true]"});
  expect_schema(R"({"type": "array", "maxItems": 0})", {"[]"}, {"[1]"});
}

TEST(JsonSchema, StringLengthPatternFormat) {
  expect_schema(R"({"type": "string", "minLength": 2, "maxLength": 3})",
                {R"("ab")", R"("abc")", R"("\n\"")", "\"\xC3\xA9\xC3\xA9\""},
                {R"("a")", R"("abcd")"});
  expect_schema(R"({"type": "string", "pattern": "^[A-Z]{2}\\d$"})", {R"("AB1")"},
                {R"("AB12")", R"("a")"});
  expect_schema(R"({"type": "string", "pattern": "x\\d"})", {R"("x1")", R"("aax9b")"},
                {R"("x")", R"("ax")"});
  expect_schema(R"({"type": "string", "format": "date"})", {R"("2024-02-28")", R"("1999-12-31")"},
                {R"("2024-13-01")", R"("2024-04-31")", R"("24-01-01")"});
  expect_schema(R"({"type": "string", "format": "time"})",
                {R"("23:59:59Z")", R"("01:02:03.5+05:30")"}, {R"("24:00:00Z")", R"("12:00:00")"});
  expect_schema(R"({"type": "string", "format": "date-time"})", {R"("2020-01-01T00:00:00Z")"},
                {R"("2020-01-01 00:00:00Z")"});
  expect_schema(R"({"type": "string", "format": "uuid"})",
                {R"("123e4567-e89b-12d3-a456-426614174000")"},
                {R"("123e4567e89b12d3a456426614174000")"});
  expect_schema(R"({"type": "string", "format": "email"})", {R"("a.b@example.com")"},
                {R"("ab.com")"});
  expect_schema(R"({"type": "string", "format": "ipv4"})", {R"("192.168.0.1")", R"("0.0.0.0")"},
                {R"("256.1.1.1")", R"("01.1.1.1")", R"("1.1.1")"});
}

TEST(JsonSchema, IntegerBounds) {
  expect_schema(R"({"type": "integer", "minimum": -15, "maximum": 120})",
                {"-15", "-1", "0", "9", "10", "99", "100", "120"},
                {"-16", "121", "200", "-0", "1000"});
  expect_schema(R"({"type": "integer", "exclusiveMinimum": 5, "exclusiveMaximum": 8})", {"6", "7"},
                {"5", "8"});
  expect_schema(R"({"type": "integer", "minimum": 0})", {"0", "9223372036854775807"}, {"-1"});
  for (auto [lo, hi] :
       std::vector<std::pair<int64_t, int64_t>>{{-7, 13}, {95, 1003}, {-250, -12}}) {
    auto g = std::make_shared<Grammar>();
    const int32_t r = g->add_rule("r");
    g->define(r, integer_range_expr(lo, hi));
    g->finish(r);
    CompiledConstraint c(g, testing_constrain::byte_vocab());
    for (int64_t v = lo - 30; v <= hi + 30; ++v)
      EXPECT_EQ(c.matches(std::to_string(v)), v >= lo && v <= hi)
          << v << " in [" << lo << "," << hi << "]";
  }
}

TEST(JsonSchema, CombinatorsAndRefs) {
  expect_schema(R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]})",
                {"1", R"("a")"}, {R"("ab")", "true"});
  expect_schema(R"({"oneOf": [{"type": "null"}, {"type": "boolean"}]})", {"null", "true"}, {"1"});
  expect_schema(R"({"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                              {"properties": {"b": {"type": "integer"}}}]})",
                {R"({"a":1})", R"({"a":1,"b":2})"}, {R"({"b":2})"});
  expect_schema(R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                    "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"]}},
                    "$ref": "#/$defs/node"})",
                {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":{"v":3,"next":null}}})"},
                {R"({"v":1})", R"({"v":1,"next":{"v":2}})"});
  expect_schema(
      R"({"definitions": {"s": {"type": "string"}}, "type": "array", "items": {"$ref": "#/definitions/s"}})",
      {R"(["a","b"])"}, {"[1]"});
}

TEST(JsonSchema, UnsupportedKeywordsNameThemselvesAndTheirPointer) {
  testing::expect_error(
      [] { compile(ConstraintKind::JsonSchema, R"({"properties": {"a": {"minProperties": 1}}})"); },
      Err::FieldUnsupported, {"\"minProperties\"", "/properties/a/minProperties"});
  testing::expect_error(
      [] { compile(ConstraintKind::JsonSchema, R"({"type": "number", "minimum": 1})"); },
      Err::FieldUnsupported, {"\"minimum\"", "/minimum"});
  testing::expect_error(
      [] { compile(ConstraintKind::JsonSchema, R"({"type": "string", "format": "hostname"})"); },
      Err::FieldUnsupported, {"hostname"});
  testing::expect_error([] { compile(ConstraintKind::JsonSchema, R"({"$ref": "http://x/y"})"); },
                        Err::FieldUnsupported, {"$ref"});
  testing::expect_error(
      [] { compile(ConstraintKind::JsonSchema, R"({"type": "string", "pattern": "(a"})"); },
      Err::RequestField, {"/pattern", "column"});
  // Recursion with no way out admits no finite value.
  testing::expect_error(
      [] {
        compile(ConstraintKind::JsonSchema,
                R"({"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]})");
      },
      Err::RequestField, {"can never end"});
}

TEST(JsonSchema, LimitsAreRefusedCleanly) {
  std::string wide = R"({"type": "object", "properties": {)";
  for (int i = 0; i < 10000; ++i)
    wide += (i ? "," : "") + std::string("\"p") + std::to_string(i) + "\": {}";
  wide += "}}";
  testing::expect_error([&] { compile(ConstraintKind::JsonSchema, wide); }, Err::FieldUnsupported,
                        {"4096 properties"});
  std::string deep;
  for (int i = 0; i < 10000; ++i) deep += R"({"type": "array", "items": )";
  deep += "{}";
  for (int i = 0; i < 10000; ++i) deep += "}";
  testing::expect_error([&] { compile(ConstraintKind::JsonSchema, deep); }, Err::FieldUnsupported,
                        {"deeper than 128"});
}

TEST(JsonSchema, ToolCallContinuesThePrefill) {
  auto c = compile(ConstraintKind::ToolCall, R"({"named": false, "tools": [
      {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
       "required": ["city"]}}, {"name": "now"}]})");
  EXPECT_TRUE(c->matches("get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"));
  EXPECT_TRUE(c->matches("now\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(c->matches("get_weather\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(c->matches("other\", \"arguments\": {}}\n</tool_call>"));
  auto named = compile(ConstraintKind::ToolCall, R"({"named": true, "tools": [{"name": "f",
      "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}]})");
  EXPECT_TRUE(named->matches("{\"n\": 3}}\n</tool_call>"));
  EXPECT_FALSE(named->matches("{}}\n</tool_call>"));
}

}  // namespace
}  // namespace qmpi
