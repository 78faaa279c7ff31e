// What the HTTP front decides from a request's head: the route, the API key, the error codes.
#include <gtest/gtest.h>

#include "serve/http_routes.h"

namespace qmpi {
namespace {

TEST(HttpRoutes, MethodAndPathNameTheRoute) {
  EXPECT_EQ(match_route("POST", "/v1/chat/completions"), HttpRoute::Chat);
  EXPECT_EQ(match_route("POST", "/v1/completions"), HttpRoute::Completion);
  EXPECT_EQ(match_route("GET", "/v1/models"), HttpRoute::Models);
  EXPECT_EQ(match_route("GET", "/v1/models/Qwen/Qwen3-0.6B"), HttpRoute::Model);
  EXPECT_EQ(model_id_of("/v1/models/Qwen%2FQwen3-0.6B?x=1"), "Qwen/Qwen3-0.6B");
  EXPECT_EQ(match_route("GET", "/v1/models/"), HttpRoute::NotFound) << "no id";
  EXPECT_EQ(match_route("POST", "/v1/models/m"), HttpRoute::NotFound);
  EXPECT_EQ(match_route("GET", "/health?probe=1"), HttpRoute::Health) << "a query is ignored";
  EXPECT_EQ(match_route("GET", "/metrics"), HttpRoute::Metrics);
  EXPECT_EQ(match_route("GET", "/v1/completions"), HttpRoute::NotFound) << "wrong method";
  EXPECT_EQ(match_route("POST", "/health"), HttpRoute::NotFound);
  EXPECT_EQ(match_route("HEAD", "/health"), HttpRoute::Health) << "HEAD answers as GET";
  EXPECT_EQ(match_route("HEAD", "/v1/models"), HttpRoute::Models);
  EXPECT_EQ(match_route("HEAD", "/v1/completions"), HttpRoute::NotFound);
  EXPECT_EQ(match_route("POST", "/v1/completions/"), HttpRoute::NotFound);
  EXPECT_EQ(match_route("POST", "/v1/embeddings"), HttpRoute::NotFound);
  EXPECT_EQ(match_route("get", "/health"), HttpRoute::NotFound) << "methods are case-sensitive";
  EXPECT_EQ(target_path("/a?b?c"), "/a");
}

TEST(HttpRoutes, AbsoluteFormTargetsRouteByTheirPath) {
  EXPECT_EQ(target_path("http://127.0.0.1:8000/v1/models?x=1"), "/v1/models");
  EXPECT_EQ(target_path("HTTP://host/health"), "/health");
  EXPECT_EQ(target_path("http://host"), "/");
  EXPECT_EQ(target_path("/v1/models?next=http://x/y"), "/v1/models") << "origin form stays";
  EXPECT_EQ(match_route("POST", "http://h:8000/v1/chat/completions"), HttpRoute::Chat);
  EXPECT_EQ(model_id_of("http://h/v1/models/Qwen%2FQwen3-0.6B"), "Qwen/Qwen3-0.6B");
}

TEST(HttpRoutes, VllmsToolRoutesAndOptions) {
  EXPECT_EQ(match_route("POST", "/tokenize"), HttpRoute::Tokenize);
  EXPECT_EQ(match_route("POST", "/detokenize"), HttpRoute::Detokenize);
  EXPECT_EQ(match_route("GET", "/version"), HttpRoute::Version);
  EXPECT_EQ(match_route("GET", "/tokenize"), HttpRoute::NotFound) << "a body is needed";
  EXPECT_EQ(match_route("OPTIONS", "/v1/chat/completions"), HttpRoute::Options);
  EXPECT_EQ(match_route("OPTIONS", "/v1/models?x=1"), HttpRoute::Options);
  EXPECT_EQ(match_route("OPTIONS", "/v1/embeddings"), HttpRoute::NotFound);
}

TEST(HttpRoutes, OnlyV1NeedsTheKey) {
  EXPECT_TRUE(needs_api_key("/v1/models"));
  EXPECT_TRUE(needs_api_key("/v1/anything"));
  EXPECT_FALSE(needs_api_key("/health"));
  EXPECT_FALSE(needs_api_key("/metrics"));
  EXPECT_FALSE(needs_api_key("/v1"));
}

TEST(HttpRoutes, BearerMatchesOnlyTheExactKey) {
  EXPECT_TRUE(bearer_matches("Bearer s3cret", "s3cret"));
  EXPECT_FALSE(bearer_matches("Bearer s3cre", "s3cret"));
  EXPECT_FALSE(bearer_matches("Bearer s3cretX", "s3cret"));
  EXPECT_FALSE(bearer_matches("bearer s3cret", "s3cret"));
  EXPECT_FALSE(bearer_matches("s3cret", "s3cret"));
  EXPECT_FALSE(bearer_matches("", "s3cret"));
  EXPECT_FALSE(bearer_matches("Bearer s3creu", "s3cret"));
}

TEST(HttpRoutes, ErrorsCarryTheirCatalogueCodes) {
  EXPECT_EQ(not_found_error("GET", "/x").code(), Err::RouteNotFound);
  EXPECT_NE(not_found_error("GET", "/x").message().find("GET /x"), std::string::npos);
  EXPECT_EQ(unauthorized_error(true).code(), Err::Unauthorized);
  const Error big = body_too_large_error(1024);
  EXPECT_EQ(big.code(), Err::BodyTooLarge);
  EXPECT_NE(big.message().find("1024"), std::string::npos);
  EXPECT_EQ(unreadable_request_error("bad method").code(), Err::RequestJson);
  // A long target is cut, not echoed whole.
  EXPECT_LT(not_found_error("GET", std::string(5000, 'a')).message().size(), 400u);
}

}  // namespace
}  // namespace qmpi
