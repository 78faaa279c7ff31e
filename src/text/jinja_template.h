// A parsed Jinja template (the subset Hugging Face chat templates use) and its renderer. The
// output keeps the provenance of every byte: text the template wrote itself, or text that came
// from the caller's data (Value::data), so the chat layer can tokenize the two differently.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja_ast.h"
#include "text/jinja_limits.h"
#include "text/jinja_value.h"

namespace qmpi::jinja {

struct Rendered {
  std::string text;
  std::vector<Span> plain;  // byte ranges of `text` that came from caller data
};

class Template {
 public:
  // Throws ChatTemplateInvalid ("<name> line N: ...") when `source` does not parse or nests
  // deeper than limits.parse_depth.
  Template(std::string_view source, std::string name, const Limits& limits = {});
  Template(Template&&) noexcept;
  ~Template();

  // Renders with `globals` as the top-level variables (plus namespace, raise_exception and
  // range). Throws ChatTemplateFailed naming the template line when rendering fails or passes
  // one of the limits, with the template's own message when it called raise_exception.
  Rendered render(const std::map<std::string, Value>& globals) const;

  const std::string& name() const { return name_; }

 private:
  std::string name_;
  Limits limits_;
  Body body_;
};

}  // namespace qmpi::jinja
