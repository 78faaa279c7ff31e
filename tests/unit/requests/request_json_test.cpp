// The one JSON policy of every front: numbers beyond a double's range are a request error that
// names the number (never the parser's internal exception), and the rest of the text is still
// read, so the error can carry the request's id.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "requests/request_json.h"
#include "requests/request_parser.h"

namespace qmpi {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> overflow_literals(const std::string& text) {
  std::vector<std::string> out;
  for (const NumberOverflow& o : find_number_overflows(text))
    out.push_back(text.substr(o.offset, o.size) + "@" + o.key);
  return out;
}

TEST(RequestJson, FindsNumbersBeyondADouble) {
  using V = std::vector<std::string>;
  EXPECT_EQ(overflow_literals(R"({"max_tokens": 1e400})"), V{"1e400@max_tokens"});
  EXPECT_EQ(overflow_literals(R"({"t": -1.5E+309, "u": 1e308})"), V{"-1.5E+309@t"});
  EXPECT_EQ(overflow_literals(R"({"p": [1, 2, )" + std::string(400, '9') + "]}"),
            V{std::string(400, '9') + "@p"});
  EXPECT_EQ(overflow_literals(R"({"x": 0.00001e314})"), V{"0.00001e314@x"});
  EXPECT_EQ(overflow_literals(R"({"x": 0.00001e313})"), V{});  // 1e308
  // In range, too small for a double (read as 0), or inside strings: none.
  EXPECT_EQ(overflow_literals(R"({"a": 1.7e308, "b": 1e-400, "c": "1e400", "d": 0e999999})"), V{});
  EXPECT_EQ(overflow_literals(R"({"a": "\"", "b": 2e400})"), V{"2e400@b"});
  EXPECT_EQ(overflow_literals("1e99999999999999999999999999"), V{"1e99999999999999999999999999@"});
}

TEST(RequestJson, OverflowIsAFieldErrorAndTheRestIsRead) {
  const RequestJson r = parse_request_json(R"({"id": "g3", "max_tokens": 1e400})", "line 2");
  ASSERT_TRUE(r.number_error);
  EXPECT_EQ(r.number_error->code(), Err::RequestField);
  EXPECT_THAT(r.number_error->message(), HasSubstr("line 2"));
  EXPECT_THAT(r.number_error->message(), HasSubstr("1e400"));
  EXPECT_THAT(r.number_error->message(), HasSubstr("max_tokens"));
  EXPECT_EQ(r.value.at("id"), "g3");
  EXPECT_FALSE(parse_request_json(R"({"t": 1e-400})", "x").number_error);
}

TEST(RequestJson, NotJsonAndTooDeepAreRequestJson) {
  for (const std::string& text :
       {std::string("{\"a\": "), std::string(100, '[') + "1", std::string("{\"a\": 1e400")}) {
    try {
      parse_request_json(text, "the body");
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Err::RequestJson) << text;
      EXPECT_THAT(e.message(), HasSubstr("the body"));
    }
  }
}

// Issue 19, item 1: a batch line with 1e400 is an error line with its own id, not a dead job.
TEST(RequestJson, BatchLineWithAHugeNumberKeepsItsId) {
  ParsedLine p = parse_request_line(R"({"id":"g3","prompt":"x","max_tokens":1e400})", 2);
  ASSERT_TRUE(p.error);
  EXPECT_EQ(p.error->code(), Err::RequestField);
  EXPECT_EQ(p.custom_id, "g3");
  EXPECT_THAT(p.error->message(), HasSubstr("line 2"));
  p = parse_request_line(R"({"custom_id":"c1","url":"/v1/completions","body":{"prompt":[1e999]}})",
                         3);
  ASSERT_TRUE(p.error);
  EXPECT_EQ(p.custom_id, "c1");
  // An id that is itself out of range is not echoed as some other number.
  p = parse_request_line(R"({"id":1e400,"prompt":"x"})", 4);
  ASSERT_TRUE(p.error);
  EXPECT_EQ(p.custom_id, "qmpi-line-4");
  // Nesting no request needs is refused before the parser recurses through it.
  p = parse_request_line(std::string(100000, '['), 5);
  ASSERT_TRUE(p.error);
  EXPECT_EQ(p.error->code(), Err::RequestJson);
}

}  // namespace
}  // namespace qmpi
