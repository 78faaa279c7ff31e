// `qmpi run`'s sink: a request's text on a stream as it is released, then a newline; or, in JSON
// mode, one object (prompt_ids, output_ids, logprobs, text, finish_reason) once it has finished.
// Only choice 0 is shown (run asks for one).
#pragma once
#include <optional>
#include <ostream>

#include "requests/events.h"

namespace qmpi {

class ConsoleSink final : public RequestSink {
 public:
  // `has_text`: the model has a tokenizer; without one, text mode prints the token ids,
  // space-separated, as they come.
  ConsoleSink(std::ostream& out, bool json, bool has_text);

  void delta(int32_t index, const std::string& text, int32_t token) override;
  void final(RequestOutput out) override;
  void error(const Error& e) override;

  // Raises the request's error, if it had one.
  void raise_error() const;

 private:
  std::ostream& out_;
  const bool json_, has_text_;
  std::optional<Error> error_;
  bool printed_ = false;
};

}  // namespace qmpi
