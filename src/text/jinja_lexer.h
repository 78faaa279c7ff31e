// Template source -> tokens, applying Jinja's whitespace rules as Hugging Face configures them
// for chat templates: trim_blocks (the newline after a block or comment tag goes), lstrip_blocks
// (spaces and tabs before a block or comment tag on its own line go), `{%-`/`-%}` (and the same
// on `{{ }}`) strip all whitespace on that side, and one trailing newline of the source goes.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace qmpi::jinja {

struct Token {
  enum Kind {
    Text,        // template text outside tags, whitespace rules already applied
    VarBegin,    // {{
    VarEnd,      // }}
    BlockBegin,  // {%
    BlockEnd,    // %}
    Name,
    String,  // value holds the unescaped text
    Int,
    Float,
    Op,   // ( ) [ ] { } . , : | ~ + - * / // % ** = == != < > <= >=
    End,  // end of source
  };
  Kind kind;
  std::string value;
  int line;
};

// Throws ChatTemplateInvalid naming `name` and the line for an unclosed tag or bad token.
std::vector<Token> lex(std::string_view source, const std::string& name);

}  // namespace qmpi::jinja
