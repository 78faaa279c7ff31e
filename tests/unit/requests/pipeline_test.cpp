// The request pipeline over the scheduler and FakeModel (tests/unit/engine/fake_model.h) with a
// byte-level tokenizer (one token per ASCII byte): n choices, stop strings cut the text and end
// the sequence in the scheduler, deltas add up to the final, cancel and drop free the sequences,
// and a model without a tokenizer gives ids only.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "../engine/fake_model.h"
#include "../expect_error.h"
#include "../text/text_test_util.h"
#include "requests/pipeline.h"

namespace qmpi {
namespace {

constexpr int64_t kVocab = 128;
constexpr int32_t kEos = 10;

const Tokenizer& bytes_tokenizer() {
  static const Tokenizer t = test::from(test::tiny_tokenizer({}));
  return t;
}

class Record final : public RequestSink {
 public:
  void delta(int32_t index, const std::string& text, int32_t token) override {
    EXPECT_FALSE(out || err) << "a delta after the end";
    texts[index] += text;
    ids[index].push_back(token);
  }
  void final(RequestOutput o) override {
    EXPECT_FALSE(out || err) << "two ends";
    out = std::move(o);
  }
  void error(const Error& e) override {
    EXPECT_FALSE(out || err) << "two ends";
    err = e;
  }
  void token_logprobs(int32_t index, float logprob, const std::vector<TokenLogprob>& top) override {
    EXPECT_EQ(streamed_lp[index].size(), ids[index].size()) << "before the token's delta";
    streamed_lp[index].push_back(logprob);
    streamed_top[index] += top.size();
  }
  std::map<int32_t, std::vector<float>> streamed_lp;
  std::map<int32_t, size_t> streamed_top;
  std::map<int32_t, std::string> texts;
  std::map<int32_t, std::vector<int32_t>> ids;
  std::optional<RequestOutput> out;
  std::optional<Error> err;
};

struct Rig {
  explicit Rig(int64_t max_num_seqs = 4)
      : fake(256, 4, kVocab), blocks(256, 4), sched(fake, blocks, config(max_num_seqs)) {
    model.tokenizer = &bytes_tokenizer();
    model.gen.do_sample = false;
    model.eos_ids = {kEos};
    model.max_model_len = 200;
    model.vocab_size = 256;
  }
  static SchedulerConfig config(int64_t max_num_seqs) {
    SchedulerConfig c;
    c.max_num_seqs = max_num_seqs;
    c.max_batched_tokens = 64;
    c.max_model_len = 200;
    return c;
  }
  std::shared_ptr<Record> admit(RequestPipeline& p, int64_t key, const Request& r) {
    auto sink = std::make_shared<Record>();
    p.admit(key, r.custom_id, r, r.prompt_ids, sink);
    return sink;
  }
  void run(RequestPipeline& p) {
    while (!sched.idle()) p.dispatch(sched.step());
  }

  test::FakeModel fake;
  BlockManager blocks;
  Scheduler sched;
  ModelFacts model;
};

Request request(const std::string& id, int64_t max_tokens) {
  Request r;
  r.custom_id = id;
  r.prompt_ids = {'a', 'b', 'c', 'd'};
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  return r;
}

TEST(RequestPipeline, StopStringsCutTheTextAndEndTheSequence) {
  Rig s;
  RequestPipeline p(s.sched, s.model, {0, "m"});
  const auto whole = s.admit(p, 1, request("w", 40));
  s.run(p);
  ASSERT_TRUE(whole->out);
  const std::string text = whole->out->choices[0].text;
  ASSERT_EQ(text.size(), 40u);
  EXPECT_EQ(whole->out->choices[0].finish_reason, "length");
  EXPECT_EQ(whole->out->model, "m");

  // A stop string from the middle of that text: the same request now stops just before it.
  const std::string stop = text.substr(12, 2);
  const size_t at = text.find(stop);
  Request r = request("w", 40);
  r.sampling.stop = {stop};
  const int64_t steps = s.fake.steps();
  const auto cut = s.admit(p, 2, r);
  s.run(p);
  ASSERT_TRUE(cut->out);
  const ChoiceOutput& c = cut->out->choices[0];
  EXPECT_EQ(c.text, text.substr(0, at));
  EXPECT_EQ(c.finish_reason, "stop");
  EXPECT_EQ(cut->texts[0], c.text) << "the deltas add up to the final text";
  EXPECT_EQ(cut->ids[0], c.tokens);
  EXPECT_EQ(c.tokens.size(), at + stop.size()) << "the sequence ends on the stop string";
  EXPECT_LT(s.fake.steps() - steps, 40) << "the scheduler stopped it early";
  EXPECT_EQ(p.active(), 0u);
}

TEST(RequestPipeline, LogprobsReachTheSinkTokenByToken) {
  Rig s;
  RequestPipeline p(s.sched, s.model, {});
  Request r = request("lp", 6);
  r.sampling.logprobs = true;
  r.sampling.top_logprobs = 2;
  const auto sink = s.admit(p, 1, r);
  const auto plain = s.admit(p, 2, request("plain", 6));
  s.run(p);
  ASSERT_TRUE(sink->out);
  EXPECT_EQ(sink->streamed_lp[0], sink->out->choices[0].logprobs)
      << "the streamed logprobs are the final's";
  EXPECT_EQ(sink->streamed_top[0], 12u) << "2 alternatives for each of 6 tokens";
  EXPECT_TRUE(plain->streamed_lp.empty()) << "not asked for, not sent";
}

TEST(RequestPipeline, ChoicesAreSequencesOfTheirOwn) {
  Rig s;
  RequestPipeline p(s.sched, s.model, {});
  Request r = request("n", 12);
  r.sampling.n = 3;
  r.sampling.set(&SamplingParams::temperature, 1.0f);
  r.sampling.logprobs = true;
  r.sampling.top_logprobs = 2;
  const auto rec = s.admit(p, 7, r);
  EXPECT_EQ(s.sched.num_waiting(), 3u);
  s.run(p);
  ASSERT_TRUE(rec->out);
  ASSERT_EQ(rec->out->choices.size(), 3u);
  EXPECT_EQ(rec->out->key, 7);
  EXPECT_EQ(rec->out->custom_id, "n");
  EXPECT_EQ(rec->out->prompt_ids, r.prompt_ids);
  for (int32_t i = 0; i < 3; ++i) {
    const ChoiceOutput& c = rec->out->choices[size_t(i)];
    EXPECT_EQ(c.tokens.size(), 12u);
    EXPECT_EQ(c.logprobs.size(), 12u);
    EXPECT_EQ(c.top.size(), 12u);
    EXPECT_EQ(rec->texts[i], c.text);
  }
  EXPECT_NE(rec->out->choices[0].tokens, rec->out->choices[1].tokens)
      << "choices sample with seeds of their own";
}

TEST(RequestPipeline, CancelAndDropFreeTheSequences) {
  Rig s(1);  // one sequence at a time: the second and third request wait
  RequestPipeline p(s.sched, s.model, {});
  const auto first = s.admit(p, 1, request("a", 30));
  const auto second = s.admit(p, 2, request("b", 30));
  const auto third = s.admit(p, 3, request("c", 30));
  p.dispatch(s.sched.step());
  p.dispatch(s.sched.step());
  EXPECT_EQ(p.drop_unstarted(), 2);
  EXPECT_FALSE(second->out || second->err) << "a dropped request gets no event";
  EXPECT_EQ(s.sched.num_waiting(), 0u);
  p.cancel(1);
  ASSERT_TRUE(first->out);
  EXPECT_EQ(first->out->choices[0].finish_reason, "cancelled");
  EXPECT_EQ(first->out->choices[0].text, first->texts[0]);
  EXPECT_TRUE(s.sched.idle());
  EXPECT_EQ(p.active(), 0u);
  p.cancel(1);  // already finished: ignored
}

TEST(RequestPipeline, RefusedRequestsLeaveNothingBehind) {
  Rig s;
  RequestPipeline p(s.sched, s.model, {});
  testing::expect_error([&] { s.admit(p, 1, request("long", 500)); }, Err::PromptTooLong,
                        {"maximum context length", "--max-model-len"});
  EXPECT_TRUE(s.sched.idle());
  EXPECT_EQ(p.active(), 0u);
  // The model's generation_config.json may say top_k 0 ("off"): the request runs.
  s.model.gen.top_k = 0;
  s.model.gen.do_sample = true;
  const auto rec = s.admit(p, 2, request("k0", 4));
  s.run(p);
  EXPECT_TRUE(rec->out);
}

TEST(RequestPipeline, WithoutATokenizerOnlyIds) {
  Rig s;
  s.model.tokenizer = nullptr;
  RequestPipeline p(s.sched, s.model, {});
  Request r = request("ids", 5);
  const auto rec = s.admit(p, 1, r);
  s.run(p);
  ASSERT_TRUE(rec->out);
  EXPECT_EQ(rec->out->choices[0].tokens.size(), 5u);
  EXPECT_EQ(rec->out->choices[0].text, "");
  r.sampling.stop = {"x"};
  testing::expect_error([&] { s.admit(p, 2, r); }, Err::RequestField, {"tokenizer"});
}

// A sequence lost with its data-parallel replica: serve fails its request with the error, batch
// (requeue_lost) starts the choice again and gets the tokens it would have had.
TEST(RequestPipeline, ALostSequenceFailsItsRequestOrStartsAgain) {
  Rig ref;
  RequestPipeline whole(ref.sched, ref.model, {});
  const auto want = ref.admit(whole, 1, request("a", 12));
  ref.run(whole);
  ASSERT_TRUE(want->out);
  for (bool requeue : {false, true}) {
    Rig s;
    PipelineOptions o;
    o.requeue_lost = requeue;
    RequestPipeline p(s.sched, s.model, o);
    const auto rec = s.admit(p, 1, request("a", 12));
    for (int i = 0; i < 3; ++i) p.dispatch(s.sched.step());
    ASSERT_EQ(rec->ids[0].size(), 3u);
    s.sched.finish(1);  // what the lost replica's scheduler forgot
    TokenEvent lost;
    lost.seq = 1;
    lost.lost = Error(Err::CommTimeout, "replica 1 was lost");
    p.dispatch({lost});
    s.run(p);
    if (requeue) {
      ASSERT_TRUE(rec->out);
      EXPECT_EQ(rec->out->choices[0].tokens, want->out->choices[0].tokens);
      EXPECT_EQ(rec->out->choices[0].text, want->out->choices[0].text);
    } else {
      ASSERT_TRUE(rec->err);
      EXPECT_EQ(rec->err->message(), "replica 1 was lost");
      EXPECT_EQ(p.active(), 0u);
    }
  }
}

}  // namespace
}  // namespace qmpi
