// qmpi logits: float32 logits of every prompt position, [n_tokens, vocab_size], as .npy.
#include <iostream>

#include "app/commands/lora_options.h"
#include "app/commands/options.h"
#include "app/commands/prompt_input.h"
#include "engine/context_limit.h"
#include "io/npy.h"
#include "requests/prompt_logits.h"

namespace qmpi {

int cmd_logits(const Args& args) {
  EngineConfig config = engine_config_for(Command::Logits);
  PromptCli prompt;
  std::string out, mode = "prefill", lora;
  int64_t chunk = 16;
  po::options_description desc = engine_options(config);
  desc.add(prompt_options(prompt));
  add_lora_select_option(desc, lora);
  desc.add_options()("out", po::value(&out)->required(), "output .npy file")(
      "mode", po::value(&mode)->default_value("prefill"),
      "prefill (one step), incremental (one token per step through the KV cache) or chunked")(
      "chunk", po::value(&chunk)->default_value(16), "tokens per step for --mode chunked");
  po::variables_map vm;
  if (!parse_options(args, desc, vm, "qmpi logits --model DIR --ids 1,2,3 --out FILE.npy"))
    return 0;
  PrefillMode pm;
  if (mode == "prefill")
    pm = PrefillMode::Whole;
  else if (mode == "incremental")
    pm = PrefillMode::Incremental;
  else if (mode == "chunked")
    pm = PrefillMode::Chunked;
  else
    raise(Err::Usage, "--mode must be prefill, incremental or chunked, not '" + mode + "'");

  const int32_t adapter = finish_lora_options(config.lora, {}, lora);
  finish_engine_config(config);
  return run_engine(config, [&](Engine& engine) {
    const PromptSource src = load_prompt_source(engine, prompt);
    check_context_fits(int64_t(src.ids.size()), 0, engine.max_model_len());
    const std::vector<float> logits =
        prompt_logits(engine.executor(), engine.blocks(), src.ids, pm, chunk, adapter);
    write_npy_f32(out, logits.data(), int64_t(src.ids.size()), engine.config().vocab_size);
    std::cerr << "qmpi: wrote " << out << " [" << src.ids.size() << ", "
              << engine.config().vocab_size << "]\n";
    return 0;
  });
}

}  // namespace qmpi
