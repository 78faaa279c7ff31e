// The parsed form of a chat template: expressions and statements, each with its source line so
// render errors can name it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "text/jinja_value.h"

namespace qmpi::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum Kind {
    Literal,  // value
    Name,     // name
    List,     // items
    Dict,     // items as key, value pairs
    Attr,     // items[0].name
    Item,     // items[0][items[1]]
    Slice,    // items[0][items[1]:items[2]:items[3]] (null entries: omitted)
    Call,     // items[0](items[1..]) with keyword arguments in kwargs
    Filter,   // items[0] | name(items[1..], kwargs)
    Test,     // items[0] is [not] name(items[1..]); negate
    Unary,    // op items[0]: "not", "-", "+"
    Binary,   // items[0] op items[1]: arithmetic and "~"
    Compare,  // items[0] ops[0] items[1] ops[1] items[2]...: Python's chained comparisons
    And,
    Or,
    Cond,  // items[0] if items[1] else items[2] (items[2] may be null)
  };
  Kind kind;
  int line = 0;
  int height = 1;    // levels of expressions in this one, itself included
  std::string name;  // Name, Attr, Call (unused), Filter, Test, Unary/Binary operator
  Value value;       // Literal
  bool negate = false;
  std::vector<ExprPtr> items;
  std::vector<std::string> ops;  // Compare: ==, !=, <, >, <=, >=, in, not in
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum Kind {
    Text,    // text
    Output,  // {{ expr }}
    If,      // branches: (condition, body)...; else_body
    For,     // targets in iter [if filter]: body; else_body
    Set,     // target[.attr] = expr
    Break,
    Continue,
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;                                    // Output, Set value, For iterable
  std::vector<std::pair<ExprPtr, Body>> branches;  // If
  std::vector<std::string> targets;                // For loop variables, Set name
  std::string attr;                                // Set ns.attr
  ExprPtr filter;                                  // For ... if filter
  Body body;
  Body else_body;
};

}  // namespace qmpi::jinja
