// The prompt and sampling options of `run`, `logits` and `bench`, and turning them into ids.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/commands/options.h"
#include "model/config.h"
#include "requests/model_tokenizer.h"
#include "requests/request.h"
#include "text/tokenizer.h"

namespace qmpi {

struct PromptCli {
  std::string text;
  std::string ids;
  bool chat = false;
  std::string system;
};

po::options_description prompt_options(PromptCli& p);
// One option per row of the sampling table (engine/sampling_params.h), --top-p for top_p; what
// is given lands in `s` as a request's fields would (the resolver takes the rest from
// generation_config.json).
po::options_description sampling_options(RequestSampling& s);

struct PromptSource {
  std::vector<int32_t> ids;
  std::shared_ptr<const Tokenizer> tokenizer;  // null when the model has none (ids given)
};

// Rank 0: loads the model's tokenizer (needed for --prompt/--chat, optional with --ids), builds
// the prompt ids and tells the executor how many ids can be sampled.
PromptSource load_prompt_source(Engine& engine, const PromptCli& p);

}  // namespace qmpi
