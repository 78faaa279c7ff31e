// The prompt and sampling options of `run`, `logits` and `bench`, and turning them into ids.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/commands/options.h"
#include "model/config.h"
#include "requests/request.h"
#include "text/tokenizer.h"

namespace qmpi {

struct PromptCli {
  std::string text;
  std::string ids;
  bool chat = false;
  std::string system;
  std::string chat_template;  // not an option here: EngineCli's --chat-template, copied in
};

struct SamplingCli {
  float temperature = 1.0f, top_p = 1.0f, min_p = 0.0f;
  int32_t top_k = -1;
  float repetition_penalty = 1.0f, presence_penalty = 0.0f, frequency_penalty = 0.0f;
  uint64_t seed = 0;
};

po::options_description prompt_options(PromptCli& p);
po::options_description sampling_options(SamplingCli& s);

struct PromptSource {
  std::vector<int32_t> ids;
  std::shared_ptr<const Tokenizer> tokenizer;  // null when the model has none (ids given)
};

// The model's tokenizer: tokenizer.json in a model folder (or beside a config.json), or the one
// stored in a qmpi .h5. find_ returns null when there is none; load_ raises TokenizerMissing.
std::shared_ptr<const Tokenizer> find_model_tokenizer(const std::string& path);
std::shared_ptr<const Tokenizer> load_model_tokenizer(const std::string& path);
// Raises TokenizerMissing when the model at `path` has none, without reading it: commands that
// need one call it before the weights load, so that they fail in a second instead of after.
// (A path that does not exist is left for the engine to report.)
void require_model_tokenizer(const std::string& path);

// Rank 0: loads the model's tokenizer (needed for --prompt/--chat, optional with --ids), builds
// the prompt ids and tells the executor how many ids can be sampled.
PromptSource load_prompt_source(Engine& engine, const PromptCli& p);

// The sampling options given on the command line, as a request's fields: the resolver
// (requests/sampling_resolver.h) takes the rest from generation_config.json.
RequestSampling sampling_fields(const SamplingCli& s, const po::variables_map& vm);
std::vector<int32_t> stop_token_ids(const GenerationConfig& gen, const ModelConfig& cfg);

}  // namespace qmpi
