#include "constrain/constraint_source.h"

#include <nlohmann/json.hpp>

#include "constrain/gbnf.h"
#include "constrain/json_schema.h"
#include "constrain/regex.h"
#include "core/errors.h"

namespace qmpi {
namespace {

using json = nlohmann::ordered_json;

json parse(const std::string& text, const char* what) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    raise(Err::RequestField, std::string(what) + " is not valid JSON: " + e.what());
  }
}

// The rest of a Qwen tool call after tool_call_prefill: (name and) arguments, the closing
// brace and tag. Qwen's template writes `{"name": ..., "arguments": ...}`.
int32_t tool_call_grammar(const json& spec, Grammar& g) {
  const bool named = spec.value("named", false);
  std::vector<ExprP> calls;
  for (const auto& tool : spec.at("tools")) {
    const std::string name = tool.at("name").get<std::string>();
    const json params = tool.contains("parameters") && !tool.at("parameters").is_null()
                            ? tool.at("parameters")
                            : json::object({{"type", "object"}});
    int32_t args;
    try {
      args = json_schema_grammar(params, g);
    } catch (Error& e) {
      throw Error(e.code(), "the parameters of tool \"" + name + "\": " + e.message(), e.fix())
          .with_param("tools");
    }
    const std::string quoted = json(name).dump();
    std::vector<ExprP> call;
    if (!named) call.push_back(gx::lit(quoted.substr(1) + ", \"arguments\": "));
    call.push_back(gx::ref(args));
    call.push_back(gx::lit("}\n</tool_call>"));
    calls.push_back(gx::seq(std::move(call)));
  }
  const int32_t root = g.add_rule("tool-call");
  g.define(root, gx::alt(std::move(calls)));
  return root;
}

}  // namespace

std::shared_ptr<const Grammar> compile_grammar(const ConstraintSource& src) {
  auto g = std::make_shared<Grammar>();
  int32_t root = -1;
  switch (src.kind) {
    case ConstraintKind::JsonSchema:
      root = json_schema_grammar(parse(src.text, "the JSON schema"), *g);
      break;
    case ConstraintKind::JsonObject:
      root = json_object_grammar(*g);
      break;
    case ConstraintKind::Regex:
      root = g->add_rule("regex");
      g->define(root, regex_expr(src.text, {}));
      break;
    case ConstraintKind::Choice: {
      const json list = parse(src.text, "the choice list");
      std::vector<ExprP> alts;
      for (const auto& c : list) alts.push_back(gx::lit(c.get<std::string>()));
      root = g->add_rule("choice");
      g->define(root, gx::alt(std::move(alts)));
      break;
    }
    case ConstraintKind::Gbnf:
      root = parse_gbnf(src.text, *g);
      break;
    case ConstraintKind::ToolCall:
      root = tool_call_grammar(parse(src.text, "the tool list"), *g);
      break;
  }
  g->finish(root);
  return g;
}

}  // namespace qmpi
