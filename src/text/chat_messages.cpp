#include "text/chat_messages.h"

#include "core/errors.h"

namespace qmpi {

using OJson = nlohmann::ordered_json;

OJson normalize_chat_messages(const OJson& messages) {
  if (!messages.is_array()) raise(Err::RequestField, "\"messages\" must be an array of messages");
  OJson out = OJson::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    OJson m = messages[i];
    if (!m.is_object()) raise(Err::RequestField, where + " must be an object");
    if (!m.contains("role") || !m.at("role").is_string())
      raise(Err::RequestField, where + " needs a string field \"role\"");
    OJson& role = m.at("role");
    // OpenAI's `developer` is the system message of its newer models; Qwen's templates know
    // the four roles below and drop any other, which would answer a different conversation.
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      raise(Err::RequestField,
            where + ".role \"" + role.get<std::string>().substr(0, 40) +
                "\" is not a chat role: use \"system\", \"developer\" (read as system), "
                "\"user\", \"assistant\" or \"tool\"");
    if (m.contains("content")) {
      OJson& c = m.at("content");
      if (c.is_array()) {
        std::string text;
        for (size_t j = 0; j < c.size(); ++j) {
          const OJson& part = c[j];
          const bool text_part = part.is_object() && part.contains("type") &&
                                 part.at("type") == "text" && part.contains("text") &&
                                 part.at("text").is_string();
          if (!text_part)
            raise(Err::RequestField, where + ".content[" + std::to_string(j) +
                                         "] must be {\"type\": \"text\", \"text\": ...}; qmpi "
                                         "models read text only");
          if (j) text += '\n';
          text += part.at("text").get<std::string>();
        }
        c = text;
      } else if (c.is_null()) {
        c = "";
      } else if (!c.is_string()) {
        raise(Err::RequestField, where + ".content must be a string, null or text parts");
      }
    } else {
      m["content"] = "";
    }
    if (m.contains("tool_calls") && !m.at("tool_calls").is_array() && !m.at("tool_calls").is_null())
      raise(Err::RequestField, where + ".tool_calls must be an array");
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<ChatMessage> chat_message_list(const OJson& normalized) {
  std::vector<ChatMessage> out;
  for (const OJson& m : normalized) {
    const OJson c = m.value("content", OJson(nullptr));
    out.push_back({m.at("role").get<std::string>(), c.is_string() ? c.get<std::string>() : ""});
  }
  return out;
}

}  // namespace qmpi
