// qmpi run: one prompt, streamed text (or one JSON object with --json).
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "app/commands/options.h"
#include "app/commands/prompt_input.h"
#include "requests/generate.h"
#include "text/stream_decoder.h"

namespace qmpi {

int cmd_run(const Args& args) {
  EngineCli cli;
  PromptCli prompt;
  SamplingCli sampling;
  int64_t max_tokens = 128;
  bool ignore_eos = false, json = false;
  po::options_description desc = engine_options(cli);
  desc.add(prompt_options(prompt));
  desc.add(sampling_options(sampling));
  desc.add_options()("max-tokens", po::value(&max_tokens)->default_value(128),
                     "tokens to generate at most")("ignore-eos", po::bool_switch(&ignore_eos),
                                                   "keep generating past end-of-sequence tokens")(
      "json", po::bool_switch(&json),
      "print one JSON object (prompt_ids, output_ids, text, finish_reason) instead of streaming");
  po::variables_map vm;
  if (!parse_options(args, desc, vm, "qmpi run --model DIR --prompt TEXT [options]")) return 0;
  if (max_tokens < 1) raise(Err::Usage, "--max-tokens must be at least 1");
  // A text prompt needs the tokenizer: find out before the weights load.
  if (prompt.ids.empty() && launcher_rank() == 0)
    require_model_tokenizer(cli.model.empty() ? cli.model_config : cli.model);

  return run_engine(to_engine_options(cli), [&](Engine& engine) {
    const PromptSource src = load_prompt_source(engine, prompt);
    GenerateRequest req;
    req.prompt = src.ids;
    req.max_tokens = max_tokens;
    req.ignore_eos = ignore_eos;
    req.sampling = resolve_sampling(sampling, vm, engine.generation_config());
    req.stop_ids = stop_token_ids(engine.generation_config(), engine.config());
    check_prompt_fits(req.prompt.size(), max_tokens, engine.max_model_len());

    std::optional<StreamDecoder> stream;
    if (src.tokenizer && !json) stream.emplace(*src.tokenizer, /*skip_special=*/true);
    const GenerateResult res = generate(engine.executor(), engine.blocks(), req, [&](int32_t t) {
      if (!stream) return;
      std::cout << stream->push(t) << std::flush;
    });
    if (stream) std::cout << stream->flush() << std::endl;
    if (json) {
      nlohmann::json j;
      j["prompt_ids"] = req.prompt;
      j["output_ids"] = res.output;
      j["logprobs"] = res.logprobs;
      j["text"] = src.tokenizer ? src.tokenizer->decode(res.output, true) : "";
      j["finish_reason"] = res.finish_reason;
      std::cout << j.dump() << std::endl;
    }
    return 0;
  });
}

}  // namespace qmpi
