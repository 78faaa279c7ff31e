#include "requests/console_sink.h"

#include <nlohmann/json.hpp>

namespace qmpi {

ConsoleSink::ConsoleSink(std::ostream& out, bool json, bool has_text)
    : out_(out), json_(json), has_text_(has_text) {}

void ConsoleSink::delta(int32_t index, const std::string& text, int32_t token) {
  if (index != 0 || json_) return;
  if (has_text_)
    out_ << text;
  else
    out_ << (printed_ ? " " : "") << token;
  printed_ = true;
  out_ << std::flush;
}

void ConsoleSink::final(RequestOutput out) {
  if (!json_) {
    out_ << std::endl;
    return;
  }
  const ChoiceOutput& c = out.choices.at(0);
  nlohmann::json j;
  j["prompt_ids"] = out.prompt_ids;
  j["output_ids"] = c.tokens;
  j["logprobs"] = c.logprobs;
  j["text"] = has_text_ ? c.text : "";
  j["finish_reason"] = c.finish_reason;
  out_ << j.dump() << std::endl;
}

void ConsoleSink::error(const Error& e) {
  error_ = e;
}

void ConsoleSink::raise_error() const {
  if (error_) throw *error_;
}

}  // namespace qmpi
