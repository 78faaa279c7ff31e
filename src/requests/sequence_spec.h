// A checked request turned into what the scheduler runs: its prompt ids and the sequence spec
// (max_tokens against --max-model-len, sampling over the model's defaults, stop ids). Shared by
// run, batch and serve so that the same request gives the same tokens through each.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/sequence.h"
#include "model/config.h"
#include "requests/request.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace qmpi {

class Engine;

// What a request needs to know about the model.
struct ModelFacts {
  const Tokenizer* tokenizer = nullptr;
  const ChatTemplate* chat = nullptr;
  GenerationConfig gen;
  std::vector<int32_t> eos_ids;
  int64_t max_model_len = 0;
  int64_t vocab_size = 0;         // prompt ids and stop_token_ids must be below it
  bool reasoning_parser = false;  // --reasoning-parser qwen3: <think> text is reasoning_content
  // Names a request's "model" may give (served_model.h), in serve and batch; empty: any.
  std::vector<std::string> served_names;

  // `text` (the tokenizer, chat template, reasoning parser and served names rank 0 loaded)
  // with what the engine knows: generation_config.json's defaults and stop ids (else
  // config.json's eos), max_model_len and the vocabulary size.
  static ModelFacts from(const Engine& engine, ModelFacts text);
};

// The prompt's ids: the chat template over the messages, the given ids, or the encoded text.
// Raises RequestField for an empty prompt or an id outside the vocabulary.
std::vector<int32_t> request_prompt_ids(const Request& req, const ModelFacts& model);

// The ids of a completions request's second and later prompts (Request::more_prompts), checked
// as request_prompt_ids checks the first.
std::vector<std::vector<int32_t>> more_prompt_ids(const Request& req, const ModelFacts& model);

// The sequence of choice 0 for `prompt` (choice i > 0 takes choice_seed(seed, i)). A request
// without max_tokens gets `default_max_tokens` (0: 16 for completions, up to --max-model-len for
// chat). Raises PromptTooLong when prompt + max_tokens exceed max_model_len, SamplingInvalid for
// a stop_token_id outside the vocabulary.
SequenceSpec request_sequence_spec(const Request& req, std::vector<int32_t> prompt,
                                   const ModelFacts& model, int64_t default_max_tokens);

}  // namespace qmpi
