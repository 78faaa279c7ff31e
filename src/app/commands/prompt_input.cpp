#include "app/commands/prompt_input.h"

#include <algorithm>
#include <filesystem>
#include <type_traits>
#include <variant>

#include "core/errors.h"
#include "io/h5_checkpoint.h"
#include "requests/model_tokenizer.h"
#include "text/chat_template.h"

namespace qmpi {

po::options_description prompt_options(PromptCli& p) {
  po::options_description d("prompt");
  d.add_options()("prompt", po::value(&p.text), "prompt text")(
      "text", po::value(&p.text), "same as --prompt")("ids", po::value(&p.ids),
                                                      "prompt as token ids, e.g. 9707,1879")(
      "chat", po::bool_switch(&p.chat), "wrap the prompt as a user turn in the chat template")(
      "system", po::value(&p.system), "system message for --chat (default: the model's)");
  return d;
}

po::options_description sampling_options(RequestSampling& s) {
  po::options_description d("sampling (defaults from the model's generation_config.json)");
  for (size_t i = 0; i < kSamplingFieldCount; ++i) {
    const SamplingField& row = kSamplingFields[i];
    std::string name(row.name);
    std::replace(name.begin(), name.end(), '_', '-');
    std::visit(
        [&](auto member) {
          using T = std::remove_reference_t<decltype(s.values.*member)>;
          auto* value = po::value<T>()->notifier([&s, i, member](T v) {
            s.values.*member = v;
            s.given.set(i);
          });
          if (row.option_default) value->default_value(s.values.*member);
          d.add_options()(name.c_str(), value, std::string(row.help).c_str());
        },
        row.member);
  }
  return d;
}

PromptSource load_prompt_source(Engine& engine, const PromptCli& p) {
  PromptSource src;
  // The tokenizer sits beside the weights (or inside a .h5), or beside config.json for
  // synthetic weights.
  const ModelSource& m = engine.options().model;
  const std::string& where = m.files();
  if (!p.ids.empty() && !p.text.empty())
    raise(Err::Usage, "give either --prompt/--text or --ids, not both");
  if (p.ids.empty() && p.text.empty()) raise(Err::Usage, "give a prompt with --prompt or --ids");
  src.tokenizer = find_model_tokenizer(where);
  if (p.ids.empty() && !src.tokenizer)
    raise(Err::TokenizerMissing,
          "a text prompt needs tokenizer.json, and there is none for '" + where + "'",
          "Put the model's tokenizer.json beside config.json, or give the prompt as --ids.");
  if (!p.ids.empty()) {
    src.ids = parse_id_list(p.ids, "ids");
  } else if (p.chat) {
    std::vector<ChatMessage> msgs;
    if (!p.system.empty()) msgs.push_back({"system", p.system});
    msgs.push_back({"user", p.text});
    src.ids = chat_template_for(where, m.chat_template, jinja::parse_limits(m.chat_template_limits))
                  ->encode(*src.tokenizer, msgs, true);
  } else {
    src.ids = src.tokenizer->encode(p.text);
  }
  const int64_t V = engine.config().vocab_size;
  for (int32_t id : src.ids)
    if (id >= V)
      raise(Err::RequestField, "token id " + std::to_string(id) + " is outside the vocabulary (" +
                                   std::to_string(V) + " rows)");
  if (src.tokenizer) engine.executor().set_valid_vocab(src.tokenizer->vocab_size());
  return src;
}

}  // namespace qmpi
