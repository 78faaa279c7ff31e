#include "requests/request_fields.h"

#include <algorithm>
#include <iterator>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/edit_distance.h"
#include "engine/sampling_params.h"

namespace qmpi {
namespace {

using json = nlohmann::ordered_json;

// The fields request_parser.cpp reads by hand (the sampling table's scalars are the others,
// engine/sampling_params.h), and which requests take them.
enum class Takes : uint8_t { Both, Chat, Completion };
struct HandParsed {
  std::string_view name;
  Takes takes;
};
constexpr HandParsed kHandParsed[] = {
    {"model", Takes::Both},  // the base model or a LoRA adapter (served_model.h)
    {"max_tokens", Takes::Both},
    {"stop", Takes::Both},
    {"stop_token_ids", Takes::Both},
    {"ignore_eos", Takes::Both},
    {"n", Takes::Both},
    {"stream", Takes::Both},
    {"logprobs", Takes::Both},  // chat: true/false; completions: the alternatives' count
    {"messages", Takes::Chat},
    {"max_completion_tokens", Takes::Chat},
    {"top_logprobs", Takes::Chat},
    {"tools", Takes::Chat},
    {"tool_choice", Takes::Chat},
    {"chat_template_kwargs", Takes::Chat},
    {"add_generation_prompt", Takes::Chat},
    {"parallel_tool_calls", Takes::Chat},
    {"prompt", Takes::Completion},
    // Structured output (requests/structured_output.h); one of them per request.
    {"response_format", Takes::Both},
    {"structured_outputs", Takes::Both},
    {"guided_json", Takes::Both},
    {"guided_regex", Takes::Both},
    {"guided_choice", Takes::Both},
    {"guided_grammar", Takes::Both},
};

// Every field qmpi reads, with the requests that take it.
template <class Fn>
void for_each_known(Fn fn) {
  for (const SamplingField& row : kSamplingFields) fn(row.name, Takes::Both);
  for (const HandParsed& f : kHandParsed) fn(f.name, f.takes);
}

bool takes(Takes t, bool chat) {
  return t == Takes::Both || (t == Takes::Chat) == chat;
}

// Fields of the OpenAI and vLLM request schemas that do not change what qmpi generates
// (bookkeeping, hints, options of features qmpi has not got that are off here anyway).
constexpr std::string_view kIgnored[] = {"user",
                                         "store",
                                         "metadata",
                                         "service_tier",
                                         "prediction",
                                         "reasoning_effort",
                                         "verbosity",
                                         "modalities",
                                         "web_search_options",
                                         "safety_identifier",
                                         "prompt_cache_key",
                                         "priority",
                                         "request_id",
                                         "cache_salt",
                                         "stream_options",
                                         "return_token_ids",
                                         "spaces_between_special_tokens",
                                         "guided_decoding_backend",
                                         "kv_transfer_params",
                                         "vllm_xargs",
                                         "mm_processor_kwargs",
                                         "length_penalty",
                                         "return_tokens_as_token_ids",
                                         "logits_processors",
                                         "audio"};

bool in(std::string_view key, const auto& list) {
  return std::find(std::begin(list), std::end(list), key) != std::end(list);
}

// A field that changes the answer, and when its value asks for nothing (null, false, 0, an
// empty object...).
struct Refused {
  std::string_view key;
  bool (*neutral)(const json&);
  std::string_view what;  // what qmpi does not do
  std::string_view fix;
};

bool is_null(const json& v) {
  return v.is_null();
}
bool null_or_false(const json& v) {
  return v.is_null() || (v.is_boolean() && !v.get<bool>());
}
bool null_or_true(const json& v) {
  return v.is_null() || (v.is_boolean() && v.get<bool>());
}
bool null_or_empty(const json& v) {
  return v.is_null() || ((v.is_object() || v.is_array() || v.is_string()) && v.empty());
}
bool null_or_zero(const json& v) {
  return v.is_null() || (v.is_number() && v.get<double>() == 0);
}
bool null_or_one(const json& v) {
  return v.is_null() || (v.is_number() && v.get<double>() == 1);
}

constexpr Refused kRefused[] = {
    {"logit_bias", null_or_empty, "logit_bias", "Leave out \"logit_bias\"."},
    {"echo", null_or_false, "echoing the prompt", "Leave out \"echo\"."},
    {"best_of", null_or_one, "best_of", "Use \"n\" and choose among the choices yourself."},
    {"use_beam_search", null_or_false, "beam search", "Leave out \"use_beam_search\"."},
    {"suffix", null_or_empty, "suffix (fill-in-the-middle)", "Leave out \"suffix\"."},
    {"prompt_logprobs", null_or_zero, "prompt logprobs",
     "Use `qmpi logits` for the prompt's log-probabilities."},
    {"min_tokens", null_or_zero, "min_tokens", "Leave out \"min_tokens\"."},
    {"include_stop_str_in_output", null_or_false, "include_stop_str_in_output",
     "Leave it out; the stop string is left out of the text."},
    {"skip_special_tokens", null_or_true, "showing special tokens in the text",
     "Leave out \"skip_special_tokens\"; ask for \"return_token_ids\" to see every id."},
    {"continue_final_message", null_or_false, "continue_final_message",
     "Send \"add_generation_prompt\": false to end the prompt after the last message."},
    {"truncate_prompt_tokens", is_null, "prompt truncation", "Send a shorter prompt."},
    {"bad_words", null_or_empty, "bad_words", "Leave out \"bad_words\"."},
    {"allowed_token_ids", is_null, "allowed_token_ids", "Leave out \"allowed_token_ids\"."},
    {"documents", null_or_empty, "documents (RAG templates)", "Put the documents in a message."},
    {"chat_template", null_or_empty, "a chat template per request",
     "Start the server with --chat-template FILE."},
    {"functions", null_or_empty, "the legacy \"functions\" field", "Send \"tools\" instead."},
    {"function_call", is_null, "the legacy \"function_call\" field",
     "Send \"tool_choice\" instead."},
};

// The field `key` was probably meant to be, or "".
std::string_view near_miss(std::string_view key, bool chat) {
  if (key.size() < 4 || key.size() > 40) return {};
  std::string_view best;
  size_t best_d = 3;
  for_each_known([&](std::string_view f, Takes t) {
    if (!takes(t, chat)) return;
    const size_t d = edit_distance(key, f);
    if (d < best_d) best = f, best_d = d;
  });
  return best;
}

}  // namespace

FieldVerdict check_request_field(std::string_view key, const json& value, bool chat) {
  FieldVerdict v;
  bool own = false, other = false;
  for_each_known([&](std::string_view f, Takes t) {
    if (f == key) (takes(t, chat) ? own : other) = true;
  });
  if (own) return v;
  const std::string k(key.substr(0, 64));
  if (other) {
    v.kind = FieldVerdict::Kind::OtherEndpoint;
    v.why = "\"" + k + "\" is not a field of " + (chat ? "chat requests" : "completion requests");
    return v;
  }
  for (const Refused& r : kRefused) {
    if (key != r.key) continue;
    if (r.neutral(value)) {
      v.kind = FieldVerdict::Kind::Ignored;
      return v;
    }
    v.kind = FieldVerdict::Kind::Unsupported;
    v.why = "\"" + k + "\": qmpi does not support " + std::string(r.what) +
            "; ignoring it would change the answer";
    v.fix = r.fix;
    return v;
  }
  if (in(key, kIgnored)) {
    v.kind = FieldVerdict::Kind::Ignored;
    return v;
  }
  if (const std::string_view meant = near_miss(key, chat); !meant.empty()) {
    v.kind = FieldVerdict::Kind::Misspelt;
    v.why = "\"" + k + "\" is not a request field; did you mean \"" + std::string(meant) + "\"?";
    return v;
  }
  v.kind = FieldVerdict::Kind::Ignored;
  return v;
}

}  // namespace qmpi
