// qmpi run: one prompt, streamed text (or one JSON object with --json): the request pipeline
// and the scheduler, as batch and serve run them, with one request.
#include <iostream>
#include <memory>

#include <spdlog/spdlog.h>

#include "app/commands/lora_options.h"
#include "app/commands/options.h"
#include "app/commands/prompt_input.h"
#include "engine/context_limit.h"
#include "engine/scheduler.h"
#include "parallel/launcher.h"
#include "requests/console_sink.h"
#include "requests/pipeline.h"
#include "text/chat_template.h"

namespace qmpi {

int cmd_run(const Args& args) {
  EngineConfig config = engine_config_for(Command::Run);
  PromptCli prompt;
  RequestSampling sampling;
  int64_t max_tokens = 128;
  bool ignore_eos = false, json = false;
  std::string speculative, lora;
  po::options_description desc = engine_options(config);
  desc.add(prompt_options(prompt));
  desc.add(sampling_options(sampling));
  add_lora_select_option(desc, lora);
  desc.add_options()("max-tokens", po::value(&max_tokens)->default_value(128),
                     "tokens to generate at most")("ignore-eos", po::bool_switch(&ignore_eos),
                                                   "keep generating past end-of-sequence tokens")(
      "json", po::bool_switch(&json),
      "print one JSON object (prompt_ids, output_ids, text, finish_reason) instead of streaming")(
      "speculative-config", po::value(&speculative), kSpeculativeConfigHelp);
  po::variables_map vm;
  if (!parse_options(args, desc, vm, "qmpi run --model DIR --prompt TEXT [options]")) return 0;
  if (max_tokens < 1) raise(Err::Usage, "--max-tokens must be at least 1");
  config.scheduler.speculative = parse_speculative_config(speculative);
  finish_lora_options(config.lora, {}, lora);
  // A text prompt needs the tokenizer: find out before the weights load.
  if (prompt.ids.empty() && launcher_rank() == 0) require_model_tokenizer(config.model.files());
  // And a chat template that cannot render fails now, as in serve and batch.
  const ModelSource& m = config.model;
  if (prompt.ids.empty() && prompt.chat && !m.path.empty() && launcher_rank() == 0)
    chat_template_for(m.path, m.chat_template, jinja::parse_limits(m.chat_template_limits));

  finish_engine_config(config);
  return run_engine(config, [&](Engine& engine) {
    const PromptSource src = load_prompt_source(engine, prompt);
    check_context_fits(int64_t(src.ids.size()), max_tokens, engine.max_model_len());
    Request req;
    req.custom_id = "run";
    req.model = lora;  // empty: the base model
    req.prompt_ids = src.ids;
    req.sampling = sampling;
    req.sampling.max_tokens = max_tokens;
    req.sampling.ignore_eos = ignore_eos;
    ModelFacts text;
    text.tokenizer = src.tokenizer.get();
    text.adapter_names = lora_names(config.lora);
    const ModelFacts model = ModelFacts::from(engine, text);

    // The scheduler with one request: its whole prompt in one step, as the engine was sized.
    ExecutorRunner runner(engine.executor());
    Scheduler sched(runner, engine.blocks(), engine.scheduler_config());
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
