#include "serve/http_framing.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/field.hpp>

namespace qmpi {
namespace {

namespace http = boost::beast::http;

constexpr const char* kFix =
    "Send either a Content-Length or `Transfer-Encoding: chunked`, never both, and one Host "
    "header (RFC 9112 sections 3.2 and 6).";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The transfer codings of every Transfer-Encoding field, in order, without their parameters.
std::vector<std::string_view> codings(const http::request_header<>& head) {
  std::vector<std::string_view> out;
  const auto [first, last] = head.equal_range(http::field::transfer_encoding);
  for (auto f = first; f != last; ++f) {
    std::string_view v(f->value().data(), f->value().size());
    while (!v.empty()) {
      const size_t comma = v.find(',');
      std::string_view item = v.substr(0, comma);
      item = trim(item.substr(0, item.find(';')));
      if (!item.empty()) out.push_back(item);  // empty list elements are allowed (RFC 9110 5.6.1)
      v = comma == std::string_view::npos ? std::string_view{} : v.substr(comma + 1);
    }
  }
  return out;
}

FramingRefusal refuse(int status, const std::string& why) {
  return {status, Error(status == 501 ? Err::TransferCodingUnsupported : Err::RequestJson,
                        "the HTTP request's framing is refused: " + why, kFix)};
}

}  // namespace

std::optional<FramingRefusal> framing_refusal(const http::request_header<>& head) {
  const auto hosts = head.count(http::field::host);
  if (hosts > 1) return refuse(400, "it has " + std::to_string(hosts) + " Host headers");
  if (hosts == 0 && head.version() >= 11) return refuse(400, "an HTTP/1.1 request has no Host");
  if (head.count(http::field::transfer_encoding) == 0) return std::nullopt;
  if (head.version() < 11)
    return refuse(400, "an HTTP/1.0 request has a Transfer-Encoding (RFC 9112 6.1)");
  if (head.count(http::field::content_length) > 0)
    return refuse(400, "it has both Transfer-Encoding and Content-Length (RFC 9112 6.3)");
  const std::vector<std::string_view> list = codings(head);
  const auto chunked = [](std::string_view c) {
    return boost::beast::iequals(boost::beast::string_view(c.data(), c.size()), "chunked");
  };
  // Chunked not last: the body's length cannot be known; the RFC makes this a 400.
  if (list.empty() || !chunked(list.back()))
    return refuse(400,
                  "chunked is not its last transfer coding, so its length is unknown "
                  "(RFC 9112 6.3)");
  if (list.size() == 1) return std::nullopt;
  if (std::any_of(list.begin(), list.end() - 1, chunked))
    return refuse(400, "chunked is applied more than once (RFC 9112 6.1)");
  return refuse(501, "its transfer coding \"" + std::string(list.front().substr(0, 40)) +
                         "\" is not implemented (qmpi reads chunked alone; RFC 9112 6.1)");
}

}  // namespace qmpi
