// A seeded generator of hostile requests for the fuzz tests of the three request parsers (batch
// line, ZeroMQ message, HTTP body). It writes JSON text by hand, so that it can also write what
// a JSON library never would: numbers past a double, invalid UTF-8, nesting past the limit,
// truncations and byte flips. Each case knows the id a parser must echo when there is one.
//
// QMPI_FUZZ_ITERATIONS scales every test's iterations (default: a few seconds in total), and
// QMPI_FUZZ_SEED picks another seed (default 1); a failure prints the seed and the input.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace qmpi::fuzz {

inline int64_t iterations(int64_t by_default) {
  if (const char* v = std::getenv("QMPI_FUZZ_ITERATIONS"))
    return std::max<int64_t>(1, std::atoll(v));
  return by_default;
}

inline uint64_t seed() {
  if (const char* v = std::getenv("QMPI_FUZZ_SEED")) return std::strtoull(v, nullptr, 10);
  return 1;
}

// An input shown in a failure message: escaped, cut to a readable length.
inline std::string shown(const std::string& s) {
  std::string out;
  for (unsigned char c : s.substr(0, 400)) {
    if (c >= 0x20 && c < 0x7f) {
      out += char(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return s.size() > 400 ? out + "...(" + std::to_string(s.size()) + " bytes)" : out;
}

struct Case {
  std::string text;
  // The id the parser must echo (as JSON text, e.g. "\"q1\"" or "7"), when the text is a JSON
  // object whose id is readable; nullopt when there is none or the text is not JSON.
  std::optional<std::string> id;
};

class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  // {"v"?, "type"?, "id"?, request fields...}
  Case zmq_message() {
    invalid_ = false;
    std::vector<std::pair<std::string, std::string>> m;
    if (chance(0.3)) m.emplace_back("v", chance(0.8) ? "1" : value(1));
    if (chance(0.4)) {
      static const std::vector<std::string> types = {
          "\"generate\"", "\"generate\"", "\"cancel\"", "\"health\"",
          "\"stats\"",    "\"launch\"",   "3",          "null"};
      m.emplace_back("type", types[pick(types.size())]);
    }
    std::optional<std::string> id;
    if (chance(0.9)) id = add_id(m, "id", 256);
    add_request_fields(m);
    return finish(object(m), id);
  }

  // A plain line {"id", ...} or an OpenAI Batch API line {"custom_id", "url", "body"}.
  Case batch_line() {
    invalid_ = false;
    std::vector<std::pair<std::string, std::string>> m;
    std::optional<std::string> id;
    if (chance(0.5)) {
      if (chance(0.9)) id = add_id(m, "custom_id", 0);
      if (chance(0.8)) m.emplace_back("method", chance(0.9) ? "\"POST\"" : value(1));
      static const std::vector<std::string> urls = {
          "\"/v1/completions\"", "\"/v1/chat/completions\"", "\"/v1/embeddings\"", "7"};
      if (chance(0.95)) m.emplace_back("url", urls[pick(urls.size())]);
      std::vector<std::pair<std::string, std::string>> body;
      add_request_fields(body);
      m.emplace_back("body", chance(0.95) ? object(body) : value(1));
    } else {
      if (chance(0.9)) id = add_id(m, "id", 0);
      add_request_fields(m);
    }
    return finish(object(m), id);
  }

  // The fields of a request, no id.
  std::string http_body() {
    invalid_ = false;
    std::vector<std::pair<std::string, std::string>> m;
    add_request_fields(m);
    if (chance(0.2))
      m.emplace_back("stream_options", chance(0.7) ? "{\"include_usage\": true}" : value(1));
    if (chance(0.2)) m.emplace_back("return_token_ids", chance(0.7) ? "true" : value(1));
    return finish(object(m), std::nullopt).text;
  }

  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

 private:
  // Adds an id under `key`; returns it when a parser can read it (a non-empty string, or an
  // integer; at most `max_bytes` as JSON when that is limited).
  std::optional<std::string> add_id(std::vector<std::pair<std::string, std::string>>& m,
                                    const std::string& key, size_t max_bytes) {
    static const std::vector<std::pair<std::string, bool>> ids = {
        {"\"q1\"", true},
        {"\"caf\\u00e9 \\\"quoted\\\"\"", true},
        {"7", true},
        {"-3", true},
        {"0", true},
        {"18446744073709551615", true},
        {"\"qmpi-line-3\"", true},
        {"\"line-1\"", true},
        {"\"\"", false},
        {"null", false},
        {"[1]", false},
        {"1.5", false},
        {"1e400", false},
        {"true", false},
        {"{}", false}};
    std::string text;
    bool readable = false;
    if (chance(0.1)) {
      const size_t n = chance(0.5) ? 250 : 300;  // about the ZeroMQ limit of 256 bytes
      text = "\"" + std::string(n, 'x') + "\"";
      readable = max_bytes == 0 || text.size() <= max_bytes;
    } else if (chance(0.3)) {
      text = "\"r" + std::to_string(pick(100000)) + "\"";
      readable = true;
    } else {
      const auto& [t, ok] = ids[pick(ids.size())];
      text = t;
      readable = ok;
    }
    m.emplace_back(key, text);
    return readable ? std::optional<std::string>(text) : std::nullopt;
  }

  void add_request_fields(std::vector<std::pair<std::string, std::string>>& m) {
    const double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (r < 0.6)
      m.emplace_back("prompt", prompt());
    else if (r < 0.9)
      m.emplace_back("messages", messages());
    else if (r < 0.95) {
      m.emplace_back("prompt", prompt());
      m.emplace_back("messages", messages());
    }
    static const std::vector<std::string> keys = {"max_tokens",
                                                  "temperature",
                                                  "top_p",
                                                  "top_k",
                                                  "min_p",
                                                  "repetition_penalty",
                                                  "presence_penalty",
                                                  "frequency_penalty",
                                                  "seed",
                                                  "stop",
                                                  "stop_token_ids",
                                                  "ignore_eos",
                                                  "n",
                                                  "stream",
                                                  "user",
                                                  "logprobs",
                                                  "top_logprobs",
                                                  "max_completion_tokens",
                                                  "model",
                                                  "temprature",
                                                  "",
                                                  "prompt_ids"};
    const size_t count = pick(6);
    for (size_t i = 0; i < count; ++i) {
      const std::string& key = keys[pick(keys.size())];
      m.emplace_back(key, chance(0.6) ? plausible(key) : value(2));
    }
  }

  std::string prompt() {
    if (chance(0.7)) {
      static const std::vector<std::string> p = {"\"hello\"",
                                                 "\"once upon a time\"",
                                                 "\"<|im_end|>x<|endoftext|>\"",
                                                 "\"\\u00e9t\\u00e9 \\ud83d\\ude00\"",
                                                 "[1, 2, 3]",
                                                 "[72, 105]"};
      return p[pick(p.size())];
    }
    return value(2);
  }

  std::string messages() {
    if (chance(0.7)) {
      static const std::vector<std::string> roles = {"\"user\"", "\"system\"", "\"assistant\"",
                                                     "\"tool\"", "5"};
      if (chance(0.15))  // a part of any shape
        return "[{\"role\": \"user\", \"content\": [{\"type\": " + value(1) +
               ", \"text\": " + value(1) + "}]}]";
      std::string content = chance(0.8) ? "\"hi there\""
                            : chance(0.5)
                                ? "[{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"text\", "
                                  "\"text\": \"b\"}]"
                                : value(2);
      return "[{\"role\": " + roles[pick(roles.size())] + ", \"content\": " + content + "}]";
    }
    return value(2);
  }

  // A value that could pass for `key` (or misses its range by a little).
  std::string plausible(const std::string& key) {
    const auto integer = [&](int lo, int hi) {
      return std::to_string(std::uniform_int_distribution<int>(lo, hi)(rng_));
    };
    const auto real = [&](double lo, double hi) {
      return std::to_string(std::uniform_real_distribution<double>(lo, hi)(rng_));
    };
    if (key == "max_tokens" || key == "max_completion_tokens") return integer(-1, 9);
    if (key == "temperature") return real(-0.5, 2);
    if (key == "top_p" || key == "min_p") return real(-0.1, 1.1);
    if (key == "top_k") return integer(-2, 50);
    if (key == "repetition_penalty") return real(0, 2);
    if (key == "presence_penalty" || key == "frequency_penalty") return real(-2.5, 2.5);
    if (key == "seed") return integer(-5, 1000000);
    if (key == "stop") return chance(0.5) ? "\"\\n\"" : "[\"a\", \"bc\"]";
    if (key == "stop_token_ids") return "[" + integer(0, 200) + "]";
    if (key == "ignore_eos" || key == "stream") return chance(0.5) ? "true" : "false";
    if (key == "n") return integer(0, 4);
    if (key == "logprobs") return chance(0.5) ? "true" : integer(0, 3);
    if (key == "top_logprobs") return integer(0, 3);
    return "\"x\"";
  }

  std::string number() {
    static const std::vector<std::string> n = {"0",
                                               "-0",
                                               "1",
                                               "-1",
                                               "16.0",
                                               "16.5",
                                               "2",
                                               "3",
                                               "1e400",
                                               "-1e400",
                                               "1E+999",
                                               "1e-400",
                                               "-1e-400",
                                               "1e308",
                                               "-1.7976931348623157e308",
                                               "9007199254740993",
                                               "18446744073709551615",
                                               "18446744073709551616",
                                               "-9223372036854775808",
                                               "-9223372036854775809",
                                               "2147483648",
                                               "4294967296",
                                               "1e20",
                                               "0.1",
                                               "100",
                                               "123456789012345678901234567890",
                                               "1.0e+2"};
    if (chance(0.05)) return std::string(300 + pick(200), '9');
    return n[pick(n.size())];
  }

  std::string string_value() {
    static const std::vector<std::string> s = {"\"\"",
                                               "\"a\"",
                                               "\"hello world\"",
                                               "\"\\u0000\"",
                                               "\"\\ud800\"",
                                               "\"\\udc00\\ud800\"",
                                               "\"\\uD83D\\uDE00\"",
                                               "\"<|im_start|>\"",
                                               "\"<|endoftext|>\"",
                                               "\"\\\\\"",
                                               "\"\\\"\"",
                                               "\"\\n\\t\\r\"",
                                               "\"caf\xc3\xa9\"",
                                               "\"\xe4\xbd\xa0\xe5\xa5\xbd\""};
    if (chance(0.03)) return "\"" + std::string(4000 + pick(4000), 'z') + "\"";
    const std::string& v = s[pick(s.size())];
    // A lone surrogate is not JSON: the whole text is then refused before its id is read.
    if (v.find("\\ud800") != std::string::npos) invalid_ = true;
    return v;
  }

  std::string value(int depth) {
    const size_t k = pick(depth > 0 ? 7 : 4);
    switch (k) {
      case 0:
        return number();
      case 1:
        return string_value();
      case 2: {
        static const std::vector<std::string> lit = {"true", "false", "null"};
        return lit[pick(lit.size())];
      }
      case 3:
        return number();
      case 4:
      case 5: {
        std::string out = "[";
        const size_t n = pick(4);
        for (size_t i = 0; i < n; ++i) out += (i ? ", " : "") + value(depth - 1);
        return out + "]";
      }
      default: {
        std::vector<std::pair<std::string, std::string>> m;
        const size_t n = pick(3);
        for (size_t i = 0; i < n; ++i) m.emplace_back(chance(0.5) ? "type" : "k", value(depth - 1));
        return object(m);
      }
    }
  }

  static std::string object(const std::vector<std::pair<std::string, std::string>>& m) {
    std::string out = "{";
    for (size_t i = 0; i < m.size(); ++i)
      out += (i ? ", \"" : "\"") + m[i].first + "\": " + m[i].second;
    return out + "}";
  }

  // Now and then breaks the text: what a parser then reads is anyone's guess, so no id is
  // promised.
  Case finish(std::string text, std::optional<std::string> id) {
    if (invalid_) id.reset();
    const double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (r < 0.70) return {std::move(text), id};
    if (r < 0.78) {
      text = text.substr(0, pick(text.size() + 1));
    } else if (r < 0.86) {
      for (size_t i = 0, n = 1 + pick(4); i < n && !text.empty(); ++i)
        text[pick(text.size())] = char(pick(256));
    } else if (r < 0.90) {
      const size_t depth = 20 + pick(40);
      text.insert(text.size() - 1,
                  ", \"deep\": " + std::string(depth, '[') + std::string(depth, ']'));
      // Past 32 levels the whole text is refused before its id is read.
      if (depth + 1 > 32) id.reset();
      return {std::move(text), id};
    } else if (r < 0.94) {
      text.insert(text.size() - 1, ", \"bad\": \"\xff\xfe\"");  // invalid UTF-8 in a string
    } else if (r < 0.97) {
      static const std::vector<std::string> junk = {
          "", "null", "[]", "42", "\"s\"", "{", "}", "\xef\xbb\xbf{}", "[[[", "{\"id\":"};
      text = junk[pick(junk.size())];
    } else {
      text += text;  // two objects
    }
    return {std::move(text), std::nullopt};
  }

  std::mt19937_64 rng_;
  bool invalid_ = false;  // the case so far is not JSON
};

}  // namespace qmpi::fuzz
