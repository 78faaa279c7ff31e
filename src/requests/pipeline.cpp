#include "requests/pipeline.h"

#include <algorithm>

#include "core/unix_time.h"

namespace qmpi {

RequestPipeline::RequestPipeline(SequenceScheduler& sched, const ModelFacts& model,
                                 PipelineOptions opts)
    : sched_(sched), model_(model), opts_(std::move(opts)) {}

int64_t RequestPipeline::admit(int64_t key, std::string id, const Request& req,
                               std::vector<int32_t> prompt, std::shared_ptr<RequestSink> sink) {
  if (active_.count(key)) raise(Err::Internal, "request key " + std::to_string(key) + " is in use");
  const RequestSampling& rs = req.sampling;
  if (!model_.tokenizer && !rs.stop.empty())
    raise(Err::RequestField, "stop strings need the model's tokenizer.json");
  auto a = std::make_unique<Active>();
  a->key = key;
  a->id = std::move(id);
  a->endpoint = req.endpoint;
  a->model = req.model.empty() ? opts_.model_name : req.model;
  a->logprobs = rs.logprobs;
  a->top_logprobs = rs.logprobs ? rs.top_logprobs : 0;
  a->sink = std::move(sink);
  a->format = output_format(req, model_.reasoning_parser, model_.tokenizer, prompt);
  // Every prompt checked before any sequence starts; each gets n choices, prompt by prompt.
  std::vector<SequenceSpec> specs;
  specs.push_back(request_sequence_spec(req, prompt, model_, opts_.default_max_tokens));
  for (std::vector<int32_t>& more : more_prompt_ids(req, model_))
    specs.push_back(request_sequence_spec(req, std::move(more), model_, opts_.default_max_tokens));
  for (const SequenceSpec& s : specs) a->prompt_tokens += int64_t(s.prompt.size());
  if (specs.size() == 1) a->prompt = std::move(prompt);
  if (opts_.requeue_lost) a->stop = rs.stop;
  a->choices.resize(specs.size() * size_t(rs.n));
  try {
    size_t index = 0;
    for (SequenceSpec& spec : specs) {
      const uint64_t seed = spec.sampling.seed;
      for (int32_t c = 0; c < rs.n; ++c, ++index) {
        spec.sampling.seed = choice_seed(seed, uint32_t(c));
        Choice& ch = a->choices[index];
        ch.seq = sched_.add(spec);
        if (opts_.requeue_lost) ch.spec = spec;
        if (model_.tokenizer)
          ch.text = std::make_unique<StopStringMatcher>(*model_.tokenizer, rs.stop, true);
        by_seq_[ch.seq] = {a.get(), index};
        ++a->remaining;
      }
    }
  } catch (const Error&) {
    for (const Choice& ch : a->choices)
      if (ch.seq != 0) {
        sched_.finish(ch.seq);
        by_seq_.erase(ch.seq);
      }
    throw;
  }
  const int64_t tokens = a->prompt_tokens;
  active_.emplace(key, std::move(a));
  return tokens;
}

void RequestPipeline::dispatch(const std::vector<TokenEvent>& events) {
  for (const TokenEvent& ev : events) on_token(ev);
}

void RequestPipeline::on_token(const TokenEvent& ev) {
  const auto it = by_seq_.find(ev.seq);
  if (it == by_seq_.end()) return;  // another choice of its request failed earlier this step
  Active& a = *it->second.first;
  const size_t index = it->second.second;
  if (ev.lost) return on_lost(a, index, *ev.lost);
  Choice& c = a.choices[index];
  c.out.tokens.push_back(ev.token);
  c.out.logprobs.push_back(ev.logprob);
  if (a.top_logprobs > 0) c.out.top.push_back(ev.top);

  std::string piece;
  bool stopped = false;
  try {
    // A stop id's own text is left out (eos is special anyway; stop_token_ids may not be), but
    // its id stays in the tokens.
    if (c.text && ev.finish != FinishReason::Stop) piece = c.text->push(ev.token);
    stopped = c.text && c.text->stopped();
    if (c.text && (stopped || ev.finish != FinishReason::None)) piece += c.text->finish();
  } catch (const Error& e) {  // a token the tokenizer cannot show
    return fail(a, e);
  }
  if (a.logprobs) a.sink->token_logprobs(int32_t(index), ev.logprob, ev.top);
  a.sink->delta(int32_t(index), piece, ev.token);
  if (stopped && ev.finish == FinishReason::None) sched_.finish(ev.seq);
  if (stopped || ev.finish != FinishReason::None)
    finish_choice(a, c, stopped ? "stop" : finish_reason_name(ev.finish));
}

// The same spec gives the same tokens on any replica (seeded per request and token), so a
// restarted choice ends as it would have.
void RequestPipeline::on_lost(Active& a, size_t index, const Error& e) {
  if (!opts_.requeue_lost) return fail(a, e);
  Choice& c = a.choices[index];
  by_seq_.erase(c.seq);
  c.out = {};
  if (c.text) c.text = std::make_unique<StopStringMatcher>(*model_.tokenizer, a.stop, true);
  c.seq = sched_.add(c.spec);
  by_seq_[c.seq] = {&a, index};
}

void RequestPipeline::finish_choice(Active& a, Choice& c, const std::string& reason) {
  c.done = true;
  if (c.text) c.out.text = c.text->text();
  c.out.finish_reason = reason;
  by_seq_.erase(c.seq);
  if (--a.remaining == 0) complete(a);
}

void RequestPipeline::complete(Active& a) {
  RequestOutput out;
  out.key = a.key;
  out.custom_id = a.id;
  out.endpoint = a.endpoint;
  out.model = a.model;
  out.prompt_tokens = a.prompt_tokens;
  out.prompt_ids = std::move(a.prompt);
  out.logprobs = a.logprobs;
  out.format = std::move(a.format);
  out.created = unix_seconds();
  for (Choice& c : a.choices) out.choices.push_back(std::move(c.out));
  const std::shared_ptr<RequestSink> sink = std::move(a.sink);
  active_.erase(a.key);  // `a` is gone from here on
  sink->final(std::move(out));
}

void RequestPipeline::fail(Active& a, const Error& e) {
  for (const Choice& c : a.choices) {
    if (!c.done) sched_.finish(c.seq);
    by_seq_.erase(c.seq);
  }
  const std::shared_ptr<RequestSink> sink = std::move(a.sink);
  active_.erase(a.key);
  sink->error(e);
}

void RequestPipeline::cancel(int64_t key) {
  const auto it = active_.find(key);
  if (it == active_.end()) return;
  Active& a = *it->second;
  for (Choice& c : a.choices) {
    if (c.done) continue;
    sched_.finish(c.seq);  // frees its KV blocks now
    by_seq_.erase(c.seq);
    c.done = true;
    if (c.text) c.out.text = c.text->text();
    c.out.finish_reason = "cancelled";
  }
  a.remaining = 0;
  complete(a);
}

int64_t RequestPipeline::drop_unstarted() {
  std::vector<int64_t> idle;
  for (const auto& [key, a] : active_) {
    const bool untouched = std::all_of(a->choices.begin(), a->choices.end(), [&](const Choice& c) {
      const Sequence* s = sched_.find(c.seq);
      return s && s->state == SeqState::Waiting && s->output.empty();
    });
    if (untouched) idle.push_back(key);
  }
  for (int64_t key : idle) {
    for (const Choice& c : active_[key]->choices) {
      sched_.finish(c.seq);
      by_seq_.erase(c.seq);
    }
    active_.erase(key);
  }
  return int64_t(idle.size());
}

void RequestPipeline::fail_all(const Error& e) {
  while (!active_.empty()) fail(*active_.begin()->second, e);
}

}  // namespace qmpi
