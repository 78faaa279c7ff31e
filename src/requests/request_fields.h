// Which top-level fields of a request body qmpi reads, which it ignores, and which it refuses.
// OpenAI SDKs and vLLM clients send fields qmpi has no use for (store, metadata, user,
// service_tier...): they are ignored, as vLLM ignores what it does not know. Two kinds are
// still refused, because ignoring them would silently change the answer:
//   - fields asking for something qmpi does not do (logit_bias, echo, beam search...), unless
//     they hold their neutral value
//     (FieldUnsupported);
//   - a name one or two letters away from a field qmpi reads ("temprature", "max_token"): a
//     typo would otherwise sample with the default (RequestField, "did you mean").
// docs/protocol.md lists them.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace qmpi {

struct FieldVerdict {
  enum class Kind : uint8_t {
    Known,          // read by the request parser
    Ignored,        // accepted and ignored
    OtherEndpoint,  // a field of the other endpoint (top_logprobs on a completion)
    Misspelt,       // close to a known field
    Unsupported,    // would change the result and qmpi cannot honour it
  };
  Kind kind = Kind::Known;
  std::string why;  // for the last three: the message, without "where: "
  std::string fix;  // Unsupported: what to send instead
};

FieldVerdict check_request_field(std::string_view key, const nlohmann::ordered_json& value,
                                 bool chat);

}  // namespace qmpi
