// Result lines in the OpenAI Batch output shape:
//   {"id", "custom_id", "response": {"status_code": 200, "request_id", "body": <chat.completion
//    or text_completion with choices and usage>}, "error": null}
// and for a request that could not run:
//   {"id", "custom_id", "response": {"status_code": 400, "request_id", "body": {"error": ...}},
//    "error": {"code": "QM501", "message": ...}}
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/errors.h"
#include "engine/sampler.h"
#include "requests/batch_request.h"
#include "text/tokenizer.h"

namespace qmpi {

struct ChoiceOutput {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> top;  // per token, when top_logprobs > 0
  std::string finish_reason;                   // "stop" or "length"
};

struct RequestOutput {
  int64_t line_no = 0;
  std::string custom_id;
  Endpoint endpoint = Endpoint::Completion;
  std::string model;
  int64_t prompt_tokens = 0;
  std::vector<int32_t> prompt_ids;  // reported with token ids on
  bool logprobs = false;
  std::vector<ChoiceOutput> choices;
  int64_t created = 0;  // unix seconds
};

// One JSON line (no newline). `token_ids` adds "prompt_token_ids" to the body and "token_ids"
// to each choice (qmpi extensions; the test suite compares ids).
std::string success_line(const RequestOutput& out, const Tokenizer& tokenizer, bool token_ids);
// The body alone (chat.completion or text_completion, its "id" from line_no), as an HTTP
// server answers it.
std::string response_body(const RequestOutput& out, const Tokenizer& tokenizer, bool token_ids);
std::string error_line(int64_t line_no, const std::string& custom_id, const Error& error);

}  // namespace qmpi
