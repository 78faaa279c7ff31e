#include "requests/openai_error.h"

namespace qmpi {

std::string openai_error_code(Err code) {
  switch (code) {
    case Err::ModelNotFound:
      return "model_not_found";
    case Err::Unauthorized:
      return "invalid_api_key";
    case Err::PromptTooLong:
      return "context_length_exceeded";
    case Err::FieldUnsupported:
      return "unsupported_parameter";
    default:
      return std::string(error_entry(code).name);
  }
}

nlohmann::ordered_json openai_error_object(const Error& e, bool user) {
  std::string message = e.message();
  if (!e.fix().empty()) message += " (" + e.fix() + ")";
  return {
      {"message", message},
      {"type", user ? "invalid_request_error" : "server_error"},
      {"param", e.param().empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(e.param())},
      {"code", openai_error_code(e.code())}};
}

}  // namespace qmpi
