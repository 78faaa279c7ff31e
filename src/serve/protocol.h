// The ZeroMQ protocol, version 1 (docs/protocol.md): one JSON object per message.
//   client -> server: {"v": 1, "type": "generate", "id", "api_key", "prompt" | "messages",
//                      sampling fields as in batch, "stream"} | {"type": "cancel", "id",
//                      "api_key"} | {"type": "health"} | {"type": "stats"}
//   server -> client: {"type": "delta", "id", "index", "text", "token_ids"} ...
//                     {"type": "final", "id", "finish_reason", "choices", "usage"} |
//                     {"type": "error", "id", "code": "QM501", "name", "message"} |
//                     {"type": "health", "status"} | {"type": "stats", ...}
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "core/errors.h"
#include "requests/request_json.h"  // check_json_shape, parse_request_json
#include "requests/request_parser.h"
#include "requests/response_json.h"
#include "serve/metrics.h"
#include "serve/request_hub.h"
#include "serve/serve_event.h"

namespace qmpi {

constexpr int kProtocolVersion = 1;
constexpr size_t kMaxIdBytes = 256;

enum class MessageType : uint8_t { Generate, Cancel, Health, Stats };

struct ClientMessage {
  MessageType type = MessageType::Generate;
  // The client's id as JSON text ("\"a1\"" or "7"), echoed in replies; empty when none.
  std::string id;
  Request request;  // Generate; custom_id is the id's plain value (string or digits)
};

// Parses one message. Raises RequestJson (not JSON, not an object), RequestField (unknown
// field, wrong type, missing id, bad version) or SamplingInvalid; `id` receives the message's id
// as soon as it is read, so that the error reply can carry it. With a non-empty `api_key`,
// generate and cancel messages must carry it in "api_key" (Unauthorized otherwise, raised
// before any other field is looked at); health and stats stay open for probes, as HTTP's
// /health and /metrics do. Every message may carry "api_key", so a client can always send it.
ClientMessage parse_client_message(std::string_view text, std::string& id,
                                   std::string_view api_key = {});

// Replies. `id` is the JSON text parse_client_message gave (empty: no "id" in the reply).
std::string delta_message(const std::string& id, const ServeEvent& delta);
// `with_text`: each choice carries its whole text and token ids (requests that did not stream).
std::string final_message(const std::string& id, const RequestOutput& out, bool with_text);
std::string error_message(const std::string& id, const Error& error);
std::string health_message(const std::string& id, Health health);
// GET /health's body: {"status"} and, with several data-parallel replicas, "replicas": each
// one's "state" ("up" or "down", with the "reason" it was lost).
std::string health_body(const EngineSnapshot& engine);
std::string stats_message(const std::string& id, const EngineSnapshot& engine, int64_t queued,
                          const MetricCounters& counters, int64_t clients);

// "choices[0].finish_reason", or "cancelled"/"" for an empty output.
std::string overall_finish_reason(const RequestOutput& out);

}  // namespace qmpi
