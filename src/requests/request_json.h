// The one JSON policy of every front: a batch line, an HTTP body and a ZeroMQ message are all
// read here, so that the same text is accepted or refused the same way (and with the same
// code) whichever way it came in.
//   - nesting deeper than kMaxJsonDepth, or an object with more than kMaxObjectKeys keys:
//     RequestJson (no request needs them; the parser and the printer of error messages
//     recurse, and the parser's ordered objects insert a key in time linear in their size);
//   - not JSON: RequestJson;
//   - a number beyond what a double holds (1e400, a 400-digit integer): RequestField, naming the
//     number. JSON itself allows such numbers, so the text is still read (the number as null) and
//     the caller can take the request's id before it raises the error: the reply echoes it.
// Numbers too small for a double (1e-400) read as 0, as everywhere else.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "requests/request_limits.h"

namespace qmpi {

// Refuses text whose arrays and objects nest deeper than `max_depth`, or an object with more
// than `max_keys` keys (RequestJson), in one pass before it is parsed, so that the cost of
// reading any body accepted is linear in its size.
void check_json_shape(std::string_view text, int max_depth = kMaxJsonDepth,
                      size_t max_keys = kMaxObjectKeys);

struct RequestJson {
  nlohmann::ordered_json value;
  // The first number out of a double's range, for the caller to raise once it has read the id.
  std::optional<Error> number_error;
};

// `what` names the text in messages: "line 7", "the message", "the body".
RequestJson parse_request_json(std::string_view text, const std::string& what);

// A number in the text beyond a double's range. Exposed for the tests.
struct NumberOverflow {
  size_t offset = 0, size = 0;  // the literal
  std::string key;              // the object key it belongs to, as written; empty: none
};
std::vector<NumberOverflow> find_number_overflows(std::string_view text);

}  // namespace qmpi
