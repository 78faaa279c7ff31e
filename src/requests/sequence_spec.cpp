#include "requests/sequence_spec.h"

#include <algorithm>
#include <string>

#include "core/errors.h"
#include "engine/context_limit.h"
#include "engine/engine.h"
#include "requests/output_format.h"
#include "requests/sampling_resolver.h"
#include "requests/structured_output.h"

namespace qmpi {
namespace {

constexpr int64_t kCompletionDefaultMaxTokens = 16;  // OpenAI's default for /v1/completions

int64_t max_tokens_for(const Request& req, int64_t prompt, const ModelFacts& model,
                       int64_t default_max_tokens) {
  const int64_t room = model.max_model_len - prompt;
  if (req.sampling.max_tokens) {
    check_context_fits(prompt, *req.sampling.max_tokens, model.max_model_len);
    return *req.sampling.max_tokens;
  }
  check_context_fits(prompt, 1, model.max_model_len);  // room for one token at least
  int64_t want = default_max_tokens;
  if (want <= 0) want = req.endpoint == Endpoint::Completion ? kCompletionDefaultMaxTokens : room;
  return std::min(want, room);
}

// The chat template over the conversation (tools left out for tool_choice "none"), then the
// start of a forced tool call. Request text (messages, tools, kwargs, the function's name)
// is never read as special tokens.
std::vector<int32_t> chat_prompt_ids(const Request& req, const ModelFacts& model) {
  ChatExtras extras = req.chat.extras;
  if (req.chat.tool_choice == ToolChoice::None) extras.tools = nullptr;
  ChatPrompt p = model.chat->render_prompt(req.messages, req.chat.add_generation_prompt, extras);
  const std::string prefill = tool_call_prefill(req.chat);
  if (!prefill.empty()) {
    const size_t json_start = p.text.size() + prefill.find('{');
    p.text += prefill;
    p.plain.push_back({json_start, p.text.size()});
  }
  return model.tokenizer->encode(p.text, p.plain);
}

}  // namespace

ModelFacts ModelFacts::from(const Engine& engine, ModelFacts text) {
  ModelFacts m = std::move(text);
  m.gen = engine.generation_config();
  const auto& eos =
      m.gen.eos_token_ids.empty() ? engine.config().eos_token_ids : m.gen.eos_token_ids;
  m.eos_ids.assign(eos.begin(), eos.end());
  m.max_model_len = engine.max_model_len();
  m.vocab_size = engine.config().vocab_size;
  return m;
}

namespace {

std::vector<int32_t> checked_prompt(std::vector<int32_t> ids, const ModelFacts& model) {
  if (ids.empty()) raise(Err::RequestField, "the prompt has no tokens");
  for (int32_t id : ids)
    if (id >= model.vocab_size)
      raise(Err::RequestField, "prompt token id " + std::to_string(id) +
                                   " is outside the vocabulary (" +
                                   std::to_string(model.vocab_size) + " ids)");
  return ids;
}

std::vector<int32_t> completion_ids(const std::string& text, const std::vector<int32_t>& ids,
                                    const ModelFacts& model) {
  return checked_prompt(ids.empty() ? model.tokenizer->encode(text) : ids, model);
}

}  // namespace

std::vector<int32_t> request_prompt_ids(const Request& req, const ModelFacts& model) {
  if (req.endpoint == Endpoint::Chat) return checked_prompt(chat_prompt_ids(req, model), model);
  return completion_ids(req.prompt, req.prompt_ids, model);
}

std::vector<std::vector<int32_t>> more_prompt_ids(const Request& req, const ModelFacts& model) {
  std::vector<std::vector<int32_t>> out;
  for (const CompletionPrompt& p : req.more_prompts)
    out.push_back(completion_ids(p.text, p.ids, model));
  return out;
}

SequenceSpec request_sequence_spec(const Request& req, std::vector<int32_t> prompt,
                                   const ModelFacts& model, int64_t default_max_tokens) {
  const RequestSampling& rs = req.sampling;
  for (int32_t id : rs.stop_token_ids)
    if (id >= model.vocab_size)
      raise(Err::SamplingInvalid, "stop_token_ids has " + std::to_string(id) +
                                      ", outside the vocabulary (" +
                                      std::to_string(model.vocab_size) + " ids)");
  SequenceSpec spec;
  spec.max_tokens = max_tokens_for(req, int64_t(prompt.size()), model, default_max_tokens);
  spec.prompt = std::move(prompt);
  spec.sampling = resolve_sampling(rs, model.gen, req.custom_id);
  if (!rs.ignore_eos) spec.stop_ids = model.eos_ids;
  spec.stop_ids.insert(spec.stop_ids.end(), rs.stop_token_ids.begin(), rs.stop_token_ids.end());
  spec.constraint = request_constraint(req, spec.prompt, model);
  return spec;
}

}  // namespace qmpi
