// `qmpi tokenize`: JSONL in, JSONL out, one output line per input line.
//   default   {"text": "..."}                        -> {"ids": [...]}
//   --decode  {"ids": [...]}                          -> {"text": "..."}
//   --chat    {"messages", "tools", "add_generation_prompt", "chat_template_kwargs"}
//             -> {"text": <the rendered prompt>, "ids": [...]}   (the model's chat template;
//             message contents are never parsed for special tokens)
// A line that cannot be handled becomes {"error": "..."} and the next line goes on.
#include <filesystem>
#include <iostream>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "app/commands/commands.h"
#include "app/commands/prompt_input.h"
#include "core/errors.h"
#include "text/chat_messages.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace qmpi {
namespace {

namespace po = boost::program_options;
using nlohmann::json;

enum class Mode { Encode, Decode, Chat };

struct TokenizeOptions {
  std::string model;
  std::string tokenizer;
  std::string chat_template;         // --chat-template FILE
  std::string chat_template_limits;  // --chat-template-limits
  bool no_special = false;
  bool skip_special = false;
  Mode mode = Mode::Encode;
};

void check_keys(const json& req, std::initializer_list<const char*> allowed) {
  for (const auto& [key, value] : req.items()) {
    bool known = false;
    for (const char* a : allowed) known = known || key == a;
    if (!known) {
      std::string list;
      for (const char* a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
      raise(Err::RequestField, "unknown field \"" + key + "\" (this mode reads: " + list + ")");
    }
  }
}

const json& required(const json& req, const char* key, json::value_t type, const char* type_name) {
  if (!req.contains(key)) raise(Err::RequestField, std::string("missing field \"") + key + "\"");
  const json& v = req.at(key);
  if (v.type() != type)
    raise(Err::RequestField, std::string("field \"") + key + "\" must be " + type_name);
  return v;
}

std::vector<int32_t> read_ids(const json& req) {
  const json& arr = required(req, "ids", json::value_t::array, "an array of token ids");
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (const json& v : arr) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
      raise(Err::RequestField, "\"ids\" must hold non-negative integers; it holds " + v.dump());
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return ids;
}

json handle_line(const std::string& line, const TokenizeOptions& opt, const Tokenizer& tok,
                 const ChatTemplate& chat) {
  json req;
  try {
    req = json::parse(line);
  } catch (const json::parse_error& e) {
    raise(Err::RequestJson, std::string("not valid JSON: ") + e.what());
  }
  if (!req.is_object()) raise(Err::RequestJson, "a line must hold one JSON object");
  switch (opt.mode) {
    case Mode::Encode: {
      check_keys(req, {"text"});
      const json& text = required(req, "text", json::value_t::string, "a string");
      return {{"ids", tok.encode(text.get_ref<const std::string&>(), !opt.no_special)}};
    }
    case Mode::Decode:
      check_keys(req, {"ids"});
      return {{"text", tok.decode(read_ids(req), opt.skip_special)}};
    case Mode::Chat: {
      check_keys(req, {"messages", "tools", "tool_choice", "add_generation_prompt",
                       "chat_template_kwargs"});
      bool add_prompt = true;
      if (req.contains("add_generation_prompt"))
        add_prompt = required(req, "add_generation_prompt", json::value_t::boolean, "true or false")
                         .get<bool>();
      // Re-read in request order: templates print tool schemas with their keys as sent.
      const auto ordered = nlohmann::ordered_json::parse(line);
      ChatExtras extras;
      // As a chat request is checked (QM501), before the template could refuse it (QM303).
      if (required(req, "messages", json::value_t::array, "a non-empty array of messages").empty())
        raise(Err::RequestField, "field \"messages\" must be a non-empty array of messages");
      extras.messages = normalize_chat_messages(ordered.at("messages"));
      if (ordered.contains("tools") && !ordered.at("tools").is_null()) {
        if (!ordered.at("tools").is_array())
          raise(Err::RequestField, "field \"tools\" must be an array of tools");
        extras.tools = ordered.at("tools");
      }
      // As a chat request renders it: tool_choice "none" leaves the tools out.
      if (ordered.contains("tool_choice") && ordered.at("tool_choice") == "none")
        extras.tools = nullptr;
      if (ordered.contains("chat_template_kwargs")) {
        if (!ordered.at("chat_template_kwargs").is_object())
          raise(Err::RequestField, "field \"chat_template_kwargs\" must be an object");
        extras.kwargs = ordered.at("chat_template_kwargs");
      }
      const ChatPrompt prompt = chat.render_prompt({}, add_prompt, extras);
      return {{"text", prompt.text}, {"ids", tok.encode(prompt.text, prompt.plain)}};
    }
  }
  raise(Err::Internal, "unknown tokenize mode");
}

}  // namespace

int cmd_tokenize(const Args& args) {
  TokenizeOptions opt;
  bool decode = false;
  bool chat = false;
  bool show_template = false;
  po::options_description desc(
      "qmpi tokenize: JSONL on stdin -> JSONL on stdout, one output line per input line.\n"
      "  encode (default): {\"text\": ...} -> {\"ids\": [...]}\n"
      "  --decode:         {\"ids\": [...]} -> {\"text\": ...}\n"
      "  --chat:           {\"messages\": [...], \"tools\": [...], \"add_generation_prompt\":\n"
      "                     true, \"chat_template_kwargs\": {\"enable_thinking\": false}}\n"
      "                    -> {\"text\": <prompt>, \"ids\": [...]}  (message text is never\n"
      "                    read as special tokens)\n"
      "A bad line gives {\"error\": ...} and the next line goes on; the exit code is\n"
      "then 2 (after all lines).\nOptions");
  desc.add_options()("help,h", "show this help")("model", po::value(&opt.model),
                                                 "model folder holding tokenizer.json")(
      "tokenizer", po::value(&opt.tokenizer), "tokenizer.json (or its folder) instead of --model")(
      "no-special", po::bool_switch(&opt.no_special),
      "encode special tokens such as <|im_start|> as plain text")(
      "decode", po::bool_switch(&decode), "decode ids to text")(
      "skip-special", po::bool_switch(&opt.skip_special), "with --decode: drop special tokens")(
      "chat", po::bool_switch(&chat), "apply the model's chat template, then encode")(
      "chat-template", po::value(&opt.chat_template),
      "with --chat: this Jinja file instead of the model's chat_template")(
      "chat-template-limits", po::value(&opt.chat_template_limits),
      "raise the chat template's sandbox limits (as qmpi serve's option)")(
      "show-template", po::bool_switch(&show_template),
      "print the chat template --chat would use (its origin on stderr), then exit");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(desc).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    raise(Err::Usage, std::string("qmpi tokenize: ") + e.what());
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (opt.model.empty() == opt.tokenizer.empty())
    raise(Err::Usage, "qmpi tokenize needs exactly one of --model DIR or --tokenizer PATH");
  if (decode && chat) raise(Err::Usage, "qmpi tokenize: --decode and --chat exclude each other");
  if (opt.skip_special && !decode)
    raise(Err::Usage, "qmpi tokenize: --skip-special only applies with --decode");
  opt.mode = decode ? Mode::Decode : chat ? Mode::Chat : Mode::Encode;

  const std::string path = opt.model.empty() ? opt.tokenizer : opt.model;
  const auto tok_ptr = opt.model.empty() ? std::make_shared<const Tokenizer>(Tokenizer::load(path))
                                         : load_model_tokenizer(path);
  const Tokenizer& tok = *tok_ptr;
  const std::filesystem::path p(path);
  const auto chat_template =
      chat_template_for(std::filesystem::is_directory(p) ? p.string() : p.parent_path().string(),
                        opt.chat_template, jinja::parse_limits(opt.chat_template_limits));
  if (show_template) {
    std::cerr << "chat template: " << chat_template->origin() << "\n";
    std::cout << chat_template->source();
    return 0;
  }

  std::string line;
  size_t line_no = 0;
  size_t failed = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    json out;
    try {
      out = handle_line(line, opt, tok, *chat_template);
    } catch (const Error& e) {
      ++failed;
      out = {{"error", "line " + std::to_string(line_no) + ": " + e.what()}};
    }
    std::cout << out.dump() << '\n' << std::flush;
  }
  return failed ? error_entry(Err::RequestField).exit_code : 0;
}

}  // namespace qmpi
