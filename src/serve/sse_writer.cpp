#include "serve/sse_writer.h"

#include <utility>

namespace qmpi {

SseWriter::SseWriter(StreamShape shape, int32_t choices, bool include_usage)
    : shape_(std::move(shape)), choices_(choices), include_usage_(include_usage) {}

void SseWriter::write(const ServeEvent& ev, std::string& out) {
  if (done_) return;
  switch (ev.kind) {
    case ServeEvent::Kind::Accepted:
      if (shape_.endpoint == Endpoint::Chat)
        for (int32_t i = 0; i < choices_; ++i) out += sse_role_chunk(shape_, i);
      break;
    case ServeEvent::Kind::Delta:
      out += sse_delta_chunk(shape_, ev);
      break;
    case ServeEvent::Kind::Final:
      for (size_t i = 0; i < ev.result->choices.size(); ++i)
        out += sse_finish_chunk(shape_, int32_t(i), ev.result->choices[i].finish_reason);
      if (include_usage_) out += sse_usage_chunk(shape_, *ev.result);
      out += kSseDone;
      done_ = true;
      break;
    case ServeEvent::Kind::Error:
      fail(*ev.error, out);
      break;
  }
}

void SseWriter::fail(const Error& e, std::string& out) {
  if (done_) return;
  out += sse_error_chunk(e);
  out += kSseDone;
  done_ = true;
}

}  // namespace qmpi
