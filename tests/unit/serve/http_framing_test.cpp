// RFC 9112's framing rules on a request's head: each case is refused with the status the RFC
// gives it (400, or 501 for a coding qmpi does not implement), and plain framings pass.
#include "serve/http_framing.h"

#include <initializer_list>
#include <string>
#include <utility>

#include <gtest/gtest.h>

namespace qmpi {
namespace {

namespace http = boost::beast::http;
using Fields = std::initializer_list<std::pair<http::field, const char*>>;

std::optional<FramingRefusal> check(Fields fields, unsigned version = 11) {
  http::request_header<> h;
  h.method(http::verb::post);
  h.target("/v1/completions");
  h.version(version);
  for (const auto& [f, v] : fields) h.insert(f, v);
  return framing_refusal(h);
}

int status(Fields fields, unsigned version = 11) {
  const auto r = check(fields, version);
  return r ? r->status : 0;
}

constexpr auto kHost = http::field::host;
constexpr auto kTe = http::field::transfer_encoding;
constexpr auto kCl = http::field::content_length;

TEST(HttpFraming, PlainFramingsPass) {
  EXPECT_EQ(status({{kHost, "h"}}), 0);
  EXPECT_EQ(status({{kHost, "h"}, {kCl, "12"}}), 0);
  EXPECT_EQ(status({{kHost, "h"}, {kTe, "chunked"}}), 0);
  EXPECT_EQ(status({{kHost, "h"}, {kTe, "Chunked"}}), 0) << "codings are case-insensitive";
  EXPECT_EQ(status({{kHost, "h"}, {kTe, " ,chunked , "}}), 0) << "empty list elements";
  EXPECT_EQ(status({}, 10), 0) << "HTTP/1.0 needs no Host";
}

TEST(HttpFraming, HostIsExactlyOneOnHttp11) {
  EXPECT_EQ(status({}), 400);
  EXPECT_EQ(status({{kHost, "a"}, {kHost, "b"}}), 400);
  EXPECT_EQ(status({{kHost, "a"}, {kHost, "b"}}, 10), 400);
}

TEST(HttpFraming, TransferEncodingWithContentLengthIs400) {
  for (const char* te : {"chunked", "xchunked", "chunked, identity", "gzip, chunked"}) {
    const auto r = check({{kHost, "h"}, {kTe, te}, {kCl, "5"}});
    ASSERT_TRUE(r) << te;
    EXPECT_EQ(r->status, 400) << te;
    EXPECT_EQ(r->error.code(), Err::RequestJson) << te;
  }
}

TEST(HttpFraming, ChunkedNotLastIs400AndOtherCodingsAre501) {
  // RFC 9112 6.3: chunked not the final coding leaves the length unknown: 400.
  EXPECT_EQ(status({{kHost, "h"}, {kTe, "xchunked"}}), 400);
  EXPECT_EQ(status({{kHost, "h"}, {kTe, "chunked, identity"}}), 400);
  EXPECT_EQ(status({{kHost, "h"}, {kTe, "gzip"}}), 400);
  EXPECT_EQ(status({{kHost, "h"}, {kTe, "chunked"}, {kTe, "gzip"}}), 400) << "two fields";
  EXPECT_EQ(status({{kHost, "h"}, {kTe, ""}}), 400);
  EXPECT_EQ(status({{kHost, "h"}, {kTe, "chunked, chunked"}}), 400) << "chunked twice";
  // RFC 9112 6.1: a coding the server does not implement: 501.
  const auto r = check({{kHost, "h"}, {kTe, "gzip, chunked"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 501);
  EXPECT_EQ(r->error.code(), Err::TransferCodingUnsupported);
  EXPECT_EQ(status({{kHost, "h"}, {kTe, "gzip"}, {kTe, "chunked"}}), 501) << "two fields";
  EXPECT_EQ(status({{kHost, "h"}, {kTe, "deflate;q=1, chunked"}}), 501);
}

TEST(HttpFraming, TransferEncodingOnHttp10Is400) {
  EXPECT_EQ(status({{kTe, "chunked"}}, 10), 400);
}

}  // namespace
}  // namespace qmpi
