// One streamed HTTP response's text: turns a request's events, in order, into server-sent
// events (a role chunk per choice for chat, content deltas, a finish chunk per choice, the usage
// chunk when asked, then [DONE]; an error is one error event, then [DONE]). Pure: the
// connection decides when the text is written.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/errors.h"
#include "serve/openai_stream.h"
#include "serve/serve_event.h"

namespace qmpi {

class SseWriter {
 public:
  SseWriter(StreamShape shape, int32_t choices, bool include_usage);

  // Appends `ev`'s text to `out`. Events after the stream ended add nothing.
  void write(const ServeEvent& ev, std::string& out);
  // Ends the stream with `e` (an error event and [DONE]) unless it has ended already.
  void fail(const Error& e, std::string& out);
  // [DONE] was written: nothing more will be.
  bool done() const { return done_; }

 private:
  StreamShape shape_;
  int32_t choices_;
  bool include_usage_;
  std::vector<MessageShaper> shapers_;  // chat: one per choice
  std::vector<size_t> offsets_;         // completions: each choice's text so far, in bytes
  bool done_ = false;
};

}  // namespace qmpi
