// What the engine loop tells a front (ZMQ broker, HTTP gateway) about one request, and the sink
// it tells it through. A request sees Accepted once it is admitted (or one Error), then Deltas
// in order, then exactly one Final (every choice done, or cancelled) or one Error.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/errors.h"
#include "requests/response_json.h"

namespace qmpi {

struct ServeEvent {
  enum class Kind : uint8_t { Accepted, Delta, Final, Error };
  Kind kind = Kind::Delta;
  int32_t index = 0;               // Delta: the choice
  std::string text;                // Delta: text this step released (may be empty)
  std::vector<int32_t> token_ids;  // Delta: tokens this step sampled
  // Delta, when the request asked for logprobs: each token's, and its alternatives.
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> top_logprobs;
  // Final: every choice's text, tokens and finish_reason ("stop", "length", "cancelled") and the
  // prompt size, in the shape the batch responses use.
  std::shared_ptr<const RequestOutput> result;
  std::optional<Error> error;  // Error
};

class EventSink {
 public:
  virtual ~EventSink() = default;
  // Called on the engine (MPI) thread only: queue the event and return, never wait on a client.
  virtual void deliver(ServeEvent event) = 0;
};

}  // namespace qmpi
