#include "requests/openai_error.h"

#include <algorithm>

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
    default: {
      // OpenAI's codes are snake_case: the catalogue's name in that spelling.
      std::string name(error_entry(code).name);
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    }
  }
}

nlohmann::ordered_json openai_error_object(const Error& e, bool user) {
  std::string message = e.message();
  if (!e.fix().empty()) message += " (" + e.fix() + ")";
  message += " [" + error_id(e.code()) + "]";  // the catalogue entry: `qmpi help QM501`
  return {
      {"message", message},
      {"type", user ? "invalid_request_error" : "server_error"},
      {"param", e.param().empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(e.param())},
      {"code", openai_error_code(e.code())}};
}

}  // namespace qmpi
