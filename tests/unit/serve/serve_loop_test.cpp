// The serving loop over the scheduler and FakeModel (tests/unit/engine/fake_model.h) with a
// byte-level tokenizer: every request gets Accepted, deltas whose text and ids add up to its
// final, the same tokens as `qmpi batch` gives the same request, whatever runs beside it; a
// cancel ends a request at once and frees its KV blocks; refusals come as errors; a failing
// engine turns every request in flight or queued into an error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "../engine/fake_model.h"
#include "../temp_dir.h"
#include "../text/text_test_util.h"
#include "batch/batch_job.h"
#include "serve/protocol.h"
#include "serve/serve_loop.h"

namespace qmpi {
namespace {

using json = nlohmann::json;

constexpr int64_t kVocab = 128;
constexpr int32_t kEos = 10;

const Tokenizer& bytes_tokenizer() {
  static const Tokenizer t = test::from(test::tiny_tokenizer({}));
  return t;
}

class Collect final : public EventSink {
 public:
  void deliver(ServeEvent ev) override {
    events.push_back(std::move(ev));
    if (on_event) on_event(events.back());
  }
  std::vector<ServeEvent> events;
  std::function<void(const ServeEvent&)> on_event;
};

// Fails every step from the `fail_at`-th on, as a mesh that lost a rank would.
class Failing final : public StepRunner {
 public:
  Failing(StepRunner& inner, int fail_at) : inner_(inner), fail_at_(fail_at) {}
  StepResult run(const StepPlan& plan) override {
    if (++steps_ >= fail_at_) raise(Err::RankDied, "rank 3 died");
    return inner_.run(plan);
  }

 private:
  StepRunner& inner_;
  int fail_at_;
  int steps_ = 0;
};

struct Server {
  // depth > 1: the fake model stands for a pipeline with that many steps in flight.
  explicit Server(int64_t max_queue = 64, int fail_at = 0, int depth = 1)
      : fake(512, 4, kVocab, depth),
        failing(fake, fail_at),
        blocks(512, 4),
        sched(fail_at > 0 ? static_cast<StepRunner&>(failing) : fake, blocks, config()),
        hub(max_queue) {
    model.tokenizer = &bytes_tokenizer();
    model.chat = &chat;
    model.gen.do_sample = false;
    model.eos_ids = {kEos};
    model.max_model_len = 400;
    model.vocab_size = 256;
    opts.model_name = "fake";
    opts.idle_wait = std::chrono::milliseconds(1);
    opts.stop_poll = std::chrono::milliseconds(0);
  }
  static SchedulerConfig config() {
    SchedulerConfig c;
    c.max_num_seqs = 4;
    c.max_batched_tokens = 48;
    c.max_model_len = 400;
    return c;
  }

  // Submits a ZMQ-protocol message; returns its sink.
  std::shared_ptr<Collect> submit(const std::string& message) {
    std::string id;
    ClientMessage m = parse_client_message(message, id);
    ServeRequest r;
    r.client_id = id;
    r.prompt = request_prompt_ids(m.request, model);
    r.req = std::move(m.request);
    r.arrival = std::chrono::steady_clock::now();
    auto sink = std::make_shared<Collect>();
    r.sink = sink;
    tickets.push_back(hub.submit(std::move(r)));
    return sink;
  }

  // Serves what was submitted: ready at the first stop poll, draining from the second.
  void run() {
    int polls = 0;
    ServeLoop loop(opts, model, sched, hub, metrics);
    loop.run([&] { return ++polls > 1; });
  }

  test::FakeModel fake;
  Failing failing;
  BlockManager blocks;
  Scheduler sched;
  RequestHub hub;
  ServeMetrics metrics;
  Qwen25ChatTemplate chat;
  ModelFacts model;
  ServeLoopOptions opts;
  std::vector<uint64_t> tickets;
};

std::string request(const std::string& id, const std::string& prompt, const std::string& extra) {
  json j = extra.empty() ? json::object() : json::parse("{" + extra + "}");
  j["id"] = id;
  j["prompt"] = prompt;
  return j.dump();
}

// Six requests long enough to be in flight whenever the loop is made to stop.
std::vector<std::shared_ptr<Collect>> submit_long_requests(Server& s, const std::string& prefix) {
  std::vector<std::shared_ptr<Collect>> sinks;
  for (int i = 0; i < 6; ++i)
    sinks.push_back(s.submit(
        request(prefix + std::to_string(i), "xyz", "\"max_tokens\": 50, \"ignore_eos\": true")));
  return sinks;
}

// Every request ended with an error of `code`.
void expect_every_request_failed(const std::vector<std::shared_ptr<Collect>>& sinks, Err code) {
  for (const auto& sink : sinks) {
    ASSERT_FALSE(sink->events.empty());
    EXPECT_EQ(sink->events.back().kind, ServeEvent::Kind::Error);
    EXPECT_EQ(sink->events.back().error->code(), code);
  }
}

// The final of a request whose events are in order: Accepted, deltas, Final.
const RequestOutput& check_stream(const Collect& c, const std::string& label) {
  static const RequestOutput empty;
  EXPECT_GE(c.events.size(), 2u) << label;
  if (c.events.size() < 2) return empty;
  EXPECT_EQ(c.events.front().kind, ServeEvent::Kind::Accepted) << label;
  EXPECT_EQ(c.events.back().kind, ServeEvent::Kind::Final) << label;
  if (c.events.back().kind != ServeEvent::Kind::Final) return empty;
  const RequestOutput& out = *c.events.back().result;
  std::map<int32_t, std::string> text;
  std::map<int32_t, std::vector<int32_t>> ids;
  for (size_t i = 1; i + 1 < c.events.size(); ++i) {
    const ServeEvent& e = c.events[i];
    EXPECT_EQ(e.kind, ServeEvent::Kind::Delta) << label;
    text[e.index] += e.text;
    ids[e.index].insert(ids[e.index].end(), e.token_ids.begin(), e.token_ids.end());
  }
  for (size_t i = 0; i < out.choices.size(); ++i) {
    EXPECT_EQ(text[int32_t(i)], out.choices[i].text) << label << " choice " << i;
    EXPECT_EQ(ids[int32_t(i)], out.choices[i].tokens) << label << " choice " << i;
  }
  return out;
}

std::vector<std::string> mixed_requests() {
  std::vector<std::string> in;
  for (int i = 0; i < 12; ++i) {
    json extra = {{"max_tokens", 3 + i % 7}, {"stream", i % 2 == 0}};
    if (i % 3 == 0) extra["ignore_eos"] = true;
    if (i % 4 == 1) extra["temperature"] = 0.9;
    if (i % 5 == 2) extra["n"] = 2;
    const std::string fields = extra.dump();
    in.push_back(request("r" + std::to_string(i), "prompt number " + std::to_string(i * 7),
                         fields.substr(1, fields.size() - 2)));
  }
  return in;
}

TEST(ServeLoop, StreamsAddUpToTheFinalAndMatchBatch) {
  const auto in = mixed_requests();
  Server s;
  std::vector<std::shared_ptr<Collect>> sinks;
  for (const auto& r : in) sinks.push_back(s.submit(r));
  s.run();

  // The same requests through `qmpi batch` (stream off there), one JSONL line each.
  testing::TempDir dir;
  {
    std::ofstream f(dir.file("in.jsonl"));
    for (const auto& r : in) {
      json j = json::parse(r);
      j.erase("stream");
      f << j.dump() << "\n";
    }
  }
  test::FakeModel fake(512, 4, kVocab);
  BlockManager blocks(512, 4);
  Scheduler sched(fake, blocks, Server::config());
  BatchJobOptions bo;
  bo.input = dir.file("in.jsonl");
  bo.output = dir.file("out.jsonl");
  bo.overwrite = true;
  bo.token_ids = true;
  bo.progress_interval_s = 1e9;
  run_batch_job(bo, s.model, sched, [] { return false; });
  std::map<std::string, json> batch;
  std::ifstream out(bo.output);
  for (std::string line; std::getline(out, line);) {
    const json j = json::parse(line);
    batch[j["custom_id"].get<std::string>()] = j["response"]["body"];
  }

  int64_t prompt_tokens = 0, generated = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string id = "r" + std::to_string(i);
    const RequestOutput& got = check_stream(*sinks[i], id);
    const json& want = batch.at(id);
    ASSERT_EQ(got.choices.size(), want["choices"].size()) << id;
    for (size_t c = 0; c < got.choices.size(); ++c) {
      EXPECT_EQ(got.choices[c].tokens, want["choices"][c]["token_ids"].get<std::vector<int32_t>>())
          << id << " choice " << c;
      EXPECT_EQ(got.choices[c].text, want["choices"][c]["text"].get<std::string>()) << id;
      EXPECT_EQ(got.choices[c].finish_reason, want["choices"][c]["finish_reason"]) << id;
      generated += int64_t(got.choices[c].tokens.size());
    }
    EXPECT_EQ(got.prompt_tokens, want["usage"]["prompt_tokens"]) << id;
    prompt_tokens += got.prompt_tokens;
  }
  const MetricCounters c = s.metrics.counters();
  EXPECT_EQ(c.ok, int64_t(in.size()));
  EXPECT_EQ(c.prompt_tokens, prompt_tokens);
  EXPECT_EQ(c.generation_tokens, generated);
  EXPECT_EQ(s.sched.pool().in_use(), 0);
  EXPECT_EQ(s.fake.live_histories(), 0u) << "the last stage dropped finished sequences";
}

// Tokens of every choice of every request, by request id.
std::map<std::string, std::vector<std::vector<int32_t>>> served_tokens(
    const std::vector<std::shared_ptr<Collect>>& sinks) {
  std::map<std::string, std::vector<std::vector<int32_t>>> out;
  for (size_t i = 0; i < sinks.size(); ++i) {
    const std::string id = "r" + std::to_string(i);
    for (const auto& c : check_stream(*sinks[i], id).choices) out[id].push_back(c.tokens);
  }
  return out;
}

TEST(ServeLoop, PipelinedStepsAndASignalToRank0NeedNoCollectivePoll) {
  const auto in = mixed_requests();
  Server one;
  std::vector<std::shared_ptr<Collect>> want_sinks;
  for (const auto& r : in) want_sinks.push_back(one.submit(r));
  one.run();

  Server s(64, 0, 2);
  s.opts.stop_poll = std::chrono::hours(1);  // only the poll on entry
  int checks = 0, polls = 0;
  s.opts.stop_here = [&] { return ++checks > 3; };  // SIGTERM reaches rank 0 after a few steps
  std::vector<std::shared_ptr<Collect>> sinks;
  for (const auto& r : in) sinks.push_back(s.submit(r));
  ServeLoop loop(s.opts, s.model, s.sched, s.hub, s.metrics);
  loop.run([&] {
    ++polls;
    return false;
  });
  EXPECT_EQ(polls, 1) << "the signal to rank 0 should end serving without another poll";
  EXPECT_EQ(s.fake.max_in_flight(), 2u) << "the pipeline should have held two steps";
  EXPECT_EQ(served_tokens(sinks), served_tokens(want_sinks))
      << "pipelined steps changed what a request gets";
  EXPECT_EQ(s.metrics.counters().ok, int64_t(in.size())) << "accepted requests finish the drain";
  EXPECT_EQ(s.sched.pool().in_use(), 0);
}

TEST(ServeLoop, AStopWithNoTimeToDrainFailsEveryRequestAtOnce) {
  Server s;
  s.opts.stop_poll = std::chrono::hours(1);
  int checks = 0;
  s.opts.stop_here = [&] { return ++checks > 2; };  // the launcher's SIGTERM, two steps in
  s.opts.cut_short = [] { return std::optional<Error>(Error(Err::Interrupted, "job ending")); };
  const auto sinks = submit_long_requests(s, "c");
  ServeLoop loop(s.opts, s.model, s.sched, s.hub, s.metrics);
  int polls = 0;
  try {
    loop.run([&] { return ++polls < 0; });
    ADD_FAILURE() << "the loop drained instead of failing the requests";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::Interrupted);
  }
  EXPECT_EQ(polls, 2) << "the first poll, then one over the mesh before failing the requests";
  expect_every_request_failed(sinks, Err::Interrupted);
}

// The launcher's SIGTERM can reach rank 0 between two steps, after a rank died: the last poll
// over the mesh is where that rank's absence shows (the watchdog raises RankDied there), and
// that is the error the clients get, not the launcher's vaguer one.
TEST(ServeLoop, AStopWithNoTimeToDrainNamesARankThatDiedFirst) {
  Server s;
  s.opts.stop_poll = std::chrono::hours(1);
  int checks = 0;
  s.opts.stop_here = [&] { return ++checks > 2; };
  s.opts.cut_short = [] { return std::optional<Error>(Error(Err::Interrupted, "job ending")); };
  const auto sinks = submit_long_requests(s, "c");
  ServeLoop loop(s.opts, s.model, s.sched, s.hub, s.metrics);
  int polls = 0;
  try {
    loop.run([&] {
      if (++polls > 1) raise(Err::RankDied, "rank 1 on host b died");
      return false;
    });
    ADD_FAILURE() << "the loop drained instead of failing the requests";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::RankDied);
  }
  expect_every_request_failed(sinks, Err::RankDied);
}

TEST(ServeLoop, AStopWithNoTimeToDrainButNothingInFlightIsClean) {
  Server s;
  s.opts.stop_here = [] { return true; };
  s.opts.cut_short = [] { return std::optional<Error>(Error(Err::Interrupted, "job ending")); };
  ServeLoop loop(s.opts, s.model, s.sched, s.hub, s.metrics);
  EXPECT_NO_THROW(loop.run([] { return false; }));
}

TEST(ServeLoop, CancelEndsARequestAndFreesItsBlocks) {
  Server s;
  auto keep = s.submit(request("keep", "short one", "\"max_tokens\": 5, \"ignore_eos\": true"));
  auto gone = s.submit(request("gone", "a long one", "\"max_tokens\": 300, \"ignore_eos\": true"));
  const uint64_t ticket = s.tickets.back();
  int64_t used_at_cancel = 0;
  gone->on_event = [&](const ServeEvent& e) {
    if (e.kind == ServeEvent::Kind::Delta && e.token_ids.size() == 1 && gone->events.size() == 4) {
      used_at_cancel = s.sched.pool().in_use();
      s.hub.cancel(ticket);
    }
  };
  s.run();
  const RequestOutput& out = check_stream(*gone, "gone");
  ASSERT_EQ(out.choices.size(), 1u);
  EXPECT_EQ(out.choices[0].finish_reason, "cancelled");
  EXPECT_LT(out.choices[0].tokens.size(), 10u) << "stopped soon after the cancel";
  EXPECT_GT(used_at_cancel, 0);
  EXPECT_EQ(s.sched.pool().in_use(), 0) << "its KV blocks are free again";
  EXPECT_EQ(s.hub.snapshot().kv_blocks_used, 0);
  EXPECT_EQ(check_stream(*keep, "keep").choices[0].tokens.size(), 5u);
  EXPECT_EQ(s.metrics.counters().cancelled, 1);
  EXPECT_EQ(s.metrics.counters().ok, 1);

  s.hub.cancel(ticket);  // a cancel after the end is ignored
}

TEST(ServeLoop, RefusalsAreErrorsAndTheRestIsServed) {
  Server s;
  auto too_long = s.submit(request("long", "abc", "\"max_tokens\": 1000"));
  auto bad_stop = s.submit(request("stop", "abc", "\"stop_token_ids\": [100000]"));
  auto ok = s.submit(request("ok", "abc", "\"max_tokens\": 4"));
  s.run();
  ASSERT_EQ(too_long->events.size(), 1u);
  EXPECT_EQ(too_long->events[0].kind, ServeEvent::Kind::Error);
  EXPECT_EQ(too_long->events[0].error->code(), Err::PromptTooLong);
  ASSERT_EQ(bad_stop->events.size(), 1u);
  EXPECT_EQ(bad_stop->events[0].error->code(), Err::SamplingInvalid);
  check_stream(*ok, "ok");
  EXPECT_EQ(s.metrics.counters().failed, 2);
}

TEST(ServeLoop, BusyPastMaxQueueAndWhileDraining) {
  Server s(2);
  s.submit(request("a", "x", ""));
  s.submit(request("b", "x", ""));
  try {
    s.submit(request("c", "x", ""));
    ADD_FAILURE() << "a third request fit a queue of 2";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::Busy);
    EXPECT_THAT(e.message(), ::testing::HasSubstr("--max-queue 2"));
  }
  s.run();
  EXPECT_EQ(s.hub.snapshot().health, Health::Draining);
  try {
    s.submit(request("d", "x", ""));
    ADD_FAILURE() << "a draining server took a request";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::Busy);
  }
}

TEST(ServeLoop, EngineFailureBecomesErrorsForEveryRequest) {
  Server s(64, 3);
  const auto sinks = submit_long_requests(s, "f");
  try {
    s.run();
    ADD_FAILURE() << "the loop did not pass the engine's error on";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::RankDied);
  }
  expect_every_request_failed(sinks, Err::RankDied);
}

}  // namespace
}  // namespace qmpi
