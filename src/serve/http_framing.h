// RFC 9112's rules for how a request's head frames it, checked before any body is read, so
// that qmpi never frames a request differently from a proxy in front of it (request smuggling).
// Beast's parser already refuses a Content-Length after a chunked Transfer-Encoding, a
// Transfer-Encoding after a Content-Length, two chunked codings in two fields, and conflicting
// Content-Lengths; what it lets through (a coding it does not know, chunked not last, a
// Transfer-Encoding on HTTP/1.0, a missing or repeated Host) is refused here. No I/O here.
#pragma once
#include <optional>

#include <boost/beast/http/message.hpp>

#include "core/errors.h"

namespace qmpi {

struct FramingRefusal {
  int status = 400;  // 400, or 501 for a transfer coding qmpi does not implement
  Error error;
};

// The refusal of a request whose head frames it ambiguously, or nothing. Every refusal closes
// the connection: the rest of the bytes cannot be trusted to start the next request.
std::optional<FramingRefusal> framing_refusal(const boost::beast::http::request_header<>& head);

}  // namespace qmpi
