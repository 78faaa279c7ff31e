// Turns generated ids into text as they arrive. A character split across tokens (Chinese, emoji:
// byte-level BPE often cuts them) is held back until its last byte arrives, so a stream never
// shows half a character nor a U+FFFD that the next token would have completed. The pieces
// concatenate to exactly Tokenizer::decode of all ids.
#pragma once
#include <cstdint>
#include <string>

#include "text/tokenizer.h"

namespace qmpi {

class StreamDecoder {
 public:
  // `tokenizer` must outlive the decoder.
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false);

  // The text that `id` completes (often empty, sometimes several characters).
  // Throws RequestField for an id the tokenizer does not have.
  std::string push(int32_t id);
  // What is still held back, with a cut-off character as U+FFFD; the decoder is then empty.
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::string pending_;  // bytes of a character not yet complete
};

}  // namespace qmpi
