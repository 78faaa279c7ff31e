#include "serve/sse_writer.h"

#include <utility>

namespace qmpi {

SseWriter::SseWriter(StreamShape shape, int32_t choices, bool include_usage)
    : shape_(std::move(shape)), choices_(choices), include_usage_(include_usage) {
  if (shape_.endpoint == Endpoint::Chat)
    for (int32_t i = 0; i < choices_; ++i)
      shapers_.emplace_back(shape_.format, call_id_prefix(int64_t(shape_.number), size_t(i)));
}

void SseWriter::write(const ServeEvent& ev, std::string& out) {
  if (done_) return;
  switch (ev.kind) {
    case ServeEvent::Kind::Accepted:
      if (shape_.endpoint == Endpoint::Chat)
        for (int32_t i = 0; i < choices_; ++i) out += sse_role_chunk(shape_, i);
      break;
    case ServeEvent::Kind::Delta:
      if (size_t(ev.index) < shapers_.size()) {
        MessageShaper& m = shapers_[size_t(ev.index)];
        const size_t before = m.calls();
        out += sse_chat_chunk(shape_, ev.index, m.feed(ev.text), before, &ev);
      } else {
        // Completions' logprobs give each token's offset in the choice's text.
        if (offsets_.size() <= size_t(ev.index)) offsets_.resize(size_t(ev.index) + 1, 0);
        size_t& offset = offsets_[size_t(ev.index)];
        out += sse_delta_chunk(shape_, ev, offset);
        if (shape_.tokenizer)
          for (int32_t id : ev.token_ids)
            if (shape_.tokenizer->has_token(id)) offset += shape_.tokenizer->token_bytes(id).size();
      }
      break;
    case ServeEvent::Kind::Final:
      for (size_t i = 0; i < ev.result->choices.size(); ++i) {
        std::string reason = ev.result->choices[i].finish_reason;
        if (i < shapers_.size()) {
          MessageShaper& m = shapers_[i];
          const size_t before = m.calls();
          out += sse_chat_chunk(shape_, int32_t(i), m.finish(), before, nullptr);
          reason = message_finish_reason(reason, m.calls());
        }
        out += sse_finish_chunk(shape_, int32_t(i), reason);
      }
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
