#include "serve/serve_loop.h"

#include <spdlog/spdlog.h>

#include "core/errors.h"
#include "engine/sampler.h"

namespace qmpi {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

ServeEvent event(ServeEvent::Kind kind) {
  ServeEvent e;
  e.kind = kind;
  return e;
}

}  // namespace

ServeLoop::ServeLoop(const ServeLoopOptions& opts, const BatchModel& model, Scheduler& sched,
                     RequestHub& hub, ServeMetrics& metrics, const StepTimes* times)
    : opts_(opts), model_(model), sched_(sched), hub_(hub), metrics_(metrics), times_(times) {}

void ServeLoop::run(const std::function<bool()>& stop_requested) {
  // The first poll is a collective each rank joins once it holds its weights: only after it
  // is the server ready.
  bool draining = stop_requested();
  hub_.set_health(draining ? Health::Draining : Health::Ready);
  publish(draining ? Health::Draining : Health::Ready);
  auto last_poll = Clock::now();
  try {
    for (;;) {
      const bool busy = !sched_.idle();
      RequestHub::Work work =
          hub_.take(busy ? std::chrono::microseconds(0)
                         : std::chrono::duration_cast<std::chrono::microseconds>(opts_.idle_wait));
      for (ServeRequest& r : work.requests) admit(std::move(r));
      for (uint64_t ticket : work.cancels) cancel(ticket);
      if (!sched_.idle()) {
        step();
      } else if (!flushed_) {
        sched_.flush_finished();
        flushed_ = true;
      }
      publish(draining ? Health::Draining : Health::Ready);
      if (!draining) {
        bool stop = opts_.stop_here && opts_.stop_here();
        if (!stop && Clock::now() - last_poll >= opts_.stop_poll) {
          last_poll = Clock::now();
          // A collective over every rank: no step may be in flight in the pipeline.
          for (const TokenEvent& ev : sched_.drain()) on_token(ev, Clock::now());
          flushed_ = false;
          stop = stop_requested();
        }
        if (stop) {
          draining = true;
          hub_.set_health(Health::Draining);
          spdlog::info("stop requested: finishing {} requests in flight, taking no new ones",
                       active_.size() + size_t(hub_.queued()));
        }
      }
      if (draining && sched_.idle() && active_.empty() && hub_.queued() == 0) break;
    }
    if (!flushed_) sched_.flush_finished();
  } catch (const Error& e) {
    // Every request in flight or still queued hears why, before the error ends the job.
    hub_.set_health(Health::Draining);
    fail_all(e);
    for (ServeRequest& r : hub_.take(std::chrono::microseconds(0)).requests) {
      metrics_.request_failed(e.code());
      ServeEvent ev = event(ServeEvent::Kind::Error);
      ev.error = e;
      r.sink->deliver(std::move(ev));
      hub_.finished(r.ticket);
    }
    throw;
  }
}

void ServeLoop::publish(Health h) {
  EngineSnapshot s;
  s.health = h;
  s.waiting = int64_t(sched_.num_waiting());
  s.running = int64_t(sched_.num_running());
  s.requests = int64_t(active_.size());
  s.kv_blocks_used = sched_.pool().in_use();
  s.kv_blocks_total = sched_.pool().num_blocks();
  s.steps = sched_.stats().steps;
  s.preemptions = sched_.stats().preemptions;
  hub_.publish(s);
}

void ServeLoop::admit(ServeRequest r) {
  auto a = std::make_unique<Active>();
  a->r = std::move(r);
  const RequestSampling& rs = a->r.req.sampling;
  try {
    SequenceSpec spec =
        request_sequence_spec(a->r.req, a->r.prompt, model_, opts_.default_max_tokens);
    const uint64_t seed = spec.sampling.seed;
    a->choices.resize(size_t(rs.n));
    for (int32_t c = 0; c < rs.n; ++c) {
      spec.sampling.seed = choice_seed(seed, uint32_t(c));
      Choice& ch = a->choices[size_t(c)];
      ch.seq = sched_.add(spec);
      ch.text = std::make_unique<StopStringMatcher>(*model_.tokenizer, rs.stop, true);
      by_seq_[ch.seq] = {a.get(), size_t(c)};
      ++a->remaining;
    }
  } catch (const Error& e) {
    for (const Choice& ch : a->choices)
      if (ch.seq != 0) {
        sched_.finish(ch.seq);
        by_seq_.erase(ch.seq);
      }
    metrics_.request_failed(e.code());
    ServeEvent ev = event(ServeEvent::Kind::Error);
    ev.error = e;
    a->r.sink->deliver(std::move(ev));
    hub_.finished(a->r.ticket);
    return;
  }
  metrics_.tokens(int64_t(a->r.prompt.size()), 0);
  a->r.sink->deliver(event(ServeEvent::Kind::Accepted));
  const uint64_t ticket = a->r.ticket;
  active_.emplace(ticket, std::move(a));
}

void ServeLoop::cancel(uint64_t ticket) {
  const auto it = active_.find(ticket);
  if (it == active_.end()) return;  // finished while the cancel was on its way
  Active& a = *it->second;
  for (Choice& c : a.choices) {
    if (c.done) continue;
    sched_.finish(c.seq);  // frees its KV blocks now
    by_seq_.erase(c.seq);
    c.done = true;
    c.out.text = c.text->text();
    c.out.finish_reason = "cancelled";
  }
  a.remaining = 0;
  complete(a);
}

void ServeLoop::step() {
  const double comm0 = times_ ? times_->comm_s : 0.0;
  const auto t0 = Clock::now();
  const std::vector<TokenEvent> events = sched_.step();
  const auto now = Clock::now();
  metrics_.step(seconds(now - t0), times_ ? times_->comm_s - comm0 : 0.0);
  flushed_ = false;
  for (const TokenEvent& ev : events) on_token(ev, now);
}

void ServeLoop::on_token(const TokenEvent& ev, Clock::time_point now) {
  const auto it = by_seq_.find(ev.seq);
  if (it == by_seq_.end()) return;  // another choice of its request failed earlier this step
  Active& a = *it->second.first;
  const size_t index = it->second.second;
  Choice& c = a.choices[index];
  c.out.tokens.push_back(ev.token);
  c.out.logprobs.push_back(ev.logprob);
  if (!a.first_token_seen) {
    metrics_.first_token(seconds(now - a.r.arrival));
    a.first_token_seen = true;
  } else if (c.out.tokens.size() > 1) {
    metrics_.next_token(seconds(now - c.last_token));
  }
  c.last_token = now;
  metrics_.tokens(0, 1);

  std::string piece;
  try {
    // A stop id's own text is left out, as in batch (its id stays in token_ids).
    if (ev.finish != FinishReason::Stop) piece = c.text->push(ev.token);
    const bool stopped = c.text->stopped();
    const bool ends = stopped || ev.finish != FinishReason::None;
    if (ends) piece += c.text->finish();
    ServeEvent d;
    d.kind = ServeEvent::Kind::Delta;
    d.index = int32_t(index);
    d.text = std::move(piece);
    d.token_ids = {ev.token};
    a.r.sink->deliver(std::move(d));
    if (stopped && ev.finish == FinishReason::None) sched_.finish(ev.seq);
    if (ends) finish_choice(a, c, stopped ? "stop" : finish_reason_name(ev.finish));
  } catch (const Error& e) {  // a token the tokenizer cannot show
    fail(a, e);
  }
}

void ServeLoop::finish_choice(Active& a, Choice& c, const std::string& reason) {
  c.done = true;
  c.out.text = c.text->text();
  c.out.finish_reason = reason;
  by_seq_.erase(c.seq);
  if (--a.remaining == 0) complete(a);
}

void ServeLoop::complete(Active& a) {
  auto out = std::make_shared<RequestOutput>();
  out->line_no = int64_t(a.r.ticket);
  out->custom_id = a.r.client_id;
  out->endpoint = a.r.req.endpoint;
  out->model = a.r.req.model.empty() ? opts_.model_name : a.r.req.model;
  out->prompt_tokens = int64_t(a.r.prompt.size());
  out->prompt_ids = a.r.prompt;
  out->created = unix_now();
  bool cancelled = false;
  for (Choice& c : a.choices) {
    cancelled = cancelled || c.out.finish_reason == "cancelled";
    out->choices.push_back(std::move(c.out));
  }
  if (cancelled)
    metrics_.request_cancelled();
  else
    metrics_.request_ok();
  ServeEvent ev = event(ServeEvent::Kind::Final);
  ev.result = std::move(out);
  a.r.sink->deliver(std::move(ev));
  hub_.finished(a.r.ticket);
  active_.erase(a.r.ticket);  // `a` is gone from here on
}

void ServeLoop::fail(Active& a, const Error& e) {
  for (const Choice& c : a.choices) {
    if (!c.done) sched_.finish(c.seq);
    by_seq_.erase(c.seq);
  }
  metrics_.request_failed(e.code());
  ServeEvent ev = event(ServeEvent::Kind::Error);
  ev.error = e;
  a.r.sink->deliver(std::move(ev));
  hub_.finished(a.r.ticket);
  active_.erase(a.r.ticket);
}

void ServeLoop::fail_all(const Error& e) {
  while (!active_.empty()) fail(*active_.begin()->second, e);
}

}  // namespace qmpi
