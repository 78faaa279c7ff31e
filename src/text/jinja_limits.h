// What one chat template may cost: the sandbox every template (the model's own, or one given
// with --chat-template) compiles and renders in. A template that passes a limit fails with its
// catalogue code, QM302 when compiling and QM303 when rendering, instead of overflowing the
// stack, spinning, or growing a string until memory runs out. The defaults leave real chat
// templates (Qwen's with tools, over conversations of thousands of messages) far below them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace qmpi::jinja {

struct Limits {
  // Nesting of blocks and expressions in the source: parentheses, {% if %}, chained `+`, `.a`.
  int parse_depth = 200;
  // Nesting of the lists and mappings a template builds (`[x]` inside `[x]`...).
  int render_depth = 100;
  // Loop iterations in one render, all loops together.
  int64_t loop_iterations = 200000;
  // Work in one render: one step per expression or statement evaluated, per 64 bytes of a
  // string built, and per list or mapping item copied.
  int64_t steps = 2000000;
  // The rendered text, and any one string the template builds.
  size_t output_bytes = size_t(64) << 20;
};

// --chat-template-limits "steps=N,loop=N,depth=N,render-depth=N,output=SIZE" (any subset, each
// a positive number; output takes 64MiB-style sizes): the defaults with those replaced. Throws
// Error(Usage) for an unknown key or a bad number.
Limits parse_limits(std::string_view spec);

}  // namespace qmpi::jinja
