// Every limit on the size and shape of one request, whichever front it came through (HTTP body,
// ZeroMQ message, batch line), in one place; docs/protocol.md ("Request limits") lists them.
// Each keeps the cost of checking an accepted request linear in its size and bounded.
#pragma once
#include <cstddef>
#include <cstdint>

namespace qmpi {

constexpr int kMaxJsonDepth = 32;        // arrays and objects nested in one another
constexpr size_t kMaxObjectKeys = 1024;  // keys of any one object (metadata, logit_bias...)
constexpr size_t kMaxStopStrings = 16;   // "stop" strings
constexpr size_t kMaxStopBytes = 1024;   // bytes of one "stop" string
constexpr int32_t kMaxTopLogprobs = 20;  // OpenAI's limit
constexpr int32_t kMaxChoices = 128;     // "n"
constexpr size_t kMaxPrompts = 64;       // prompts in one completions request ("prompt": [...])
// OpenAI allows 300 logit_bias entries; qmpi honours none (only {} or null is accepted), and an
// object larger than kMaxObjectKeys is refused before it is parsed.

}  // namespace qmpi
