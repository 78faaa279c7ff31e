// qmpi run: one prompt, streamed text (or one JSON object with --json): the request pipeline
// and the scheduler, as batch and serve run them, with one request.
#include <iostream>
#include <memory>

#include <spdlog/spdlog.h>

#include "app/commands/options.h"
#include "app/commands/prompt_input.h"
#include "engine/context_limit.h"
#include "engine/scheduler.h"
#include "parallel/launcher.h"
#include "requests/console_sink.h"
#include "requests/pipeline.h"

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
    prompt.chat_template = cli.chat_template;
    const PromptSource src = load_prompt_source(engine, prompt);
    check_context_fits(int64_t(src.ids.size()), max_tokens, engine.max_model_len());
    BatchRequest req;
    req.custom_id = "run";
    req.prompt_ids = src.ids;
    req.sampling = sampling_fields(sampling, vm);
    req.sampling.max_tokens = max_tokens;
    req.sampling.ignore_eos = ignore_eos;
    BatchModel model;
    model.tokenizer = src.tokenizer.get();
    model.gen = engine.generation_config();
    model.eos_ids = stop_token_ids(engine.generation_config(), engine.config());
    model.max_model_len = engine.max_model_len();
    model.vocab_size = engine.config().vocab_size;

    // The scheduler with one request: its whole prompt in one step, as the engine was sized.
    SchedulerConfig cfg;
    cfg.max_num_seqs = 1;
    cfg.max_batched_tokens = engine.max_model_len();
    cfg.max_model_len = engine.max_model_len();
    cfg.prefix_caching = false;
    cfg.micro_batches = 1;
    ExecutorRunner runner(engine.executor());
    Scheduler sched(runner, engine.blocks(), cfg);
    RequestPipeline pipeline(sched, model, {});
    if (!src.tokenizer && !json)
      spdlog::warn("no tokenizer.json next to the model's config, so the output is token ids");
    const auto sink = std::make_shared<ConsoleSink>(std::cout, json, src.tokenizer != nullptr);
    pipeline.admit(0, req.custom_id, req, src.ids, sink);
    while (!sched.idle()) pipeline.dispatch(sched.step());
    sched.flush_finished();
    sink->raise_error();
    return 0;
  });
}

}  // namespace qmpi
