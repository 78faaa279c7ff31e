// The structured-output fields of a request (response_format, structured_outputs, guided_*):
// what each becomes, and the 400s for two at once or a malformed one.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../expect_error.h"
#include "requests/request_parser.h"

namespace qmpi {
namespace {

std::optional<ConstraintSource> read(const std::string& extra) {
  Request r;
  read_request_body(nlohmann::ordered_json::parse(R"({"prompt": "x")" + extra + "}"), r, "request",
                    false);
  return r.constraint;
}

TEST(StructuredOutput, EachFieldBecomesItsConstraint) {
  EXPECT_FALSE(read(""));
  EXPECT_FALSE(read(R"(, "response_format": {"type": "text"}, "guided_json": null)"));
  auto c = read(R"(, "response_format": {"type": "json_object"})");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->kind, ConstraintKind::JsonObject);
  c = read(
      R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "n", "strict": true,
           "schema": {"type": "object", "properties": {"b": {}, "a": {}}}}})");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->kind, ConstraintKind::JsonSchema);
  EXPECT_EQ(c->text, R"({"type":"object","properties":{"b":{},"a":{}}})") << "property order kept";
  c = read(R"(, "structured_outputs": {"regex": "a+", "backend": "xgrammar"})");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->kind, ConstraintKind::Regex);
  EXPECT_EQ(c->text, "a+");
  c = read(R"(, "structured_outputs": {"choice": ["x", "y"]})");
  EXPECT_EQ(c->kind, ConstraintKind::Choice);
  c = read(R"(, "guided_grammar": "root ::= \"a\"")");
  EXPECT_EQ(c->kind, ConstraintKind::Gbnf);
  c = read(R"(, "guided_json": "{\"type\": \"integer\"}")");
  EXPECT_EQ(c->kind, ConstraintKind::JsonSchema);
  EXPECT_EQ(c->text, R"({"type":"integer"})");
  c = read(R"(, "guided_choice": ["a"])");
  EXPECT_EQ(c->kind, ConstraintKind::Choice);
}

TEST(StructuredOutput, TwoAtOnceOrMalformedAreRefused) {
  testing::expect_error([] { read(R"(, "guided_regex": "a", "guided_choice": ["b"])"); },
                        Err::RequestField, {"\"guided_regex\" and \"guided_choice\""});
  testing::expect_error(
      [] {
        read(
            R"(, "response_format": {"type": "json_object"}, "structured_outputs": {"regex": "a"})");
      },
      Err::RequestField, {"both constrain"});
  testing::expect_error([] { read(R"(, "structured_outputs": {"regex": "a", "choice": ["b"]})"); },
                        Err::RequestField, {"more than one"});
  testing::expect_error([] { read(R"(, "structured_outputs": {"structural_tag": "x"})"); },
                        Err::FieldUnsupported, {"structural_tag"});
  testing::expect_error([] { read(R"(, "response_format": {"type": "json_schema"})"); },
                        Err::RequestField, {"json_schema"});
  testing::expect_error([] { read(R"(, "guided_choice": [1])"); }, Err::RequestField,
                        {"array of strings"});
  testing::expect_error([] { read(R"(, "guided_json": "{not json")"); }, Err::RequestField,
                        {"not a JSON schema"});
}

}  // namespace
}  // namespace qmpi
