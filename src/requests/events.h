// What the request pipeline (pipeline.h) tells the one who sent a request: a delta for every
// sampled token, then exactly one final (every choice finished, or the request was cancelled)
// or one error. The sinks turn these into what each front shows: streamed text on stdout
// (`qmpi run`), one JSON line (`qmpi batch`), SSE chunks or ZeroMQ messages (`qmpi serve`).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/errors.h"
#include "engine/sampler.h"
#include "requests/output_format.h"
#include "requests/request.h"

namespace qmpi {

struct ChoiceOutput {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> top;  // per token, when top_logprobs > 0
  std::string finish_reason;                   // "stop", "length" or "cancelled"
};

struct RequestOutput {
  int64_t key = 0;  // the number in the response ids: the batch input line, or the serve ticket
  std::string custom_id;
  Endpoint endpoint = Endpoint::Completion;
  std::string model;
  int64_t prompt_tokens = 0;
  std::vector<int32_t> prompt_ids;  // reported with token ids on
  bool logprobs = false;
  OutputFormat format;  // chat: how the texts become messages (message_shaper.h)
  std::vector<ChoiceOutput> choices;
  int64_t created = 0;  // unix seconds
};

class RequestSink {
 public:
  virtual ~RequestSink() = default;
  // Choice `index` sampled `token`; `text` is the text it released (often empty: stop strings
  // hold text back until it cannot be the start of one).
  virtual void delta(int32_t index, const std::string& text, int32_t token) = 0;
  // For requests that asked for logprobs, just before the token's delta(): its log-probability
  // and the alternatives asked for (top_logprobs), for sinks that stream them.
  virtual void token_logprobs(int32_t /*index*/, float /*logprob*/,
                              const std::vector<TokenLogprob>& /*top*/) {}
  // Every choice has finished; their texts, tokens and finish reasons.
  virtual void final(RequestOutput out) = 0;
  // The request failed (its sequences are gone); nothing follows.
  virtual void error(const Error& e) = 0;
};

}  // namespace qmpi
