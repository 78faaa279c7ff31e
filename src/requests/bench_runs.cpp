#include "requests/bench_runs.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <unordered_set>

#include "requests/pipeline.h"

namespace qmpi {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// What a bench request has produced so far.
class CountingSink final : public RequestSink {
 public:
  void delta(int32_t, const std::string&, int32_t) override { ++tokens; }
  void final(RequestOutput) override { done = true; }
  void error(const Error& e) override {
    done = true;
    err = e;
  }
  int64_t tokens = 0;
  bool done = false;
  std::optional<Error> err;
};

Request bench_request(int64_t max_tokens) {
  Request r;
  r.custom_id = "bench";
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  r.sampling.set(&SamplingParams::temperature, 0.0f);
  return r;
}

// The tokens in `events`, and the sequences that stepped (one with accepted guesses has several
// events).
std::pair<int64_t, int64_t> tokens_and_sequences(const std::vector<TokenEvent>& events) {
  std::unordered_set<int64_t> seqs;
  int64_t tokens = 0;
  for (const TokenEvent& e : events)
    if (!e.lost) {
      ++tokens;
      seqs.insert(e.seq);
    }
  return {tokens, int64_t(seqs.size())};
}

}  // namespace

std::vector<int32_t> RepeatLastToken::propose(const Sequence& s, int64_t max) {
  const int32_t last = s.output.empty() ? s.spec.prompt.back() : s.output.back();
  return std::vector<int32_t>(size_t(std::min<int64_t>(max, guesses_)), last);
}

int64_t bench_max_tokens(int64_t batch, int64_t prompt_tokens, int64_t gen_len,
                         int64_t max_batched_tokens) {
  const int64_t budget = std::max<int64_t>(max_batched_tokens, 1);
  const int64_t prefill_steps = (batch * prompt_tokens + budget - 1) / budget;
  return gen_len + 2 * prefill_steps + 8;
}

BenchRunner::BenchRunner(SequenceScheduler& sched, const ModelFacts& model, int64_t vocab,
                         uint32_t seed)
    : sched_(sched), model_(model), rng_(seed), token_(0, int32_t(vocab - 1)) {}

std::vector<int32_t> BenchRunner::random_prompt(int64_t n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int32_t& t : p) t = token_(rng_);
  return p;
}

double BenchRunner::time_to_first_token(const std::vector<int32_t>& prompt) {
  RequestPipeline pipeline(sched_, model_, {});
  const auto sink = std::make_shared<CountingSink>();
  const Request req = bench_request(1);
  const auto t0 = Clock::now();
  pipeline.admit(next_key_++, req.custom_id, req, prompt, sink);
  while (!sched_.idle()) pipeline.dispatch(sched_.step());
  const double s = seconds(t0, Clock::now());
  sched_.flush_finished();
  if (sink->err) throw *sink->err;
  return s;
}

DecodeTiming BenchRunner::decode(int64_t batch, const std::vector<int32_t>& prefix,
                                 int64_t prompt_len, int64_t gen_len) {
  DecodeTiming t;
  t.batch = batch;
  t.prompt_tokens = int64_t(prefix.size()) + prompt_len;
  const int64_t room = sched_.config().max_model_len - t.prompt_tokens;
  if (room < gen_len)
    raise(Err::Usage,
          "--max-model-len " + std::to_string(sched_.config().max_model_len) + " leaves room for " +
              std::to_string(room) + " tokens after a " + std::to_string(t.prompt_tokens) +
              "-token prompt, fewer than --gen-len",
          "Raise --max-model-len or leave it out (qmpi bench then sizes it).");
  Request req = bench_request(std::min(
      room, bench_max_tokens(batch, t.prompt_tokens, gen_len, sched_.config().max_batched_tokens)));
  RequestPipeline pipeline(sched_, model_, {});
  std::vector<std::shared_ptr<CountingSink>> sinks;
  std::vector<int64_t> keys;
  const int64_t preempted = sched_.stats().preemptions;
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < batch; ++i) {
    std::vector<int32_t> prompt = prefix;
    const std::vector<int32_t> own = random_prompt(prompt_len);
    prompt.insert(prompt.end(), own.begin(), own.end());
    sinks.push_back(std::make_shared<CountingSink>());
    keys.push_back(next_key_++);
    if (!adapters_.empty()) req.model = adapters_[size_t(i) % adapters_.size()];
    pipeline.admit(keys.back(), req.custom_id, req, std::move(prompt), sinks.back());
  }
  const auto all = [&](auto pred) { return std::all_of(sinks.begin(), sinks.end(), pred); };
  std::optional<Clock::time_point> opened;
  while (!sched_.idle()) {
    const std::vector<TokenEvent> events = sched_.step();
    const auto now = Clock::now();
    pipeline.dispatch(events);
    for (const auto& s : sinks)
      if (s->err) throw *s->err;
    if (opened) {
      const auto [tokens, seqs] = tokens_and_sequences(events);
      t.tokens += tokens;
      t.seq_steps += seqs;
      const bool ended = !all([](const auto& s) { return !s->done; });
      if (ended || t.tokens >= batch * (gen_len - 1)) {
        t.decode_s = seconds(*opened, now);
        break;
      }
    } else if (all([](const auto& s) { return s->tokens > 0; })) {
      if (!all([](const auto& s) { return !s->done; }))
        raise(Err::Usage,
              "the bench's sequences did not all decode together: one ended before the last "
              "one started",
              "Raise --gen-len or --max-batched-tokens, or lower --batch or --prompt-len.");
      opened = now;
      t.prefill_s = seconds(t0, now);
    }
  }
  for (int64_t key : keys) pipeline.cancel(key);
  while (!sched_.idle()) pipeline.dispatch(sched_.step());
  sched_.flush_finished();
  if (t.seq_steps == 0 || t.decode_s <= 0.0)
    raise(Err::Usage, "the bench's sequences ended before any step decoded all of them",
          "Raise --gen-len.");
  t.preemptions = sched_.stats().preemptions - preempted;
  return t;
}

}  // namespace qmpi
