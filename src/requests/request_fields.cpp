#include "requests/request_fields.h"

#include <algorithm>
#include <iterator>
#include <vector>

#include <nlohmann/json.hpp>

namespace qmpi {
namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view kCommon[] = {"model",
                                        "max_tokens",
                                        "temperature",
                                        "top_p",
                                        "top_k",
                                        "min_p",
                                        "repetition_penalty",
                                        "presence_penalty",
                                        "frequency_penalty",
                                        "seed",
                                        "stop",
                                        "stop_token_ids",
                                        "ignore_eos",
                                        "n",
                                        "stream",
                                        "logprobs",
                                        "response_format",
                                        "structured_outputs",
                                        "guided_json",
                                        "guided_regex",
                                        "guided_choice",
                                        "guided_grammar"};
constexpr std::string_view kChat[] = {
    "messages",    "max_completion_tokens", "top_logprobs",          "tools",
    "tool_choice", "chat_template_kwargs",  "add_generation_prompt", "parallel_tool_calls"};
constexpr std::string_view kCompletion[] = {"prompt"};

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

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The field `key` was probably meant to be, or "".
std::string_view near_miss(std::string_view key, bool chat) {
  if (key.size() < 4 || key.size() > 40) return {};
  std::string_view best;
  size_t best_d = 3;
  const auto look = [&](const auto& list) {
    for (std::string_view f : list) {
      const size_t d = edit_distance(key, f);
      if (d < best_d) best = f, best_d = d;
    }
  };
  look(kCommon);
  if (chat)
    look(kChat);
  else
    look(kCompletion);
  return best;
}

}  // namespace

FieldVerdict check_request_field(std::string_view key, const json& value, bool chat) {
  FieldVerdict v;
  const bool own = chat ? in(key, kChat) : in(key, kCompletion);
  const bool other = chat ? in(key, kCompletion) : in(key, kChat);
  if (in(key, kCommon) || own) return v;
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
