// One line of a batch input file, checked strictly: an OpenAI Batch API line
//   {"custom_id", "method": "POST", "url": "/v1/chat/completions" | "/v1/completions", "body"}
// or the plain form {"id", "prompt" | "messages", ...sampling fields}. A line that cannot be
// used becomes an error with its catalogue code (RequestJson, RequestField, SamplingInvalid)
// and the job goes on. See docs/batch.md for the fields.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/errors.h"
#include "engine/sampling_params.h"
#include "model/config.h"
#include "text/chat_template.h"

namespace qmpi {

enum class Endpoint { Chat, Completion };

// Sampling fields as the request gave them; unset ones come from generation_config.json.
struct RequestSampling {
  std::optional<float> temperature, top_p, min_p;
  std::optional<int32_t> top_k;
  std::optional<float> repetition_penalty, presence_penalty, frequency_penalty;
  std::optional<uint64_t> seed;
  std::optional<int64_t> max_tokens;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int32_t n = 1;
  bool logprobs = false;     // report the sampled tokens' log-probabilities
  int32_t top_logprobs = 0;  // and this many alternatives per token
};

struct BatchRequest {
  std::string custom_id;
  Endpoint endpoint = Endpoint::Completion;
  bool openai_line = false;           // came as an OpenAI Batch API line
  std::string model;                  // the body's "model", echoed in the response
  std::vector<ChatMessage> messages;  // chat
  std::string prompt;                 // completion text
  std::vector<int32_t> prompt_ids;    // completion given as token ids
  RequestSampling sampling;
  bool stream = false;  // "stream": true (serving only)
};

struct ParsedLine {
  std::string custom_id;  // line_id(N) when the line has none that can be read
  std::optional<BatchRequest> request;
  std::optional<Error> error;
};

// `line_no` is 1-based and goes into error messages.
ParsedLine parse_request_line(std::string_view line, int64_t line_no);

// Checks the request fields of `body` (an OpenAI request body, or the fields of a plain request
// without its id) into `r`. With `r.openai_line` set, `r.endpoint` is what the URL asks for and
// the body must match it. `where` starts every message ("line 7", "request \"a1\""). Only
// serving passes `allow_stream`. Raises RequestJson, RequestField or SamplingInvalid.
void read_request_body(const nlohmann::json& body, BatchRequest& r, const std::string& where,
                       bool allow_stream);

// The id a line without a usable custom_id/id gets in the output: "qmpi-line-N". The prefix is
// reserved (src/batch/batch_ids.h), so it never equals another line's own id.
std::string line_id(int64_t line_no);
// Whether `id` has the reserved form "qmpi-line-<digits>".
bool is_line_id_form(const std::string& id);

// The request's sampling settings over the model's defaults (generation_config.json; a
// request without a seed gets one derived from its custom_id, so a rerun samples the same).
SamplingParams resolve_request_sampling(const BatchRequest& req, const GenerationConfig& gen);

}  // namespace qmpi
