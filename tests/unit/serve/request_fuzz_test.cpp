// Fuzzing the three request parsers (a batch line, a ZeroMQ message, an HTTP body) and the
// ZeroMQ front end to end, with the seeded generator of request_fuzz.h. Whatever comes in:
// - nothing but a qmpi::Error leaves a parser, never with the internal code, always with a
//   request-input code of the catalogue and a message;
// - the error echoes the request's id whenever the text is a JSON object with a readable id
//   (numbers past a double included: issue 19, item 1);
// - what a parser accepts also gets through tokenizing and the sequence spec, or is refused
//   there with a request-input code;
// - the error's reply (batch error line, ZeroMQ error message, HTTP error body) is valid JSON;
// - over a real ZeroMQ socket, every message gets its replies, ending in exactly one final or
//   error (or its health/stats reply): none is lost.
// QMPI_FUZZ_ITERATIONS and QMPI_FUZZ_SEED run it longer or with another seed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "../engine/fake_model.h"
#include "../text/text_test_util.h"
#include "request_fuzz.h"
#include "requests/request_parser.h"
#include "requests/response_json.h"
#include "requests/sequence_spec.h"
#include "serve/http_body.h"
#include "serve/openai_stream.h"
#include "serve/protocol.h"
#include "serve/serve_loop.h"
#include "serve/zmq_broker.h"

namespace qmpi {
namespace {

using json = nlohmann::json;

const std::set<Err> kParseCodes = {Err::RequestJson, Err::RequestField, Err::SamplingInvalid,
                                   Err::FieldUnsupported};
const std::set<Err> kSpecCodes = {Err::RequestField, Err::PromptTooLong, Err::SamplingInvalid};
constexpr int kMaxFailures = 5;  // per test: enough to see a pattern, not a flood

// The plain value of an id given as JSON text: a string itself, an integer's digits.
std::string plain_id(const std::string& id_json) {
  const json v = json::parse(id_json);
  return v.is_string() ? v.get<std::string>() : v.dump();
}

class RequestFuzz : public test::QwenTokenizerTest {
 protected:
  void SetUp() override {
    test::QwenTokenizerTest::SetUp();
    model_.tokenizer = &tok();
    model_.chat = &chat_;
    model_.eos_ids = {151643, 151645};
    model_.max_model_len = 64;
    model_.vocab_size = 151936;
  }

  // A request a parser accepted goes on as the fronts take it: prompt ids, then the spec.
  void continue_request(const Request& r, const std::string& input) {
    try {
      request_sequence_spec(r, request_prompt_ids(r, model_), model_, 0);
    } catch (const Error& e) {
      expect_code(e, kSpecCodes, input);
    }
  }

  void expect_code(const Error& e, const std::set<Err>& codes, const std::string& input) {
    if (codes.count(e.code()) && !e.message().empty()) return;
    fail("error " + error_id(e.code()) + " (" + e.message() + ") for", input);
  }

  void fail(const std::string& what, const std::string& input) {
    if (++failures_ <= kMaxFailures)
      ADD_FAILURE() << what << " [seed " << fuzz::seed() << "]\n  " << fuzz::shown(input);
  }

  ModelFacts model_;
  Qwen25ChatTemplate chat_;
  int failures_ = 0;
};

TEST_F(RequestFuzz, BatchLines) {
  fuzz::Generator gen(fuzz::seed());
  const int64_t n = fuzz::iterations(3000);
  for (int64_t i = 0; i < n; ++i) {
    const fuzz::Case c = gen.batch_line();
    const int64_t line_no = 1 + i;
    ParsedLine p;
    try {
      p = parse_request_line(c.text, line_no);
    } catch (const std::exception& e) {
      fail(std::string("parse_request_line threw ") + e.what() + " for", c.text);
      continue;
    }
    const std::string want_id = c.id ? plain_id(*c.id) : line_id(line_no);
    if (c.id && p.custom_id != want_id)
      fail("custom_id " + p.custom_id + ", not " + want_id + ", for", c.text);
    if (p.error) {
      expect_code(*p.error, kParseCodes, c.text);
      if (p.error->message().find("line " + std::to_string(line_no)) == std::string::npos)
        fail("the message does not name the line: " + p.error->message() + " for", c.text);
      const json out = json::parse(error_line(line_no, p.custom_id, *p.error), nullptr, false);
      if (out.is_discarded() || out["custom_id"] != p.custom_id ||
          out["error"]["code"] != error_id(p.error->code()))
        fail("the error line is not valid JSON with its id and code for", c.text);
    } else if (!p.request) {
      fail("neither a request nor an error for", c.text);
    } else {
      continue_request(*p.request, c.text);
    }
  }
}

TEST_F(RequestFuzz, ZmqMessages) {
  fuzz::Generator gen(fuzz::seed() + 1);
  const int64_t n = fuzz::iterations(3000);
  for (int64_t i = 0; i < n; ++i) {
    const fuzz::Case c = gen.zmq_message();
    std::string id;
    try {
      const ClientMessage m = parse_client_message(c.text, id);
      if (m.type == MessageType::Generate) continue_request(m.request, c.text);
    } catch (const Error& e) {
      expect_code(e, kParseCodes, c.text);
      if (c.id && (id.empty() || json::parse(id) != json::parse(*c.id)))
        fail("the error has id '" + id + "', not " + *c.id + ", for", c.text);
      const json reply = json::parse(error_message(id, e), nullptr, false);
      if (reply.is_discarded() || reply["code"] != error_id(e.code()) ||
          reply.contains("id") != !id.empty())
        fail("the error reply is not valid JSON with its code and id for", c.text);
    } catch (const std::exception& e) {
      fail(std::string("parse_client_message threw ") + e.what() + " for", c.text);
    }
  }
}

TEST_F(RequestFuzz, HttpBodies) {
  fuzz::Generator gen(fuzz::seed() + 2);
  const int64_t n = fuzz::iterations(3000);
  for (int64_t i = 0; i < n; ++i) {
    const std::string text = gen.http_body();
    const Endpoint endpoint = gen.chance(0.5) ? Endpoint::Chat : Endpoint::Completion;
    try {
      const HttpBody b = parse_http_body(text, endpoint, "http-" + std::to_string(i));
      continue_request(b.request, text);
    } catch (const Error& e) {
      expect_code(e, kParseCodes, text);
      const json body = json::parse(http_error_body(e), nullptr, false);
      if (body.is_discarded() || body["error"]["qmpi_code"] != error_id(e.code()))
        fail("the error body is not valid JSON with its code for", text);
    } catch (const std::exception& e) {
      fail(std::string("parse_http_body threw ") + e.what() + " for", text);
    }
  }
}

// --- the ZeroMQ front end to end -------------------------------------------------------------

const Tokenizer& bytes_tokenizer() {
  static const Tokenizer t = test::from(test::tiny_tokenizer({}));
  return t;
}

// The broker, the serving loop on its own thread, a fake model, and one DEALER client.
class ZmqFront {
 public:
  static constexpr size_t kMaxMessageBytes = 8192;

  ZmqFront() : fake_(1024, 4, 128), blocks_(1024, 4), sched_(fake_, blocks_, config()), hub_(64) {
    model_.tokenizer = &bytes_tokenizer();
    model_.chat = &chat_;
    model_.gen.do_sample = false;
    model_.eos_ids = {10};
    model_.max_model_len = 96;
    model_.vocab_size = 256;
    opts_.model_name = "fake";
    opts_.idle_wait = std::chrono::milliseconds(1);
    BrokerOptions b;
    b.endpoint = "tcp://127.0.0.1:*";
    b.max_message_bytes = kMaxMessageBytes;
    broker_ = std::make_unique<ZmqBroker>(b, model_, hub_, metrics_);
    loop_ = std::thread([this] {
      ServeLoop loop(opts_, model_, sched_, hub_, metrics_);
      loop.run([this] { return stop_.load(); });
    });
    client_.set(zmq::sockopt::linger, 0);
    client_.connect(broker_->endpoint());
  }
  ~ZmqFront() {
    stop_ = true;
    loop_.join();
    broker_->stop(std::chrono::milliseconds(0));
  }

  void send(const std::vector<std::string>& frames) {
    for (size_t i = 0; i < frames.size(); ++i)
      client_.send(zmq::buffer(frames[i]),
                   i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
  // The next reply's JSON (the last frame), or nullopt after `wait`.
  std::optional<json> receive(std::chrono::milliseconds wait) {
    zmq::pollitem_t item{client_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, wait) == 0) return std::nullopt;
    zmq::message_t part;
    do {
      (void)client_.recv(part, zmq::recv_flags::none);
    } while (part.more());
    return json::parse(part.to_string(), nullptr, false);
  }

 private:
  static SchedulerConfig config() {
    SchedulerConfig c;
    c.max_num_seqs = 8;
    c.max_batched_tokens = 256;
    c.max_model_len = 96;
    return c;
  }

  test::FakeModel fake_;
  BlockManager blocks_;
  Scheduler sched_;
  RequestHub hub_;
  ServeMetrics metrics_;
  Qwen25ChatTemplate chat_;
  ModelFacts model_;
  ServeLoopOptions opts_;
  std::atomic<bool> stop_{false};
  std::unique_ptr<ZmqBroker> broker_;
  std::thread loop_;
  zmq::context_t ctx_;
  zmq::socket_t client_{ctx_, zmq::socket_type::dealer};
};

TEST(RequestFuzzEndToEnd, EveryZmqMessageIsAnswered) {
  ZmqFront front;
  fuzz::Generator gen(fuzz::seed() + 3);
  const int64_t n = fuzz::iterations(3000) / 10;
  int failures = 0;
  const auto fail = [&](const std::string& what, const std::string& input) {
    if (++failures <= kMaxFailures)
      ADD_FAILURE() << what << " [seed " << fuzz::seed() << "]\n  " << fuzz::shown(input);
  };
  for (int64_t i = 0; i < n; ++i) {
    fuzz::Case c = gen.zmq_message();
    if (gen.chance(0.03)) c.text.append(ZmqFront::kMaxMessageBytes, ' ');
    if (c.text.size() > ZmqFront::kMaxMessageBytes) c.id.reset();  // refused unread (QM506)
    // The envelope: [json] (DEALER), [empty][json] (REQ-style), or a layout that is refused.
    std::vector<std::string> frames = {c.text};
    bool bad_layout = false;
    const size_t r = gen.pick(100);
    if (r < 10) {
      frames.insert(frames.begin(), "");
    } else if (r < 13) {
      frames = {"x", c.text};
      bad_layout = true;
    } else if (r < 15) {
      frames = {"", "", c.text};
      bad_layout = true;
    }
    front.send(frames);
    std::string type;
    std::vector<json> replies;
    while (type.empty()) {
      const auto reply = front.receive(std::chrono::seconds(20));
      if (!reply) break;
      replies.push_back(*reply);
      if (reply->is_discarded() || !reply->contains("type")) break;
      const std::string t = (*reply)["type"].get<std::string>();
      if (t == "final" || t == "error" || t == "health" || t == "stats") type = t;
    }
    if (type.empty()) {
      fail("no final, error, health or stats reply (" + std::to_string(replies.size()) +
               " replies) for",
           c.text);
      continue;
    }
    const json& last = replies.back();
    if (type == "error") {
      const std::string code = last.value("code", "");
      if (code == "QM999" || code.rfind("QM5", 0) != 0)
        fail("error " + code + " (" + last.value("message", "") + ") for", c.text);
      if (bad_layout && code != "QM500") fail("a bad frame layout got " + code + " for", c.text);
    }
    if (c.id && !bad_layout) {
      const json want = json::parse(*c.id);
      for (const json& reply : replies)
        if (reply.value("id", json()) != want) {
          fail("a reply without the id " + *c.id + ": " + reply.dump().substr(0, 200) + " for",
               c.text);
          break;
        }
    }
    if (type == "final") {
      int64_t streamed = 0;
      bool streaming = false;
      for (const json& reply : replies)
        if (reply["type"] == "delta") {
          streaming = true;
          streamed += int64_t(reply["token_ids"].size());
        }
      if (streaming && streamed != last["usage"]["completion_tokens"].get<int64_t>())
        fail("the deltas hold " + std::to_string(streamed) + " tokens, the final says " +
                 last["usage"]["completion_tokens"].dump() + ", for",
             c.text);
    }
  }
}

}  // namespace
}  // namespace qmpi
